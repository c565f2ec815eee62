"""ultimate-rag: durable document ingestion and retrieval for RAG knowledge bases."""

__version__ = "0.1.0"
