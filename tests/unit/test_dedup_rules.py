"""Deduplication rules: normalisation, CJK-aware shingles, LSH bands, verdicts and the newer rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

from datasketch import MinHash

from ultimate_rag.domain.dedup import (
    BANDS,
    NUM_PERM,
    Candidate,
    DedupMode,
    Verdict,
    bands,
    content_hash,
    estimated_jaccard,
    is_newer,
    judge,
    shingles,
)


def sig(text: str) -> list[int]:
    m = MinHash(num_perm=NUM_PERM, seed=1)
    m.update_batch([s.encode() for s in shingles(text)])
    return [int(v) for v in m.hashvalues]


EN = " ".join(f"The harbour ferry number {i} leaves at dawn and returns before dark." for i in range(40))
ZH = "".join(f"第{i}号渡轮每天清晨从港口出发，傍晚之前返回。" for i in range(40))
KO = " ".join(f"{i}번 여객선은 새벽에 항구를 떠나 해가 지기 전에 돌아온다." for i in range(40))


def test_normalised_hash_ignores_case_width_and_spacing() -> None:
    assert content_hash("Hello   World\n") == content_hash("hello world") == content_hash("ＨＥＬＬＯ world")
    assert content_hash("hello world") != content_hash("hello there")


def test_shingles_use_characters_for_cjk_and_words_elsewhere() -> None:
    assert "渡轮每" in shingles(ZH) and "새벽에" in shingles(KO)  # CJK: character trigrams
    assert "ferry number 3" in shingles(EN)  # English: word trigrams
    assert shingles("短") == {"短"} and shingles("hi") == {"hi"}


def test_bands_shape_and_sharing() -> None:
    a = sig(EN)
    assert len(bands(a)) == BANDS and bands(a) == bands(list(a))
    near = sig(EN + " One more sentence at the end.")
    assert set(bands(a)) & set(bands(near))


def test_near_duplicates_score_high_in_every_language() -> None:
    for text, edit in ((EN, " An extra paragraph about the weather at sea."), (ZH, "另外一段关于海上天气的话。"),
                       (KO, " 바다 날씨에 관한 문단이 하나 더 있다.")):
        assert estimated_jaccard(sig(text), sig(text + edit)) > 0.85
        assert estimated_jaccard(sig(text), sig("Completely different words about cooking soup.")) < 0.1


def candidate(text: str, filename: str = "a.md") -> Candidate:
    return Candidate(uuid4(), filename, content_hash(text), sig(text), datetime.now(UTC), {})


def test_verdicts() -> None:
    same = candidate(EN, "ferries.md")
    m = judge(filename="Ferries.md", text_hash=content_hash(EN), hashvalues=sig(EN), candidates=[same],
              mode=DedupMode.EXACT, threshold=0.9)
    assert m and m.verdict == Verdict.IDENTICAL and m.method == "exact" and m.score == 1.0
    m = judge(filename="other.md", text_hash=content_hash(EN), hashvalues=sig(EN), candidates=[same],
              mode=DedupMode.EXACT, threshold=0.9)
    assert m and m.verdict == Verdict.SIMILAR and m.method == "exact"
    edited = EN + " An extra paragraph about the weather at sea."
    assert judge(filename="x.md", text_hash=content_hash(edited), hashvalues=sig(edited), candidates=[same],
                 mode=DedupMode.EXACT, threshold=0.9) is None  # exact mode: near ones are not merged
    m = judge(filename="x.md", text_hash=content_hash(edited), hashvalues=sig(edited), candidates=[same],
              mode=DedupMode.NEAR, threshold=0.8)
    assert m and m.verdict == Verdict.SIMILAR and m.method == "minhash" and 0.8 <= m.score < 1
    assert judge(filename="x.md", text_hash=content_hash(EN), hashvalues=sig(EN), candidates=[same],
                 mode=DedupMode.OFF, threshold=0.9) is None


def test_shared_boilerplate_is_not_a_duplicate() -> None:
    boiler = " ".join(["Copyright 2026 Example Corp. All rights reserved. Contact support for help."] * 3)
    a = boiler + " " + " ".join(f"Recipe step {i}: stir the tomato sauce slowly." for i in range(30))
    b = boiler + " " + " ".join(f"Network note {i}: the backup schedule failed again." for i in range(30))
    assert judge(filename="b.md", text_hash=content_hash(b), hashvalues=sig(b), candidates=[candidate(a)],
                 mode=DedupMode.NEAR, threshold=0.8) is None


def test_newer_is_source_time_when_known_else_upload_time() -> None:
    now = datetime.now(UTC)
    a, b = uuid4(), uuid4()
    assert is_newer((now, {}, a), (now - timedelta(seconds=1), {}, b))
    older_upload_newer_source = (now - timedelta(days=1), {"last_modified": now.isoformat()}, a)
    assert is_newer(older_upload_newer_source, (now - timedelta(hours=1), {}, b))
