"""The Korean analyzer behind BM25's ``morphemes`` terms (domain/lexical.py): kiwipiepy (Apache-2.0,
its model inside the ``kiwipiepy_model`` package: nothing is fetched at run time).

Loaded once per process, on the first Korean text the process cuts (about 0.5 GB; the first cut
holds the interpreter's lock about 1–1.4 s, longer on a busy machine: bench/korean_analyzer.py),
then shared by every instance: ``Kiwi.tokenize`` may be called from several threads.
Content morphemes only — nouns, verb and adjective stems, modifiers, roots — the particles and endings that make Korean
bigrams noisy are left out (bench/RESULTS.md, "Second round": BM25 on KorQuAD 0.963 → 0.971,
hybrid 0.961 → 0.983 nDCG@10)."""

from __future__ import annotations

import threading
from typing import Any

_CONTENT = ("N", "V", "M", "XR")  # nouns, predicates (stems), modifiers, roots: no particles, no endings


_lock = threading.Lock()
_kiwi: Any = None  # the process's one analyzer (kiwipiepy ships no type information)


def _analyzer() -> Any:
    global _kiwi
    if _kiwi is None:
        with _lock:
            if _kiwi is None:
                from kiwipiepy import Kiwi  # heavy: only when Korean text comes

                _kiwi = Kiwi()
    return _kiwi


class KiwiMorphemes:
    """A ``KoreanMorphemes`` (domain/lexical.py): the text's content morphemes, in order. Every
    instance cuts with the process's one analyzer."""

    def __call__(self, text: str) -> list[str]:
        return [str(token.form) for token in _analyzer().tokenize(text) if token.tag.startswith(_CONTENT)]
