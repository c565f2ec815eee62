"""What a failure means for a document, in one place: whether retrying can help, and the reason a
user reads (``error_message``, the job's error history, a connector's last error — all shown to
readers of the knowledge base).

Infrastructure errors carry their dependency's raw words — hosts, addresses, users, buckets, keys —
which are for operators: they go to the log (with the document and job ids of the log context), and
users read a mapped reason instead ("the database was unavailable", "the embedding service failed
(HTTP 503)"). Our own errors without a ``service`` are already worded for users and pass through.

Deterministic data errors are permanent: a value the database refuses (a NUL character, a
character outside the encoding, a number out of range, a value beyond a size limit) is refused
again on every retry, so the document fails at once with a readable reason instead of retrying
behind the backlog. The postgres adapters decide that (``UnstorableValueError``): the driver's
errors reach no service.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..domain.errors import (
    DatabaseError,
    DatabaseUnavailableError,
    PermanentError,
    RateLimitedError,
    UltimateRagError,
)

MAX_DETAIL_CHARS = 2000
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Failure:
    permanent: bool
    reason: str  # what users read
    detail: str  # what the log gets: the raw text, with the exception's type
    unexpected: bool = False  # no known kind: the log wants its traceback
    outage: bool = False  # a dependency could not be reached: not the document's fault (see ``is_outage``)

    @property
    def mapped(self) -> bool:
        return self.reason != self.detail


def explain(exc: BaseException) -> Failure:
    """Classify ``exc`` and word it for a user; ``detail`` keeps the raw text for the log. Neither
    holds a NUL: recording the failure must not fail the way the document did."""
    failure = _explain(exc)
    return Failure(failure.permanent, _storable(failure.reason), _storable(failure.detail), failure.unexpected,
                   outage=not failure.permanent and is_outage(exc))


# HTTP answers that say the service is down or overloaded, not that it refused this request
_UNAVAILABLE_CODES = frozenset({"HTTP 502", "HTTP 503", "HTTP 504"})
# connection-level failures of the clients, by module and class name (none is imported here): the
# database driver's and its pool's, the HTTP clients', the S3 client's
_TRANSPORT = {"psycopg": {"OperationalError", "InterfaceError"}, "psycopg_pool": {"PoolTimeout"},
              "httpx": {"TransportError"}, "httpcore": {"NetworkError", "TimeoutException"},
              "botocore": {"HTTPClientError", "ConnectionError"}}
# the database answered, but gave up on this statement: it may be this document's (not an outage)
_STATEMENT_GIVEN_UP = frozenset({"QueryCanceled", "LockNotAvailable"})


def is_outage(exc: BaseException) -> bool:
    """A dependency was unavailable (SPEC §4: an infrastructure failure gives its attempt back):
    the database's connection failed or could not be had, a service could not be reached (refused,
    reset, timed out) or answered that it is down (502, 503, 504) or rate limiting. An error that
    may come from this document's content (a 500, a refusal, an unreadable answer, a statement
    the database cancelled) is not one: it counts like any transient failure, so a document that
    always causes it still ends. The whole chain of causes is looked at: adapters wrap their
    client's errors."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.add(id(current))
        if type(current).__name__ in _STATEMENT_GIVEN_UP:
            return False
        if _unavailable(current):
            return not any(type(c).__name__ in _STATEMENT_GIVEN_UP for c in _causes(current))
        current = current.__cause__ or current.__context__
    return False


def _causes(exc: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    current = exc.__cause__ or exc.__context__
    while current is not None and len(found) < 16 and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def _unavailable(exc: BaseException) -> bool:
    if isinstance(exc, DatabaseUnavailableError | RateLimitedError | ConnectionError):
        return True
    if isinstance(exc, UltimateRagError):
        return exc.service is not None and exc.code in _UNAVAILABLE_CODES
    return any(t.__name__ in _TRANSPORT.get(t.__module__.split(".")[0], ()) for t in type(exc).__mro__)


def _explain(exc: BaseException) -> Failure:
    detail = _raw(exc)
    if isinstance(exc, UltimateRagError):
        permanent = isinstance(exc, PermanentError)
        if exc.service is None:  # worded for users already; a refused value's raw words go to the log
            raw = _raw(exc.__cause__) if isinstance(exc, DatabaseError) and exc.__cause__ else exc.message
            return Failure(permanent, exc.message, raw)
        return Failure(permanent, service_reason(exc.service, exc.code, permanent=permanent),
                       exc.message[:MAX_DETAIL_CHARS])
    if _from_module(exc, "psycopg", "psycopg_pool"):  # one that did not pass the adapters' translation
        return Failure(False, service_reason("database", None, permanent=False), detail)
    if _from_module(exc, "botocore", "boto3", "s3transfer"):
        return Failure(False, service_reason("object storage", None, permanent=False), detail)
    if isinstance(exc, MemoryError):
        return Failure(False, "the worker ran out of memory", detail)
    if isinstance(exc, TimeoutError):
        return Failure(False, "an operation timed out", detail)
    if isinstance(exc, OSError):
        return Failure(False, f"a storage or network operation failed ({exc.__class__.__name__})", detail)
    return Failure(False, f"an unexpected internal error occurred ({exc.__class__.__name__})", detail, True)


def reason_for(exc: BaseException) -> str:
    """What users read about ``exc`` where no job log line carries its raw text (a connector's
    document and its sync's errors): the mapped reason, the raw text logged here."""
    failure = explain(exc)
    if failure.mapped:
        log.warning("%s [%s]", failure.reason, failure.detail)
    return failure.reason


def service_reason(service: str, code: str | None, *, permanent: bool) -> str:
    if permanent:
        return f"the {service} refused the request{f' ({code})' if code else ''}; an operator must check its settings"
    return f"the {service} failed ({code})" if code else f"the {service} was unavailable"


def _storable(text: str) -> str:
    return text.replace("\x00", "\\x00")


def _raw(exc: BaseException) -> str:
    text = str(exc).strip() or exc.__class__.__name__
    return f"{exc.__class__.__name__}: {text}"[:MAX_DETAIL_CHARS]


def _from_module(exc: BaseException, *prefixes: str) -> bool:
    return any(t.__module__.split(".")[0] in prefixes for t in type(exc).__mro__)
