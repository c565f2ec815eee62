"""A question whose answer is in another language than the knowledge base's many near-topic
chunks (SPEC §10, docs/search.md "Language centring"): the plain query vector's nearest chunks are
its own language's, so the answer can rank below every candidate the plain dense search returns,
where no offset can lift it. The centred query's own candidate search brings it in — in every mode
with a dense side, on pgvector and Milvus alike (real model, real stores)."""

from __future__ import annotations

from pathlib import Path
from uuid import UUID, uuid4

import pytest

from ultimate_rag.domain.models import KnowledgeBaseSettings
from ultimate_rag.domain.search import SearchMode
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.services.search import MIN_CANDIDATES
from ultimate_rag.settings import Settings
from ultimate_rag.testing import fixtures as servers

from ..conftest import ADMIN_KEY

milvus_server = servers.milvus_server
backend = servers.vector_backend

ITEMS = ("desk lamp", "office chair", "monitor arm", "keyboard", "headset", "webcam", "docking station",
         "label printer", "paper shredder", "whiteboard", "standing desk", "filing cabinet")
CITIES = ("Leeds", "Bristol", "Glasgow", "Cardiff", "Belfast", "Norwich", "York")
# the knowledge base's many English chunks: delivery notes, each close to the question's topic
ENGLISH = [f"Delivery note {n}: the {ITEMS[n % len(ITEMS)]} ordered for the {CITIES[n % len(CITIES)]} office "
           f"ships from the central warehouse and arrives within {2 + n % 6} working days; the courier "
           f"calls the day before." for n in range(2 * MIN_CANDIDATES)]
CHINESE = ["退货政策：收到商品后三十天内可以无理由退货，退款在五个工作日内原路退回。",
           "食堂每天中午十一点半开始供应午餐，周五提供素食套餐。",
           "新员工入职第一周需要完成信息安全培训并签署保密协议。",
           "会议室预订请提前一天在内部系统中登记，取消需至少提前两小时。",
           "公司年会将在十二月中旬举行，地点另行通知。",
           "报销单需附上发票原件，由部门经理签字后提交财务部。",
           "办公楼夜间十点后关闭，加班人员需刷卡进入。",
           "停车场车位有限，请优先使用公共交通工具。",
           "打印机卡纸时请先关闭电源，再打开后盖取出纸张。",
           "年假可以分段休，但每段不少于半天。",
           "访客需要在前台登记身份信息并佩戴访客证。",
           "绿植由行政部统一养护，请勿自行浇水。",
           "饮水机的滤芯每三个月更换一次。",
           "公司邮箱容量为五十GB，超出后无法接收邮件。",
           "远程办公需要提前向直属上级申请。"]
QUESTION = "How many days do I have to send back an item after it arrives, and when is my money refunded?"




@pytest.fixture
def settings(db_url: str, tmp_path: Path, backend: dict[str, str]) -> Settings:
    return Settings(database_url=db_url, data_dir=tmp_path / "data", admin_key=ADMIN_KEY,
                    **backend)  # type: ignore[arg-type]  # the backend fixture: settings fields by name


async def rank_of(container, kb: UUID, document: UUID, mode: SearchMode) -> int | None:
    hits = await container.retrieval.search.search(kb, QUESTION, 10, mode=mode)
    found = [h.document_id for h in hits]
    return found.index(document) + 1 if document in found else None


async def test_an_answer_in_another_language_below_the_plain_candidates_is_found(container, monkeypatch) -> None:
    kb = await container.ingest.knowledge_bases.create(f"across-{uuid4().hex[:6]}", "", KnowledgeBaseSettings())
    for n, text in enumerate(ENGLISH):
        await container.ingest.ingestion.submit(kb, f"delivery-{n:03d}.txt", None, text.encode())
    ids = [(await container.ingest.ingestion.submit(kb, f"notice-{n:02d}.txt", None, text.encode())).id
           for n, text in enumerate(CHINESE)]
    await container.worker(WorkerConfig(heartbeat_seconds=30)).run_until_idle()
    answer = ids[0]
    search = container.retrieval.search
    with_pool = {mode: await rank_of(container, kb.id, answer, mode) for mode in (SearchMode.DENSE, SearchMode.HYBRID)}

    async def nothing(*args: object, **kwargs: object) -> list[UUID]:
        return []

    monkeypatch.setattr(search, "_across_languages", nothing)
    without = {mode: await rank_of(container, kb.id, answer, mode) for mode in (SearchMode.DENSE, SearchMode.HYBRID)}
    assert without == {SearchMode.DENSE: None, SearchMode.HYBRID: None}  # the plain candidates: English notes
    for mode, rank in with_pool.items():  # measured: first in both
        assert rank is not None and rank <= 3, (mode, rank)
