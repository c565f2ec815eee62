"""The client's search results are the hits (a list, as before) and say which identifiers the query
names that nothing holds; answers say it too. An older server's JSON without the field reads as none."""

from __future__ import annotations

from ultimate_rag.client.models import Answer, SearchHit, SearchResults

HIT = {"chunk_id": "c", "document_id": "d", "filename": "SR-88346.md", "content": "Ticket SR-88346", "score": 0.8,
       "heading_path": [], "locator": {}, "highlights": [[7, 15]], "assets": []}


def test_search_results_are_the_hits_and_the_unmatched_identifiers() -> None:
    results = SearchResults.from_json({"results": [HIT], "unmatched_identifiers": ["SR-99999"]})
    assert isinstance(results, list) and len(results) == 1 and isinstance(results[0], SearchHit)
    assert [h.filename for h in results] == ["SR-88346.md"] and results[0].highlights == [[7, 15]]
    assert results.unmatched_identifiers == ["SR-99999"] and results.raw["results"] == [HIT]
    older = SearchResults.from_json({"results": []})
    assert older == [] and older.unmatched_identifiers == []


def test_an_answer_carries_the_unmatched_identifiers() -> None:
    answer = Answer.from_json({"answer": None, "citations": [], "reason": "no model",
                               "unmatched_identifiers": ["E9999"]})
    assert answer.unmatched_identifiers == ["E9999"]
    assert Answer.from_json({"answer": "x", "citations": []}).unmatched_identifiers == []
