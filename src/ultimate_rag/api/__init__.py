"""HTTP interface (FastAPI)."""
