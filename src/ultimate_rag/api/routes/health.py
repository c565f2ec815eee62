"""Liveness, readiness and Prometheus metrics. They expose nothing private."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from ..deps import ContainerDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(container: ContainerDep) -> JSONResponse:
    try:
        ok = await container.db.ping()
    except Exception:
        ok = False
    return JSONResponse({"status": "ready" if ok else "unavailable", "database": ok},
                        status_code=200 if ok else 503)


@router.get("/metrics")
async def metrics(container: ContainerDep) -> Response:
    """Queue and document gauges read from PostgreSQL at scrape time, so they cover every process."""
    docs = await container.db.fetchall("SELECT status, count(*) AS n FROM documents GROUP BY status")
    jobs = await container.db.fetchall(
        "SELECT status, count(*) AS n, coalesce(max(extract(epoch FROM now() - available_at)), 0) AS oldest"
        " FROM ingestion_jobs WHERE status IN ('PENDING', 'RUNNING') GROUP BY status"
    )
    registry = CollectorRegistry()

    class _Snapshot:
        def collect(self):  # type: ignore[no-untyped-def]
            d = GaugeMetricFamily("ultimate_rag_documents", "Documents by status", labels=["status"])
            for row in docs:
                d.add_metric([row["status"]], row["n"])
            yield d
            j = GaugeMetricFamily("ultimate_rag_jobs", "Queued and running ingestion jobs", labels=["status"])
            age = GaugeMetricFamily("ultimate_rag_job_oldest_seconds", "Age of the oldest due job",
                                    labels=["status"])
            for row in jobs:
                j.add_metric([row["status"]], row["n"])
                age.add_metric([row["status"]], float(row["oldest"]))
            yield j
            yield age

    registry.register(_Snapshot())
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
