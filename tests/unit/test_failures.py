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
