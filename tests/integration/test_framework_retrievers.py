"""The framework retrievers (ultimate_rag.integrations) against the real ``langchain-core`` and
``llama-index-core`` packages and a real uvicorn serving the app (real worker, real e5 model): sync
and async, our fields as the frameworks' metadata, filters (metadata included) passed through."""

from __future__ import annotations

import asyncio

from langchain_core.documents import Document
from llama_index.core.schema import MetadataMode, QueryBundle

from ultimate_rag.client import AsyncClient, Client
from ultimate_rag.integrations import langchain as lc
from ultimate_rag.integrations import llama_index as li

from ..conftest import ADMIN_KEY
from .answering import ingest, serve


async def test_langchain_and_llama_index_retrievers(container) -> None:
    async with serve(container) as http:
        ids = await ingest(http, container, name="Manuals")
        url = str(http.base_url)
        sync, aio = Client(url, ADMIN_KEY), AsyncClient(url, ADMIN_KEY)
        try:
            changed = await asyncio.to_thread(sync.update_metadata, ids["router.md"], {"team": "network"})
            assert changed.metadata["team"] == "network" and changed.metadata["doc"]["title"] == "Router manual"
            retriever = lc.UltimateRagRetriever(client=sync, knowledge_base="Manuals", top_k=3)
            docs: list[Document] = await asyncio.to_thread(retriever.invoke, "How do I reset the router?")
            assert docs and docs[0].metadata["filename"] == "router.md" and docs[0].id == docs[0].metadata["chunk_id"]
            top = docs[0].metadata
            assert "hold the power button" in docs[0].page_content and top["knowledge_base_id"] == ids["kb"]
            assert top["citation"].startswith("router.md · Router manual > Reset") and top["score"] > 0
            assert top["document_metadata"]["team"] == "network" and top["document_id"] == ids["router.md"]
            filtered = lc.UltimateRagRetriever(client=sync, async_client=aio, knowledge_base=ids["kb"], top_k=3,
                                               filters={"metadata": {"team": {"$ne": "network"}}})
            docs = await filtered.ainvoke("How do I reset the router?")
            assert docs and {d.metadata["filename"] for d in docs} == {"ferry.pdf"}
            threaded = lc.UltimateRagRetriever(client=sync, knowledge_base="Manuals", top_k=2)
            assert len(await threaded.ainvoke("ferry at night")) == 2  # the sync client in a thread

            nodes = await asyncio.to_thread(li.UltimateRagRetriever(sync, "Manuals", top_k=3).retrieve,
                                            "When does the last ferry leave at night?")
            assert nodes and nodes[0].node.metadata["filename"] == "ferry.pdf" and nodes[0].score is not None
            node = nodes[0].node
            assert node.node_id == node.metadata["chunk_id"] and node.metadata["page"] == 2
            assert node.source_node is not None and node.source_node.node_id == ids["ferry.pdf"]
            shown = node.get_content(metadata_mode=MetadataMode.LLM)
            assert "ferry.pdf" in shown and "chunk_id" not in shown and "midnight" in shown
            async_retriever = li.UltimateRagRetriever(sync, "Manuals", async_client=aio, top_k=3,
                                                      filters={"metadata": {"team": "network"}})
            nodes = await async_retriever.aretrieve(QueryBundle("reset"))
            assert nodes and {n.node.metadata["filename"] for n in nodes} == {"router.md"}
            assert len(await li.UltimateRagRetriever(sync, "Manuals", top_k=1).aretrieve("ferry")) == 1
        finally:
            sync.close()
            await aio.aclose()
