"""Chat models for grounded answers (the ``ChatModel`` port)."""

from .endpoints import is_local_endpoint, provider_timeout
from .openai_compatible import OpenAICompatibleChat

__all__ = ["OpenAICompatibleChat", "is_local_endpoint", "provider_timeout"]
