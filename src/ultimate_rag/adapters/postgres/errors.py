"""The driver's errors as domain errors (domain/errors.py): every pooled connection of ``Database``
raises these instead of psycopg's, with the driver's error as ``__cause__``. Values the database can
never store become ``UnstorableValueError`` (permanent: the same data fails the same way), a lost or
unreachable server ``DatabaseUnavailableError`` (transient), anything else ``DatabaseError``."""

from __future__ import annotations

import psycopg
from psycopg import errors as pg

from ...domain.errors import DatabaseError, DatabaseUnavailableError, StatementTimeoutError, UnstorableValueError

# SQLSTATE classes whose errors depend only on the data written: the same data fails the same way
_DATA_REASONS: tuple[tuple[type[BaseException], str], ...] = (
    (pg.CharacterNotInRepertoire, "characters that are not valid in the database's encoding"),
    (pg.UntranslatableCharacter, "characters the database's encoding cannot represent"),
    (pg.NumericValueOutOfRange, "a number outside the range the database can store"),
    (pg.StringDataRightTruncation, "a value longer than the database allows"),
    (pg.ProgramLimitExceeded, "a value larger than a database limit allows"),
)
MAX_MESSAGE_CHARS = 2000


def translated(exc: psycopg.Error) -> DatabaseError:
    """The domain error for a driver error, the driver's as its ``__cause__`` (raise it ``from exc``)."""
    error: DatabaseError
    raw = f"{exc.__class__.__name__}: {str(exc).strip() or exc.__class__.__name__}"[:MAX_MESSAGE_CHARS]
    if isinstance(exc, psycopg.DataError | pg.ProgramLimitExceeded):
        error = UnstorableValueError(f"the document contains data the database cannot store: {_data_reason(exc)}")
    elif isinstance(exc, pg.QueryCanceled) and "statement timeout" in str(exc):
        error = StatementTimeoutError(raw, code="statement timeout")
    elif isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        error = DatabaseUnavailableError(raw)
    else:
        error = DatabaseError(raw)
    error.__cause__ = exc
    return error


def caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether a translated error came from the driver error ``kind`` (a unique violation, ...)."""
    return isinstance(exc, DatabaseError) and isinstance(exc.__cause__, kind)


def _data_reason(exc: BaseException) -> str:
    text = str(exc)
    if "NUL" in text or "\\u0000" in text:  # psycopg refuses these in a text itself; the server in JSON
        return "a NUL character (0x00) in its text"
    for kind, reason in _DATA_REASONS:
        if isinstance(exc, kind):
            return reason
    return "a value the database refuses"
