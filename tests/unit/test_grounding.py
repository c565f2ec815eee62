"""The pure parts of grounded answers: language, passage selection within a budget, prompts, and
citation checking (whole answers and streamed pieces)."""

from __future__ import annotations

from uuid import uuid4

import pytest

from ultimate_rag.adapters.embedders.openai import estimate_tokens
from ultimate_rag.domain.chat import ChatMessage
from ultimate_rag.domain.models import SearchResult, SourceLocator
from ultimate_rag.services.grounding import (
    CitationFilter,
    answer_messages,
    clean_rewrite,
    detect_language,
    is_mixed,
    resolve_citations,
    rewrite_messages,
    select_passages,
)


def result(content: str, score: float, **kw) -> SearchResult:
    return SearchResult(chunk_id=uuid4(), document_id=uuid4(), filename=kw.get("filename", "a.pdf"), content=content,
                        score=score, heading_path=kw.get("heading_path", ("Intro",)),
                        locator=kw.get("locator", SourceLocator(page=3)))


@pytest.mark.parametrize(("text", "language"), [
    ("How tall is the Eiffel Tower?", "en"),
    ("埃菲尔铁塔有多高？", "zh"),
    ("에펠탑의 높이는 얼마인가요?", "ko"),
    ("What is 向量数据库?", "zh"),  # five characters outweigh two words
    ("How do I configure the vector database in 百炼 for production use?", "en"),
    ("RAG 시스템에서 chunk size는 어떻게 정하나요?", "ko"),
    ("1234 ?", "en"),
])
def test_the_question_language_is_detected(text: str, language: str) -> None:
    assert detect_language(text) == language


def test_mixed_questions_are_noticed() -> None:
    assert is_mixed("What is 向量数据库?") and not is_mixed("What is a vector database?")
    prompt = answer_messages("What is 向量数据库?", [])[0].content
    assert "mixes languages" in prompt and "Chinese" in prompt
    assert "Answer in Korean" in answer_messages("김치는 무엇인가요?", [])[0].content


def test_passages_are_the_relevant_ones_best_first_within_the_budget() -> None:
    low, best, second = result("unrelated", 0.5), result("best " * 10, 0.95), result("second " * 10, 0.9)
    huge, small = result("big " * 500, 0.85), result("small", 0.82)
    chosen = select_passages([low, second, huge, best, small], budget_tokens=80, min_score=0.8,
                             count_tokens=estimate_tokens)
    assert [p.result for p in chosen] == [best, second, small]  # huge does not fit, a smaller one after it does
    assert [p.n for p in chosen] == [1, 2, 3]
    assert chosen[0].header() == "[1] a.pdf — Intro — page 3"


def test_the_best_passage_is_cut_to_fit_rather_than_dropped() -> None:
    chosen = select_passages([result("word " * 1000, 0.9)], budget_tokens=100, min_score=0.0,
                             count_tokens=estimate_tokens)
    assert len(chosen) == 1 and chosen[0].text.endswith("…")
    assert estimate_tokens(chosen[0].header()) + estimate_tokens(chosen[0].text) <= 100


def test_nothing_relevant_gives_no_passages() -> None:
    assert select_passages([result("x", 0.7)], budget_tokens=1000, min_score=0.78, count_tokens=estimate_tokens) == []


def test_the_prompt_holds_the_numbered_passages_and_history_without_old_citations() -> None:
    p = select_passages([result("Paris is in France.", 0.9, locator=SourceLocator(line_start=4, line_end=9))],
                        budget_tokens=500, min_score=0, count_tokens=estimate_tokens)
    history = [ChatMessage("user", "Where is Paris?"), ChatMessage("assistant", "In France [1][2].")]
    messages = answer_messages("And Lyon?", p, history)
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2].content == "In France."
    assert "[1] a.pdf — Intro — lines 4-9\nParis is in France." in messages[-1].content
    assert messages[-1].content.endswith("Question: And Lyon?")
    assert "not instructions" in messages[0].content  # text inside documents does not steer the model
    rewrite = rewrite_messages("And Lyon?", history)
    assert "assistant: In France." in rewrite[-1].content and "And Lyon?" in rewrite[-1].content


@pytest.mark.parametrize(("reply", "query"), [
    ("Where is Lyon?", "Where is Lyon?"),
    ('Query: "Where is Lyon?"\nExtra line', "Where is Lyon?"),
    ("  \n", "fallback"),
    ("x" * 50, "fallback"),
])
def test_the_rewritten_query_is_cleaned(reply: str, query: str) -> None:
    assert clean_rewrite(reply, "fallback", 40) == query


def test_invented_citation_numbers_are_removed_and_reported() -> None:
    text, cited, invalid = resolve_citations("Paris [1]. Lyon [7]. Both [2, 9]［3］ and 【1】.", [1, 2, 3])
    assert text == "Paris [1]. Lyon. Both [2][3] and [1]."
    assert cited == [1, 2, 3] and invalid == [7, 9]


def test_brackets_that_are_not_citations_stay() -> None:
    assert resolve_citations("a list [x] and [1.5] and [ ]", [1])[0] == "a list [x] and [1.5] and [ ]"


@pytest.mark.parametrize("size", [1, 2, 3, 5, 100])
def test_streamed_pieces_join_to_the_checked_answer(size: int) -> None:
    text = "Paris [1]. Lyon [7]. Both [2, 9]［3］ and 【1】 and [x] [1 end"
    stream = CitationFilter([1, 2, 3])
    out = [stream.feed(text[i:i + size]) for i in range(0, len(text), size)] + [stream.flush()]
    assert "".join(out) == CitationFilter([1, 2, 3]).replace(text)
    assert "[7]" not in "".join(out) and stream.invalid == [7, 9]
    # an invented number is never given out, not even for a moment
    assert all("7" not in piece for piece in out)
