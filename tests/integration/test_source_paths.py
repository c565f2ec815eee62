"""What the API says about where a document came from and how it stands (SPEC §11): files of the
same name uploaded from different folders stay apart by their ``source.path`` (in the document,
the list and its filter, search hits and their citations); the knowledge-base list carries its
counts; a search hit carries its dense similarity; a FAILED document's timeline ends with FAILED."""

from __future__ import annotations

import httpx

from .test_api import make_kb, process_all


async def upload(client: httpx.AsyncClient, kb: str, name: str, data: bytes, path: str | None) -> httpx.Response:
    return await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": (name, data, "text/markdown")},
                             data={"path": path} if path is not None else None)


async def test_same_names_in_other_folders_stay_apart_everywhere(client: httpx.AsyncClient, container) -> None:
    kb = await make_kb(client)
    ids = {}
    for folder, text in (("north", "The north quay moors fishing boats."), ("south", "The south quay moors ferries.")):
        r = await upload(client, kb, "article.md", f"# Quay\n\n{text}\n".encode(), f"./{folder}//article.md")
        assert r.status_code == 202, r.text
        # normalised, and kept as the document's metadata source.path (what lists, hits and citations show)
        assert r.json()["metadata"]["source"]["path"] == f"{folder}/article.md"
        assert r.json()["source"] == {"kind": "upload", "path": f"{folder}/article.md"}
        ids[folder] = r.json()["id"]
    plain = await upload(client, kb, "single.md", b"# Single\n\nA file uploaded alone.\n", None)
    assert plain.json()["source"] == {"kind": "upload"} and "source" not in plain.json()["metadata"]
    for bad in ("../etc/passwd", "a/../../b", "/", "a\x01b", "x" * 1100):
        r = await upload(client, kb, "article.md", b"# x\n\ny\n", bad)
        assert r.status_code == 422 and "path" in r.json()["detail"], (bad, r.text)

    listed = (await client.get(f"/api/knowledge-bases/{kb}/documents", params={"q": "south/"})).json()["items"]
    assert [d["id"] for d in listed] == [ids["south"]]

    await process_all(container)
    kbs = (await client.get("/api/knowledge-bases")).json()["items"]
    assert [k["document_counts"] for k in kbs if k["id"] == kb] == [{"READY": 3}]

    for mode in ("hybrid", "dense", "sparse"):
        r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": "where do ferries moor?",
                                                                         "mode": mode, "top_k": 3})
        hits = r.json()["results"]
        assert hits[0]["source_path"] == "south/article.md" and hits[0]["filename"] == "article.md", mode
        assert all(isinstance(h["dense_score"], float) and -1 <= h["dense_score"] <= 1 for h in hits)
        assert {h["source_path"] for h in hits} == {"north/article.md", "south/article.md", None}
        if mode == "dense":  # the dense similarity alone is the score of a dense search
            assert all(abs(h["score"] - h["dense_score"]) < 1e-6 for h in hits)


async def test_a_failed_document_timeline_ends_with_failed(client: httpx.AsyncClient, container) -> None:
    kb = await make_kb(client)
    doc = (await upload(client, kb, "queued.md", b"# Queued\n\nNever processed.\n", None)).json()
    assert (await client.post(f"/api/documents/{doc['id']}/fail")).status_code == 200
    timings = (await client.get(f"/api/documents/{doc['id']}")).json()["timings"]
    # not "PENDING ... running now": the wait ended when the document failed
    assert [t["stage"] for t in timings] == ["PENDING", "FAILED"]
    assert timings[0]["seconds"] is not None and timings[0]["seconds"] >= 0 and timings[1]["seconds"] is None
