"""The Korean analyzer behind BM25's ``morphemes`` terms (domain/lexical.py): kiwipiepy (Apache-2.0,
its model inside the ``kiwipiepy_model`` package: nothing is fetched at run time).

Loaded on the first Korean text a process cuts (4–6 s, about 0.5 GB), once per process, then
shared: ``Kiwi.tokenize`` may be called from several threads. Content morphemes only — nouns,
verb and adjective stems, modifiers, roots — the particles and endings that make Korean
bigrams noisy are left out (bench/RESULTS.md, "Second round": BM25 on KorQuAD 0.963 → 0.971,
hybrid 0.961 → 0.983 nDCG@10)."""

from __future__ import annotations

import threading
from typing import Any

_CONTENT = ("N", "V", "M", "XR")  # nouns, predicates (stems), modifiers, roots: no particles, no endings


class KiwiMorphemes:
    """A ``KoreanMorphemes`` (domain/lexical.py): the text's content morphemes, in order."""

    def __init__(self) -> None:
        self._kiwi: Any = None  # kiwipiepy ships no type information
        self._lock = threading.Lock()

    def _analyzer(self) -> Any:
        if self._kiwi is None:
            with self._lock:
                if self._kiwi is None:
                    from kiwipiepy import Kiwi  # heavy: only when Korean text comes

                    self._kiwi = Kiwi()
        return self._kiwi

    def __call__(self, text: str) -> list[str]:
        return [str(token.form) for token in self._analyzer().tokenize(text) if token.tag.startswith(_CONTENT)]
