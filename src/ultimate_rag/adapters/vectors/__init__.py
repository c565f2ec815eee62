"""vectors adapters."""
