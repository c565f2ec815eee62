"""MDX syntax in Markdown files (react.dev and other documentation sites write ``.md`` in MDX).

Component tags (``<Sandpack>``, ``</Intro>``, ``<Illustration ... />``; MDX components start with
a capital letter, so HTML such as ``<br>`` is left alone), JSX comments including heading anchors
(``## Title {/*title*/}``), ``{#id}`` heading ids and top-level ``import``/``export`` lines are
removed; the text inside components stays. Fenced code and inline code spans are never touched,
so ``<Suspense>`` written in backticks survives.

Every line keeps its length (what is removed from a line is padded back as spaces at its end),
so Markdown line numbers and the offsets of every line stay those of the file.
"""

from __future__ import annotations

import re

_TAG = re.compile(r"(?<![\w`])<[A-Z][\w.]*(?:\s(?:[^<>{}\"']|\"[^\"]*\"|'[^']*'|\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\})*)?/?>"
                  r"|</[A-Z][\w.]*\s*>")
_FRAGMENT = re.compile(r"(?<![\w`])<>|</>")
_COMMENT = re.compile(r"\{/\*.*?\*/\}", re.DOTALL)
_HEADING_ID = re.compile(r"^[ ]{0,3}#{1,6}\s.*?(\s*\{#[\w\-:.]+\})[ \t]*$", re.MULTILINE)
_ESM = re.compile(r"^(?:import\s(?:.*\sfrom\s*)?['\"][^'\"]+['\"];?|import\s.*\sfrom\s*['\"].*|"
                  r"export\s+(?:const|let|var|function|async|class|default)\b.*|export\s*\{.*)$")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")


def strip_mdx(text: str) -> str:
    """``text`` with MDX syntax blanked out, each line padded back to its original length."""
    lines = text.split("\n")
    removed: list[tuple[int, int]] = []
    offset = 0
    region_start: int | None = None
    fence: str | None = None
    for line in lines:
        match = _FENCE.match(line)
        if fence is None and match:
            if region_start is not None:
                removed += _syntax(text, region_start, offset)
                region_start = None
            fence = match.group(1)
        elif fence is not None:
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = None
        elif region_start is None:
            region_start = offset
        offset += len(line) + 1
    if region_start is not None and fence is None:
        removed += _syntax(text, region_start, len(text))
    return _blank(lines, removed) if removed else text


def _syntax(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Spans of MDX syntax in text[start:end], a stretch outside fenced code."""
    region = text[start:end]
    code = [m.span() for m in _CODE_SPAN.finditer(region)]

    def outside(span: tuple[int, int]) -> bool:
        return not any(a < span[1] and span[0] < b for a, b in code)

    spans = [m.span() for pattern in (_COMMENT, _TAG, _FRAGMENT) for m in pattern.finditer(region)]
    spans += [m.span(1) for m in _HEADING_ID.finditer(region)]
    spans = [s for s in spans if outside(s)]
    spans += _esm(region)
    return [(start + a, start + b) for a, b in spans]


def _esm(region: str) -> list[tuple[int, int]]:
    """Top-level ``import``/``export`` statements, an ``export`` with an open brace up to the line
    that closes it."""
    spans: list[tuple[int, int]] = []
    pos = 0
    depth = 0
    for line in region.split("\n"):
        end = pos + len(line)
        if depth > 0:
            spans.append((pos, end))
            depth += line.count("{") - line.count("}")
        elif _ESM.match(line):
            spans.append((pos, end))
            depth = max(0, line.count("{") - line.count("}"))
        pos = end + 1
    return spans


def _blank(lines: list[str], removed: list[tuple[int, int]]) -> str:
    marks = bytearray(sum(len(line) + 1 for line in lines))
    for a, b in removed:
        marks[a:b] = b"\x01" * (b - a)
    out: list[str] = []
    pos = 0
    for line in lines:
        kept = "".join(ch for k, ch in enumerate(line) if not marks[pos + k])
        out.append(kept.rstrip() + " " * (len(line) - len(kept.rstrip())) if len(kept) != len(line) else line)
        pos += len(line) + 1
    return "\n".join(out)
