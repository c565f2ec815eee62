"""Adapters: PostgreSQL, object storage, vector stores, parsers, chunking, embedders, snapshots."""
