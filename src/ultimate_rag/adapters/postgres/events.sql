-- Document change events. Loaded by name ("-- name --" headers). The listen statement carries no
-- comment of its own, so pg_stat_activity shows the LISTEN itself: {channel} is events.CHANNEL,
-- the channel migration 0003's documents trigger notifies (an identifier, composed in Python).

-- listen --
LISTEN {channel};
