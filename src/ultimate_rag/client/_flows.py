"""The client logic that waits or retries, written once for both clients: each flow is a generator
that yields effects (an HTTP request, a sleep, a line of an event stream) and gets back what the
effect gave. ``Client`` runs flows with blocking I/O, ``AsyncClient`` awaits each effect."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx

from ._core import RETRY_STATUSES, Call, RetryPolicy, read_answer
from .errors import NotFound, TransportError
from .models import KnowledgeBase, Page

T = TypeVar("T")


@dataclass(frozen=True)
class Request:
    """Send ``call`` once: gives the response, or raises the transport error."""

    call: Call[Any]


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class OpenEvents:
    """Open an event stream (one at a time); an error answer raises its ApiError."""

    path: str
    params: dict[str, Any]


@dataclass(frozen=True)
class NextLine:
    """The stream's next line; None at its end."""


@dataclass(frozen=True)
class CloseEvents:
    pass


Effect = Request | Sleep | OpenEvents | NextLine | CloseEvents
Flow = Generator[Effect, Any, T]


class Step(Generic[T]):
    """Drives a flow: perform ``effect``, then ``send`` its result (or ``throw`` its error), until
    ``done``; an error the flow does not handle comes out of ``send`` or ``throw``."""

    def __init__(self, flow: Flow[T]) -> None:
        self._flow = flow
        self.effect: Effect = CloseEvents()
        self._result: list[T] = []
        self._advance(lambda: next(flow))

    @property
    def done(self) -> bool:
        return bool(self._result)

    @property
    def result(self) -> T:
        return self._result[0]

    def send(self, value: Any) -> None:
        self._advance(lambda: self._flow.send(value))

    def throw(self, error: BaseException) -> None:
        self._advance(lambda: self._flow.throw(error))

    def _advance(self, step: Callable[[], Effect]) -> None:
        try:
            self.effect = step()
        except StopIteration as stop:
            self._result.append(stop.value)


def run(flow: Flow[T], perform: Callable[[Effect], Any]) -> T:
    """Runs a flow with blocking effects."""
    step = Step(flow)
    while not step.done:
        try:
            value = perform(step.effect)
        except Exception as exc:
            step.throw(exc)
        else:
            step.send(value)
    return step.result


async def arun(flow: Flow[T], perform: Callable[[Effect], Awaitable[Any]]) -> T:
    """Runs a flow with awaited effects."""
    step = Step(flow)
    while not step.done:
        try:
            value = await perform(step.effect)
        except Exception as exc:
            step.throw(exc)
        else:
            step.send(value)
    return step.result


@contextmanager
def request_kwargs(call: Call[Any]) -> Iterator[dict[str, Any]]:
    """What ``httpx`` needs to send ``call``; an upload's file is opened for the request and closed after."""
    kwargs: dict[str, Any] = {"params": call.params}
    if call.json is not None:
        kwargs["json"] = call.json
    if call.timeout is not None:
        kwargs["timeout"] = httpx.Timeout(call.timeout, connect=10.0)
    if call.upload is None:
        yield kwargs
        return
    stream, size, owned = call.upload.open()
    try:
        kwargs["files"] = call.upload.files(stream, size)
        if fields := call.upload.fields():
            kwargs["data"] = fields
        yield kwargs
    finally:
        if owned:
            stream.close()


def send(call: Call[T], retry: RetryPolicy) -> Flow[T]:
    """One call, retried with backoff on 429/503 and on failed connections (any transport error
    when the call is idempotent)."""
    attempt = 0
    while True:
        response: httpx.Response | None
        try:
            response = yield Request(call)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            response = None
            if attempt >= retry.retries:
                raise TransportError(f"cannot reach the server: {exc}") from exc
        except httpx.TransportError as exc:
            if not call.idempotent or attempt >= retry.retries:
                raise TransportError(f"the connection failed: {exc}") from exc
            response = None
        if response is not None and (response.status_code not in RETRY_STATUSES or attempt >= retry.retries):
            return call.parse(read_answer(response))
        yield Sleep(retry.delay(attempt, response))
        attempt += 1


def pages(call_for: Callable[[str | None], Call[Page[T]]], retry: RetryPolicy) -> Flow[list[T]]:
    """Every item of a paged listing (``call_for(cursor)`` asks for one page)."""
    items: list[T] = []
    cursor = None
    while True:
        page = yield from send(call_for(cursor), retry)
        items.extend(page.items)
        if not page.next_cursor:
            return items
        cursor = page.next_cursor


def find_knowledge_base(kbs: Iterable[KnowledgeBase], name_or_id: str) -> KnowledgeBase:
    for kb in kbs:
        if name_or_id in (kb.id, kb.name):
            return kb
    raise NotFound(404, f"no knowledge base named or with id {name_or_id!r} is visible to this key")
