"""A document's own fields (SPEC §10, docs/metadata.md): a JSON object of strings, numbers,
booleans, ISO 8601 dates (strings), lists of strings and nested objects, bounded in size, depth and
key syntax. The user writes every top-level key but the reserved ones, which the product fills in
(document properties, Markdown front matter, S3 object metadata, where the file came from).

Pure: validation with the path of the offending field in the message, the merge of a PATCH
(JSON Merge Patch, RFC 7396), the cleaning of what parsers and connectors find (never an error:
what does not fit is left out), and the ISO 8601 rule for dates that filters compare."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any

from .errors import UnprocessableRequestError

MAX_BYTES = 16 * 1024  # the whole object as compact JSON (UTF-8)
MAX_KEYS = 64  # per object
MAX_DEPTH = 3  # objects inside objects: {"a": {"b": {"c": 1}}} is depth 3
MAX_STRING = 2048  # characters of one string
MAX_LIST = 100  # strings in one list
# a key: a letter or "_" (any script), then letters, digits, "_" or "-"; dots separate a filter's
# path (doc.author), so they are not allowed in a key
KEY = re.compile(r"^[^\W\d][\w-]{0,63}$")

# top-level keys the product fills in; the API refuses them from users
DOCUMENT_PROPERTIES = "doc"  # title, author, created, modified: from the file's own properties
FRONT_MATTER = "front_matter"  # a Markdown file's front matter fields
S3_METADATA = "s3"  # an S3 object's user metadata (x-amz-meta-*)
SOURCE = "source"  # where the file came from: path, folder, folders (a connector or an ingested folder)
RESERVED = frozenset({DOCUMENT_PROPERTIES, FRONT_MATTER, S3_METADATA, SOURCE})
PARSED = (DOCUMENT_PROPERTIES, FRONT_MATTER)  # written with each published revision
FETCHED = (S3_METADATA, SOURCE)  # written when the file is stored

# ISO 8601 as filters compare it: a date, or a date and time (seconds and fraction optional) with
# an optional offset; without one it is UTC. The same rule as metadata_instant() in PostgreSQL.
INSTANT = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?)?$")


class MetadataError(UnprocessableRequestError):
    """The metadata is not valid."""


def instant(value: object) -> datetime | None:
    """The moment an ISO 8601 date or date-time string names (aware, UTC when it has no offset), or
    None when ``value`` is not one."""
    if not isinstance(value, str) or not INSTANT.match(value):
        return None
    text = value.replace(" ", "T", 1)
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    elif "T" in text and re.search(r"[+-]\d{2}$", text):
        text += ":00"
    try:
        moment = datetime.fromisoformat(text) if "T" in text else datetime.combine(date.fromisoformat(text),
                                                                                    datetime.min.time())
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def validate(value: object, *, where: str = "metadata", reserved: bool = False) -> dict[str, Any]:
    """``value`` as stored metadata, or ``MetadataError`` naming the field. ``reserved``: the
    product's own keys are allowed (connectors and parsers write them)."""
    if not isinstance(value, Mapping):
        raise MetadataError(f"{where} must be a JSON object")
    out = _object(value, where, 1)
    if not reserved:
        for key in out:
            if key in RESERVED:
                raise MetadataError(f"{where}.{key}: reserved key (filled in by ultimate-rag: "
                                    f"{', '.join(sorted(RESERVED))})")
    size = len(json.dumps(out, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_BYTES:
        raise MetadataError(f"{where} is {size} bytes as JSON; at most {MAX_BYTES} are allowed")
    return out


def _object(value: Mapping[Any, Any], where: str, depth: int) -> dict[str, Any]:
    if depth > MAX_DEPTH:
        raise MetadataError(f"{where}: objects may be nested at most {MAX_DEPTH} deep")
    if len(value) > MAX_KEYS:
        raise MetadataError(f"{where}: at most {MAX_KEYS} keys per object")
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not KEY.match(key):
            raise MetadataError(f"{where}: invalid key {str(key)[:80]!r} (a letter or _, then letters, digits, "
                                "_ or -; at most 64 characters; no dots)")
        out[key] = _value(item, f"{where}.{key}", depth)
    return out


def _value(item: object, where: str, depth: int) -> Any:
    if isinstance(item, bool) or is_number(item):
        return item
    if isinstance(item, float | int):
        raise MetadataError(f"{where}: numbers must be finite")
    if isinstance(item, str):
        return _string(item, where)
    if isinstance(item, list):
        if len(item) > MAX_LIST:
            raise MetadataError(f"{where}: at most {MAX_LIST} items in a list")
        for i, element in enumerate(item):
            if not isinstance(element, str):
                raise MetadataError(f"{where}[{i}]: lists hold strings only")
            _string(element, f"{where}[{i}]")
        return list(item)
    if isinstance(item, Mapping):
        return _object(item, where, depth + 1)
    if item is None:
        raise MetadataError(f"{where}: null is not a value (leave the key out; in a PATCH, null removes it)")
    raise MetadataError(f"{where}: must be a string, number, boolean, list of strings or object")


def _string(item: str, where: str) -> str:
    if len(item) > MAX_STRING:
        raise MetadataError(f"{where}: strings are at most {MAX_STRING} characters")
    if "\x00" in item:
        raise MetadataError(f"{where}: must not contain NUL characters")
    return item


def user_part(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The keys a user owns (everything but the reserved ones)."""
    return {k: v for k, v in metadata.items() if k not in RESERVED}


def merge_patch(current: Mapping[str, Any], patch: object) -> dict[str, Any]:
    """JSON Merge Patch (RFC 7396) of the user's keys: a key set to null is removed, an object is
    merged into the object it replaces, anything else replaces. The reserved keys stay as they are
    and a patch may not name them. Raises ``MetadataError`` naming the field."""
    if not isinstance(patch, Mapping):
        raise MetadataError("metadata must be a JSON object")
    for key in patch:
        if key in RESERVED:
            raise MetadataError(f"metadata.{key}: reserved key (filled in by ultimate-rag: "
                                f"{', '.join(sorted(RESERVED))})")
    merged = validate(_merged(user_part(current), patch))
    return {**{k: v for k, v in current.items() if k in RESERVED}, **merged}


def _merged(target: Mapping[str, Any], patch: Mapping[Any, Any]) -> dict[str, Any]:
    out = dict(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping):
            base = out.get(key)
            out[key] = _merged(base if isinstance(base, Mapping) else {}, value)
        else:
            out[key] = value
    return out


# --- what parsers and connectors find --------------------------------------------------------


def clean_key(raw: object) -> str | None:
    """A found key in the key syntax: blanks and dots become "_", other characters go; None when
    nothing usable is left."""
    text = re.sub(r"[\s.]+", "_", str(raw).strip())
    text = re.sub(r"[^\w-]", "", text)[:64]
    if text and not KEY.match(text):
        text = ("_" + text)[:64]
    return text if text and KEY.match(text) else None


def clean(found: Mapping[Any, Any], depth: int = 1) -> dict[str, Any]:
    """What a file or a remote says about itself, made valid: dates (YAML and property dates) as
    ISO 8601 strings, long strings cut, lists kept to their strings (scalars written as strings),
    keys cleaned, anything else left out. Never raises."""
    out: dict[str, Any] = {}
    for raw_key, raw in list(found.items())[:MAX_KEYS]:
        key = clean_key(raw_key)
        if key is None or key in out:
            continue
        value = _clean_value(raw, depth)
        if value is not None:
            out[key] = value
    return out


def _clean_value(raw: object, depth: int) -> Any:
    if isinstance(raw, bool) or is_number(raw):
        return raw
    if isinstance(raw, datetime):
        return (raw if raw.tzinfo else raw.replace(tzinfo=UTC)).isoformat()
    if isinstance(raw, date):
        return raw.isoformat()
    if isinstance(raw, str):
        text = raw.replace("\x00", "").strip()
        return text[:MAX_STRING] if text else None
    if isinstance(raw, list | tuple):
        items = [_clean_value(x, MAX_DEPTH) for x in raw if not isinstance(x, Mapping | list | tuple)]
        strings = [x if isinstance(x, str) else json.dumps(x) for x in items if x is not None]
        return strings[:MAX_LIST]
    if isinstance(raw, Mapping) and depth < MAX_DEPTH:
        return clean(raw, depth + 1) or None
    return None


def fitted(metadata: dict[str, Any], limit: int = MAX_BYTES) -> dict[str, Any]:
    """``metadata`` within ``limit`` bytes of JSON: its last keys dropped until it fits."""
    out = dict(metadata)
    while out and len(json.dumps(out, ensure_ascii=False, separators=(",", ":")).encode()) > limit:
        out.pop(next(reversed(out)))
    return out


def source_fields(path: str) -> dict[str, Any]:
    """``source`` of a file found at ``path`` (relative, ``/``-separated) in a folder or bucket:
    the path, its folder, and every folder above it (so ``$contains`` selects a whole subtree)."""
    parts = [p for p in path.strip("/").split("/") if p]
    folders = ["/".join(parts[:i]) for i in range(1, len(parts))]
    out: dict[str, Any] = {"path": "/".join(parts)[:MAX_STRING]}
    if folders:
        out["folder"] = folders[-1][:MAX_STRING]
        out["folders"] = [f[:MAX_STRING] for f in folders[-MAX_LIST:]]
    return out


def source_path(metadata: Mapping[str, Any]) -> str | None:
    """Where the document lies in the folder or bucket it came from (``source.path``), or None (a
    single upload, a URL): what lists, search hits and citations show beside the file name."""
    source = metadata.get(SOURCE)
    path = source.get("path") if isinstance(source, Mapping) else None
    return path if isinstance(path, str) and path else None


PROPERTY_KEYS = ("title", "author", "created", "modified")


def document_properties(**found: object) -> dict[str, Any]:
    """What a parser puts in ``ParsedDocument.metadata["properties"]``: the file's own title,
    author, created and modified (dates as ISO 8601 strings), blanks left out."""
    return clean({k: v for k, v in found.items() if k in PROPERTY_KEYS and v not in (None, "", [])})


def parsed_fields(found: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata's parsed keys of a revision, from what its parser found: ``doc`` (its
    ``properties``; the title the parser found otherwise) and ``front_matter`` (its
    ``front_matter_fields``), within the size limit."""
    props = found.get("properties")
    doc = clean({k: v for k, v in props.items() if k in PROPERTY_KEYS}) if isinstance(props, Mapping) else {}
    if "title" not in doc and isinstance(found.get("title"), str):
        doc |= clean({"title": found["title"]})
    out: dict[str, Any] = {DOCUMENT_PROPERTIES: doc} if doc else {}
    front = found.get("front_matter_fields")
    if isinstance(front, Mapping) and (fields := clean(front)):
        out[FRONT_MATTER] = fields
    return fitted(out, MAX_BYTES // 2)
