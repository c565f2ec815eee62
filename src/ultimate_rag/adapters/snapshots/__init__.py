"""snapshots adapters."""
