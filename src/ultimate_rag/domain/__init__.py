"""Pure domain: models, statuses and their transitions, errors, ports. No I/O here."""
