"""Domain errors. Each carries a message a user can read; only the API maps them to HTTP codes.

Permanent errors fail a document at once; everything else that escapes a pipeline stage is
treated as transient and retried with backoff (SPEC §4, seed 002 §7).
"""

from __future__ import annotations


class UltimateRagError(Exception):
    """Something went wrong in ultimate-rag.

    ``service`` names the dependency that failed ("database", "object storage", "embedding service",
    "vector index", "vision model") when the message is that dependency's own, raw words (hosts,
    users, buckets): those go to the log, and users read the reason ``services/failures.py`` maps
    them to. ``code`` is a short, safe detail for that reason ("HTTP 503", "ConnectionError")."""

    def __init__(self, message: str | None = None, *, service: str | None = None, code: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())
        self.service = service
        self.code = code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class PermanentError(UltimateRagError):
    """The document cannot be processed; retrying will not help."""


class TransientError(UltimateRagError):
    """A dependency failed temporarily; the job will be retried."""


class InvalidDocumentError(PermanentError):
    """The document is invalid or empty."""


class ResourceNotFoundError(PermanentError):
    """The requested resource does not exist."""


class UnsupportedFormatError(InvalidDocumentError):
    """No parser accepts this file format."""

    def __init__(self, message: str | None = None, supported_formats: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.supported_formats = supported_formats


class FileTooLargeError(InvalidDocumentError):
    """The file is larger than the configured upload limit."""


class InvalidRequestError(UltimateRagError):
    """The request is invalid."""


class UnprocessableRequestError(InvalidRequestError):
    """Well-formed, but its values cannot be used (an unknown embedder, a wrong dimension): 422."""


class ConflictError(UltimateRagError):
    """The resource is busy or in a state that does not allow this operation."""


class InvalidTransitionError(ConflictError):
    """That status transition is not allowed."""


class DatabaseError(UltimateRagError):
    """A statement failed in the database (the driver's raw words are the message, and the driver's
    error is the ``__cause__``; the postgres adapters raise these, never the driver's own)."""

    def __init__(self, message: str | None = None, *, service: str | None = "database",
                 code: str | None = None) -> None:
        super().__init__(message, service=service, code=code)


class DatabaseUnavailableError(DatabaseError, TransientError):
    """The database could not be reached, broke the connection, or no pooled connection was free in time."""


class StatementTimeoutError(DatabaseError, TransientError):
    """A statement ran longer than the pool's statement timeout and the server cancelled it."""


class UnstorableValueError(DatabaseError, PermanentError):
    """A value the database can never store (a NUL character, a number out of range, a value beyond a
    size limit): the same data fails the same way on every retry. The message says what, for users."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message, service=None)


class LeaseLostError(UltimateRagError):
    """This worker no longer owns the job (its lease expired or an operator ended it)."""


class RateLimitedError(TransientError):
    """The embedding provider asked us to slow down."""

    def __init__(self, message: str | None = None, retry_after: float = 1.0, *, service: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message, service=service, code=code)
        self.retry_after = retry_after


class GenerationGone(Exception):
    """The index generation a search planned to read was dropped meanwhile (its migration switched):
    the search reads the plan again."""


class EventsUnavailable(Exception):
    """Listening for document changes is not possible right now: callers fall back to polling."""


class AuthenticationError(UltimateRagError):
    """Missing or invalid API key."""


class ProviderError(UltimateRagError):
    """The language model provider failed."""


class ProviderTimeoutError(ProviderError):
    """The language model provider did not answer in time."""


class ProviderRateLimitedError(ProviderError):
    """The language model provider asked us to wait longer than we may."""

    def __init__(self, message: str | None = None, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after
