"""Application services: submit, the processing pipeline, the worker loop, documents, search."""
