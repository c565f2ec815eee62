"""What a backend offers the process around it: a readiness check, and a close for its clients."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Pingable(Protocol):
    async def ping(self) -> bool:
        """The backend answers (remote ones: object storage, vector index, embedding server)."""
        ...


@runtime_checkable
class Closable(Protocol):
    async def aclose(self) -> None:
        """Close the HTTP or gRPC clients it holds."""
        ...
