"""Image descriptions from a vision model (optional)."""

from .openai_compatible import OpenAICompatibleVision

__all__ = ["OpenAICompatibleVision"]
