"""Rerankers: a cross-encoder behind an HTTP rerank API (http.py)."""
