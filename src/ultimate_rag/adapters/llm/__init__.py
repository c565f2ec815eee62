"""Chat models for grounded answers (the ``ChatModel`` port)."""

from .openai_compatible import OpenAICompatibleChat

__all__ = ["OpenAICompatibleChat"]
