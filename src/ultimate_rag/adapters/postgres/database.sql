-- The pool's own statements (database.py).

-- ping --
SELECT 1 AS ok;
