"""Liveness, readiness and Prometheus metrics. They expose nothing private."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from ...domain.auth import same_secret
from ...domain.errors import AuthenticationError
from ...observability import DatabaseGauges
from ..deps import AnswerMetricsDep, OperationsDep, ReadinessDep, SearchMetricsDep, SettingsDep
from ..schemas import body_of

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(readiness: ReadinessDep) -> JSONResponse:
    """Every configured backend: the database, and S3 / Milvus / Qdrant / the HTTP embedder when set."""
    checks = await readiness()
    ok = all(checks.values())
    return JSONResponse({"status": "ready" if ok else "unavailable", **checks}, status_code=200 if ok else 503)


async def metrics_access(settings: SettingsDep, request: Request) -> None:
    """With ``ULTIMATE_RAG_METRICS_TOKEN`` set, a scraper must send it as a bearer token. The
    metrics hold counts only (no names, ids or content), so they are open when it is unset."""
    token = settings.metrics_token
    if not token:
        return
    given = request.headers.get("authorization", "")
    if not (given.lower().startswith("bearer ") and same_secret(given[7:].strip(), token)):
        raise AuthenticationError("the metrics endpoint needs the metrics token")


@router.get("/metrics", dependencies=[Depends(metrics_access)], response_class=PlainTextResponse,
            responses={**body_of("text/plain", "Prometheus text format", {"type": "string"}),
                       401: {"description": "the metrics token is required"}})
async def metrics(queries: OperationsDep, settings: SettingsDep, answer_metrics: AnswerMetricsDep,
                  search_metrics: SearchMetricsDep) -> Response:
    """Gauges read from PostgreSQL at scrape time, so they cover every API and worker process:
    documents per status, stuck documents, jobs, queue depth and the age of the oldest due job;
    and this API process's search latency by mode (``ultimate_rag_search_duration_seconds``).
    Each worker serves its own counters and histograms (``ULTIMATE_RAG_WORKER_METRICS_PORT``); the
    answer metrics (latency, tokens, provider errors: docs/answers.md) are this API process's own."""
    stuck_after = settings.stuck_after_seconds
    registry = CollectorRegistry()
    documents = await queries.document_metrics(stuck_after, settings.lease_seconds)
    registry.register(DatabaseGauges(documents, await queries.job_metrics(), stuck_after))
    registry.register(answer_metrics)  # this process's answer latency, tokens, provider errors
    registry.register(search_metrics)  # and its search latency by mode
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
