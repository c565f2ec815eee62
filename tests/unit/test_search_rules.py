"""The pure parts of search: the highlight rule, filename globs, score fusion."""

from __future__ import annotations

import re
from uuid import uuid4

from ultimate_rag.domain.search import (
    Fusion,
    FusionWeights,
    LanguageOffsets,
    ScoredChunk,
    SearchMode,
    fuse,
    glob_to_regex,
    highlights,
    query_terms,
    script_language,
)


def spans(content: str, query: str) -> list[str]:
    return [content[a:b] for a, b in highlights(content, query)]


def test_query_terms_keep_identifiers_whole_and_cut_cjk_into_bigrams() -> None:
    assert query_terms("Error E-4821 in clause 7.3.1") == ["error", "e-4821", "in", "clause", "7.3.1"]
    assert query_terms("北京首都") == ["北京", "京首", "首都"]
    assert query_terms("서울 지하철") == ["서울", "지하", "하철"]
    assert query_terms("a 7") == ["7"]


def test_highlights_mark_words_identifiers_and_bigrams() -> None:
    assert spans("Error E-4821: toner (see e-4821b).", "what is e-4821") == ["E-4821"]
    assert spans("北京是中华人民共和国的首都", "首都北京") == ["北京", "首都"]
    assert spans("서울 지하철 2호선은 순환선", "지하철 순환선") == ["지하철", "순환선"]
    assert highlights("The cat sat", "cat") == [(4, 7)]
    assert spans("category", "cat") == []  # alphabetic terms only at word boundaries
    assert highlights("nothing here", "zzz") == []


def test_filename_globs() -> None:
    def match(glob: str, name: str) -> bool:
        return re.fullmatch(glob_to_regex(glob)[1:-1], name) is not None

    assert match("*.pdf", "a.pdf") and not match("*.pdf", "a.pdfx")
    assert match("report-202?-*.docx", "report-2024-q1.docx")
    assert match("[ms]*", "manual.md") and not match("[!ms]*", "manual.md")
    assert match("a+b(1).txt", "a+b(1).txt") and not match("a.txt", "abtxt")


def test_fusion_keeps_score_gaps_and_modes_use_their_own_similarity() -> None:
    a, b, c = uuid4(), uuid4(), uuid4()
    items = [ScoredChunk(a, 0.80, 0.10), ScoredChunk(b, 0.78, 0.60), ScoredChunk(c, 0.70, 0.0)]
    assert [i for i, _ in fuse(items, SearchMode.DENSE)] == [a, b, c]
    assert [i for i, _ in fuse(items, SearchMode.SPARSE)] == [b, a, c]
    weighted = fuse(items, SearchMode.HYBRID, weights=FusionWeights(0.5, lexical=0.0))
    assert [i for i, _ in weighted] == [b, a, c] and abs(weighted[0][1] - 0.69) < 1e-9
    rrf = dict(fuse(items, SearchMode.HYBRID, fusion=Fusion.RRF))  # ranks only: a and b tie, the gap is lost
    assert abs(rrf[a] - rrf[b]) < 1e-12 and rrf[c] < rrf[a]


def test_language_of_a_text_and_centring_offsets() -> None:
    assert [script_language(t) for t in ("Hello world", "北京是首都", "서울 지하철", "東京の地下鉄", "Привет", "123")] == [
        "latin", "zh", "ko", "ja", "cyrillic", "other"]
    assert script_language("# Tea\n\n龙井茶用八十度的水冲泡。") == "zh"
    chunk = ScoredChunk(uuid4(), 0.5, 0.25)
    moved = LanguageOffsets(dense={"zh": 0.1}, sparse={"zh": -0.05}).apply(chunk, "zh")
    assert (round(moved.dense, 6), round(moved.sparse, 6)) == (0.4, 0.3)
    assert LanguageOffsets(dense={"zh": 0.1}).apply(chunk, "ko") == chunk
    # language information removal: with its coordinates, a chunk loses its own language component
    # (0.2 * 0.3 + -0.1 * 0.5 = 0.01), not its language's mean offset; without them, the offset
    removal = LanguageOffsets(dense={"zh": 0.1}, sparse={"zh": -0.05}, directions=((1.0, 0.0), (0.0, 1.0)),
                              removal=(0.2, -0.1))
    own = removal.apply(chunk, "zh", [0.3, 0.5])
    assert (round(own.dense, 6), round(own.sparse, 6)) == (0.49, 0.3)
    assert removal.apply(chunk, "zh") == moved
