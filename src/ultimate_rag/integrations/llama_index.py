"""A LlamaIndex retriever over a knowledge base (``pip install 'ultimate-rag[llama-index]'``).

    from ultimate_rag.client import Client
    from ultimate_rag.integrations.llama_index import UltimateRagRetriever

    retriever = UltimateRagRetriever(Client(url, key), "handbook", top_k=5,
                                     filters={"metadata": {"office": "Berlin"}})
    nodes = retriever.retrieve("how many days of holiday?")   # or: await retriever.aretrieve(...)

Each ``NodeWithScore`` holds a ``TextNode`` (id: the chunk id, text: the chunk's, its source: the
document) with the metadata ``integrations.hit_metadata`` lists; only the file and the citation
line go into the text a language model or an embedder sees. Give ``async_client`` (an
``AsyncClient``) for ``aretrieve`` to stay on the event loop; without it the sync client runs in a
thread."""

from __future__ import annotations

import asyncio
from typing import Any

from ..client import AsyncClient, Client
from ..client.models import SearchHit
from . import hit_metadata, missing

try:
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise missing("llama-index-core", "llama-index") from exc

__all__ = ["UltimateRagRetriever"]
SHOWN = ("filename", "citation")  # the metadata a language model or an embedder reads with the text


class UltimateRagRetriever(BaseRetriever):
    """Search hits of a knowledge base (its name or id) as LlamaIndex ``NodeWithScore``s."""

    def __init__(self, client: Client, knowledge_base: str, *, top_k: int = 5, mode: str | None = None,
                 filters: dict[str, Any] | None = None, min_score: float | None = None,
                 async_client: AsyncClient | None = None, callback_manager: CallbackManager | None = None) -> None:
        super().__init__(callback_manager=callback_manager)
        self._client = client
        self._async_client = async_client
        self._knowledge_base = knowledge_base
        self._options: dict[str, Any] = {"top_k": top_k, "mode": mode, "filters": filters, "min_score": min_score}
        self._kb_id: str | None = None

    def _nodes(self, hits: list[SearchHit]) -> list[NodeWithScore]:
        assert self._kb_id is not None
        out = []
        for hit in hits:
            metadata = hit_metadata(hit, self._kb_id)
            hidden = [k for k in metadata if k not in SHOWN]
            node = TextNode(id_=hit.chunk_id, text=hit.content, metadata=metadata, excluded_llm_metadata_keys=hidden,
                            excluded_embed_metadata_keys=hidden,
                            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=hit.document_id)})
            out.append(NodeWithScore(node=node, score=hit.score))
        return out

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if self._kb_id is None:
            self._kb_id = self._client.find_knowledge_base(self._knowledge_base).id
        return self._nodes(self._client.search(self._kb_id, query_bundle.query_str, **self._options))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if self._async_client is None:
            return await asyncio.to_thread(self._retrieve, query_bundle)
        if self._kb_id is None:
            self._kb_id = (await self._async_client.find_knowledge_base(self._knowledge_base)).id
        return self._nodes(await self._async_client.search(self._kb_id, query_bundle.query_str, **self._options))
