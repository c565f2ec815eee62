"""The one mapping from an exception to (permanent?, the reason users read): raw infrastructure text
(hosts, buckets, keys, users) never reaches the reason, and deterministic data errors are permanent."""

from __future__ import annotations

import psycopg
from botocore.exceptions import ClientError, EndpointConnectionError

from ultimate_rag.adapters.postgres.errors import translated
from ultimate_rag.adapters.storage.s3 import _mapped
from ultimate_rag.domain.errors import InvalidDocumentError, PermanentError, TransientError
from ultimate_rag.services.failures import explain


def s3_error(code: str, status: int) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "bucket acme-prod-docs at s3.internal:9000"},
                        "ResponseMetadata": {"HTTPStatusCode": status}}, "GetObject")


def test_object_storage_errors_name_the_service_and_status_only() -> None:
    failure = explain(_mapped(s3_error("ServiceUnavailable", 503), "get kb/doc/source.pdf", "kb/doc/source.pdf"))
    assert not failure.permanent and failure.reason == "the object storage failed (HTTP 503)"
    assert "acme-prod-docs" in failure.detail  # the operator's log keeps the raw text
    denied = explain(_mapped(s3_error("AccessDenied", 403), "put x"))
    assert denied.permanent and denied.reason == (
        "the object storage refused the request (HTTP 403); an operator must check its settings")
    unreachable = explain(_mapped(EndpointConnectionError(endpoint_url="http://s3.internal:9000"), "get x"))
    assert unreachable.reason == "the object storage was unavailable" and "s3.internal" not in unreachable.reason


def test_database_and_foreign_errors_are_transient_and_mapped() -> None:
    down = explain(translated(psycopg.OperationalError('connection to server at "db.internal" (10.0.3.7) failed')))
    assert not down.permanent and down.reason == "the database was unavailable" and "db.internal" in down.detail
    stray = explain(psycopg.OperationalError("db.internal"))  # a driver error no adapter translated
    assert not stray.permanent and stray.reason == "the database was unavailable"
    raw = explain(OSError(113, "No route to host: embed.internal"))
    assert not raw.permanent and "embed.internal" not in raw.reason
    assert explain(RuntimeError("secret at host")).reason == "an unexpected internal error occurred (RuntimeError)"


def test_our_own_words_pass_through() -> None:
    assert explain(InvalidDocumentError("the document contains no text to index")) == explain(
        InvalidDocumentError("the document contains no text to index"))
    own = explain(TransientError("attempt later"))
    assert (own.permanent, own.reason, own.mapped) == (False, "attempt later", False)
    assert explain(PermanentError("nope")).permanent


def test_a_nul_refused_by_the_driver_is_permanent() -> None:
    failure = explain(translated(psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")))
    assert failure.permanent and "cannot contain NUL" in failure.detail
    assert failure.reason == "the document contains data the database cannot store: a NUL character (0x00) in its text"


def test_a_reason_never_holds_a_nul_itself() -> None:
    failure = explain(InvalidDocumentError("could not parse the file: bad byte \x00 here"))
    assert "\x00" not in failure.reason and failure.permanent


def _wrapped(cause: BaseException, error: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException as exc:
            raise error from exc
    except BaseException as raised:
        return raised


def test_a_dependency_that_cannot_be_reached_is_an_outage_and_the_document_s_own_errors_are_not() -> None:
    """Outages give their attempt back (SPEC §4); an error that may be this document's still counts."""
    import httpx
    from psycopg_pool import PoolTimeout

    outages = [
        psycopg.OperationalError("server closed the connection unexpectedly"),
        PoolTimeout("couldn't get a connection after 10.00 sec"),
        _wrapped(EndpointConnectionError(endpoint_url="http://s3.internal:9000"),  # raised from it, as s3.py does
                 _mapped(EndpointConnectionError(endpoint_url="http://s3.internal:9000"), "get x")),
        _mapped(s3_error("SlowDown", 503), "put x"),
        _wrapped(httpx.ConnectError("refused"), TransientError("unreachable", service="embedding service",
                                                                 code="ConnectError")),
        TransientError("the endpoint failed with HTTP 503", service="embedding service", code="HTTP 503"),
        ConnectionRefusedError("refused"),
    ]
    own = [
        TransientError("the endpoint failed with HTTP 500", service="embedding service", code="HTTP 500"),
        TransientError("unreadable answer", service="embedding service", code="unreadable answer"),
        psycopg.errors.UniqueViolation("duplicate key"),
        TimeoutError("the model took too long"),
        RuntimeError("a bug"),
        _mapped(s3_error("AccessDenied", 403), "put x"),
    ]
    assert [explain(e).outage for e in outages] == [True] * len(outages)
    assert [explain(e).outage for e in own] == [False] * len(own)
