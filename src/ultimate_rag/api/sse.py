"""Server-sent event frames whose ``data`` is one JSON line, whatever the text inside it holds.

JSON escapes the ASCII control characters, but not U+0085, U+2028 or U+2029: a client that splits
the stream into lines as Python's ``str.splitlines`` does (or JavaScript's older line readers) would
end the ``data:`` line there, and model text such as ``"\\u2028\\nevent: done"`` could forge an
event. Every character ``str.splitlines`` treats as a line end is escaped inside the data."""

from __future__ import annotations

import json
from typing import Any

# what str.splitlines ends a line at, beyond \n and \r; JSON already escapes those below U+0020
_LINE_ENDS = {"\x0b": "\\u000b", "\x0c": "\\u000c", "\x1c": "\\u001c", "\x1d": "\\u001d", "\x1e": "\\u001e",
              "\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_TABLE = str.maketrans(_LINE_ENDS)


def sse_data(data: Any) -> str:
    """``data`` as one line of JSON (non-ASCII text kept as it is, line ends escaped)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str).translate(_TABLE)


def sse_frame(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {sse_data(data)}\n\n"
