"""The embedding feature's services: a knowledge base's passages embedded through the cache and the
process's engine (``passages.py``), each knowledge base's own model and where its vectors go
(``models.py``), and moving a knowledge base to another model through a new index generation
(``migration.py``). The domain side is ``domain/embedding_models.py``."""

from .migration import EmbeddingMigrations
from .models import EmbeddingModels
from .passages import EmbeddingService

__all__ = ["EmbeddingMigrations", "EmbeddingModels", "EmbeddingService"]
