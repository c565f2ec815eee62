"""What a hostile search used to cost, measured side by side with what it costs now.

    .venv/bin/python -m bench.search_bounds

1. Highlighting: a 4,000-character query of distinct CJK characters (3,999 bigrams) over 100
   results of 1,500 characters, with the old rule (one regular expression per term, every term
   of the query) and the bounded one-pass rule (``domain/search.py``). CPU time of this process.
2. The filename glob in PostgreSQL (a fresh embedded server): ``filename ~ pattern`` over 3,000
   names of 240 characters, for 255 ``*`` as the old translation wrote them (255 ``.*``), the same
   glob collapsed, 250 ``?`` (refused now), and the worst pattern the limits allow now.
"""

from __future__ import annotations

import random
import re
import tempfile
import time
from pathlib import Path

from ultimate_rag.domain.search import _CJK_RUN, glob_to_regex, highlights, merge_spans, query_terms


def old_highlights(content: str, query: str, limit: int = 64) -> list[tuple[int, int]]:
    """The rule before it was bounded: every term of the query, one pass each."""
    terms = query_terms(query)
    folded = content.casefold()
    spans: list[tuple[int, int]] = []
    for term in terms:
        pattern = re.escape(term) if _CJK_RUN.fullmatch(term) else rf"(?<![^\W_]){re.escape(term)}(?![^\W_])"
        spans.extend((m.start(), m.end()) for m in re.finditer(pattern, folded))
    return merge_spans(spans)[:limit]


def cpu(fn: object, *args: object, repeat: int = 1) -> float:
    started = time.process_time()
    for _ in range(repeat):
        fn(*args)  # type: ignore[operator]
    return (time.process_time() - started) / repeat


def highlight_costs() -> None:
    rng = random.Random(1)
    query = "".join(chr(0x4E00 + rng.randrange(20000)) for _ in range(4000))
    contents = ["".join(chr(0x4E00 + rng.randrange(20000)) for _ in range(1500)) for _ in range(100)]

    def run(rule: object) -> None:
        for content in contents:
            rule(content, query)  # type: ignore[operator]

    before, after = cpu(run, old_highlights), cpu(run, highlights, repeat=5)
    print(f"highlights, 4,000-char query x 100 results: before {before:.2f} s CPU, after {after:.4f} s CPU "
          f"({before / after:.0f}x)")


def glob_costs() -> None:
    import psycopg

    from ultimate_rag.adapters.postgres.embedded import start_embedded_postgres

    url, server = start_embedded_postgres(Path(tempfile.mkdtemp()))
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE names (filename text)")
            conn.execute("INSERT INTO names SELECT repeat('a', 230) || i || '.txt' FROM generate_series(1, 3000) i")
            cases = {"255 '*', old translation": "^" + ".*" * 255 + "$",
                     "255 '*', collapsed now": glob_to_regex("*" * 255),
                     "250 '?', old translation (refused now)": "^" + "." * 250 + "$",
                     "the worst allowed now (16 '?', 16 '[a]', 16 '*')": glob_to_regex("?" * 16 + "[a]*" * 16)}
            for name, regex in cases.items():
                started = time.perf_counter()
                conn.execute("SELECT count(*) FROM names WHERE filename ~ %s", (regex,)).fetchone()
                print(f"glob over 3,000 names, {name}: {time.perf_counter() - started:.3f} s")
    finally:
        server.cleanup()


if __name__ == "__main__":
    highlight_costs()
    glob_costs()
