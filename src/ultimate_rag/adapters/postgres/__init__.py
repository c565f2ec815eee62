"""PostgreSQL: the only thing API and worker processes share for coordination."""
