"""A LangChain retriever over a knowledge base (``pip install 'ultimate-rag[langchain]'``).

    from ultimate_rag.client import Client
    from ultimate_rag.integrations.langchain import UltimateRagRetriever

    retriever = UltimateRagRetriever(client=Client(url, key), knowledge_base="handbook", top_k=5,
                                     filters={"metadata": {"office": "Berlin"}})
    docs = retriever.invoke("how many days of holiday?")   # or: await retriever.ainvoke(...)

Each ``Document`` is a search hit: ``page_content`` the chunk's text, ``id`` its chunk id, and the
metadata ``integrations.hit_metadata`` lists (file, citation, page, heading path, score, the
document's own fields as ``document_metadata``). Give ``async_client`` (an ``AsyncClient``) for
``ainvoke`` to stay on the event loop; without it LangChain runs the sync client in a thread."""

from __future__ import annotations

from typing import Any

from ..client import AsyncClient, Client
from ..client.models import SearchHit
from . import hit_metadata, missing

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise missing("langchain-core", "langchain") from exc
from pydantic import ConfigDict, PrivateAttr

__all__ = ["UltimateRagRetriever"]


class UltimateRagRetriever(BaseRetriever):
    """Search hits of a knowledge base (its name or id) as LangChain ``Document``s."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: Client
    knowledge_base: str
    async_client: AsyncClient | None = None
    top_k: int = 5
    mode: str | None = None  # hybrid (the server's default), dense or sparse
    filters: dict[str, Any] | None = None  # as the search API takes them, metadata filters included
    min_score: float | None = None
    _kb_id: str | None = PrivateAttr(default=None)

    def _documents(self, hits: list[SearchHit]) -> list[Document]:
        assert self._kb_id is not None
        return [Document(page_content=h.content, id=h.chunk_id, metadata=hit_metadata(h, self._kb_id)) for h in hits]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        if self._kb_id is None:
            self._kb_id = self.client.find_knowledge_base(self.knowledge_base).id
        return self._documents(self.client.search(self._kb_id, query, top_k=self.top_k, mode=self.mode,
                                                  filters=self.filters, min_score=self.min_score))

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        if self.async_client is None:
            return await super()._aget_relevant_documents(query, run_manager=run_manager)
        if self._kb_id is None:
            self._kb_id = (await self.async_client.find_knowledge_base(self.knowledge_base)).id
        return self._documents(await self.async_client.search(self._kb_id, query, top_k=self.top_k, mode=self.mode,
                                                              filters=self.filters, min_score=self.min_score))
