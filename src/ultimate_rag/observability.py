"""Prometheus metrics.

Two sources, because workers are separate processes, possibly on other machines:

* the API's ``/metrics`` reads gauges from PostgreSQL at scrape time (documents per status, queue
  depth, age of the oldest due job, stuck documents), so they cover every process at once;
* each worker process counts what only it sees (claims, successes, retries, lease losses, failures
  by error class, stage durations, seconds in the embedder) in its own ``WorkerMetrics`` registry,
  served by the worker itself when ``ULTIMATE_RAG_WORKER_METRICS_PORT`` is set.

Registries are objects, never module globals: a test or a process may create several workers.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from .domain.status import ACTIVE

log = logging.getLogger(__name__)

# seconds: a tiny text parses in milliseconds, a large PDF embeds for many minutes
STAGE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
PIPELINE_STAGES = ("PARSING", "CHUNKING", "EMBEDDING", "INDEXING")


class _EmbeddingClock(Protocol):
    seconds_in_embedder: float


class WorkerMetrics:
    """The metrics of one worker process (or of one worker object in tests)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.claimed = Counter("ultimate_rag_worker_jobs_claimed", "Jobs claimed by this worker", registry=r)
        self.succeeded = Counter("ultimate_rag_worker_jobs_succeeded", "Jobs completed by this worker",
                                 ["operation"], registry=r)
        self.retries = Counter("ultimate_rag_worker_job_retries", "Failed attempts scheduled for a retry",
                               registry=r)
        self.failures = Counter("ultimate_rag_worker_job_failures",
                                "Failed attempts by error class; outcome is retry or failed (terminal)",
                                ["error_class", "outcome"], registry=r)
        self.lease_losses = Counter("ultimate_rag_worker_lease_losses",
                                    "Jobs this worker stopped because its lease was lost", registry=r)
        self.released = Counter("ultimate_rag_worker_jobs_released",
                                "Jobs handed back on shutdown without burning an attempt", registry=r)
        self.stage_seconds = Histogram("ultimate_rag_worker_stage_duration_seconds",
                                       "Duration of each pipeline stage of completed jobs", ["stage"],
                                       buckets=STAGE_BUCKETS, registry=r)
        self.janitor_removed = Counter("ultimate_rag_janitor_removed",
                                       "Orphans removed by janitor passes run in this worker", ["kind"], registry=r)
        self._server: Any = None

    def record_failure(self, exc: BaseException, will_retry: bool) -> None:
        self.failures.labels(error_class=exc.__class__.__name__, outcome="retry" if will_retry else "failed").inc()
        if will_retry:
            self.retries.inc()

    def record_stages(self, timings: Mapping[str, str]) -> None:
        """Stage durations from a document's ``stage_timings`` (each stage's start; the next one's
        start, or READY, ends it)."""
        for stage, seconds in stage_durations(timings).items():
            self.stage_seconds.labels(stage=stage).observe(seconds)

    def record_sweep(self, objects: int, snapshots: int, vectors: int) -> None:
        for kind, n in (("objects", objects), ("snapshots", snapshots), ("vectors", vectors)):
            if n:
                self.janitor_removed.labels(kind=kind).inc(n)

    def watch_embedding(self, service: _EmbeddingClock) -> None:
        """Report the embedding service's own clock (wall time with an embedder call in flight)."""
        self.registry.register(_EmbedderSeconds(service))

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Serve /metrics on a background thread; returns the bound port (0 picks a free one)."""
        self._server, _thread = start_http_server(port, addr=host, registry=self.registry)
        return int(self._server.server_port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


SEARCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class SearchMetrics:
    """Search latency of this API process by mode (``/metrics`` adds it to the database gauges)."""

    def __init__(self) -> None:
        self.seconds = Histogram("ultimate_rag_search_duration_seconds",
                                 "Search latency (query embedding, vector query, double filter) by mode",
                                 ["mode"], buckets=SEARCH_BUCKETS, registry=None)

    def observe(self, mode: str, seconds: float) -> None:
        self.seconds.labels(mode=mode).observe(seconds)

    def collect(self) -> Iterator[Metric]:
        yield from self.seconds.collect()


class _EmbedderSeconds:
    def __init__(self, service: _EmbeddingClock) -> None:
        self._service = service

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily("ultimate_rag_worker_embedder_seconds",
                                     "Seconds with at least one embedder call in flight")
        family.add_metric([], float(self._service.seconds_in_embedder))
        yield family

def stage_durations(timings: Mapping[str, str]) -> dict[str, float]:
    """``{stage: seconds}`` for each pipeline stage that has a start and an end in ``timings``."""
    starts = {name: _parse(value) for name, value in timings.items()}
    order = [*PIPELINE_STAGES, "READY"]
    out: dict[str, float] = {}
    for stage, following in itertools.pairwise(order):
        begin, end = starts.get(stage), starts.get(following)
        if begin is not None and end is not None:
            out[stage] = max(0.0, (end - begin).total_seconds())
    return out


def _parse(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


class DatabaseGauges:
    """The API's gauges, computed from rows read at scrape time (see OperationsQueries)."""

    def __init__(self, documents: Sequence[Mapping[str, Any]], jobs: Sequence[Mapping[str, Any]],
                 stuck_after_seconds: float) -> None:
        self._documents = documents
        self._jobs = jobs
        self._stuck_after = stuck_after_seconds

    def collect(self) -> Iterator[Metric]:
        docs = GaugeMetricFamily("ultimate_rag_documents", "Documents by status", labels=["status"])
        for row in self._documents:
            docs.add_metric([row["status"]], row["n"])
        yield docs
        stale = {row["status"]: row["stale"] for row in self._documents}
        stuck = GaugeMetricFamily(
            "ultimate_rag_documents_stuck",
            f"Active documents nothing has moved for over {self._stuck_after:g}s (running with no heartbeat, "
            "due while no worker is busy, an unfinished upload or fetch); a busy queue is not stuck",
            labels=["status"])
        for status in sorted(s.value for s in ACTIVE):
            stuck.add_metric([status], stale.get(status, 0))
        yield stuck
        yield from self._queue()

    def _queue(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily("ultimate_rag_jobs", "Queued and running ingestion jobs", labels=["status"])
        oldest = GaugeMetricFamily("ultimate_rag_job_oldest_seconds", "Age of the oldest job by status",
                                   labels=["status"])
        for row in self._jobs:
            jobs.add_metric([row["status"]], row["n"])
            oldest.add_metric([row["status"]], float(row["oldest"]))
        yield jobs
        yield oldest
        pending = next((row for row in self._jobs if row["status"] == "PENDING"), None)
        yield GaugeMetricFamily("ultimate_rag_queue_depth", "PENDING jobs a worker may claim now",
                                value=pending["due"] if pending else 0)
        yield GaugeMetricFamily("ultimate_rag_queue_oldest_available_seconds",
                                "How long the oldest claimable job has been waiting",
                                value=float(pending["oldest_due"]) if pending else 0.0)


# seconds: retrieval takes milliseconds, a long answer from a slow model a minute or more
ANSWER_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120)


class AnswerMetrics:
    """What the answer endpoint of this API process measured (served by its ``/metrics``)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.retrieval_seconds = Histogram("ultimate_rag_answer_retrieval_seconds",
                                           "Retrieval time of an answer (query rewrite excluded)",
                                           buckets=ANSWER_BUCKETS, registry=r)
        self.first_token_seconds = Histogram("ultimate_rag_answer_first_token_seconds",
                                             "From the request to the first answer text", buckets=ANSWER_BUCKETS,
                                             registry=r)
        self.total_seconds = Histogram("ultimate_rag_answer_duration_seconds", "From the request to the whole answer",
                                       buckets=ANSWER_BUCKETS, registry=r)
        self.tokens = Counter("ultimate_rag_answer_tokens", "Language model tokens, in (prompt) and out (completion)",
                              ["direction"], registry=r)
        self.answers = Counter("ultimate_rag_answers", "Answer requests by outcome", ["outcome"], registry=r)
        self.provider_errors = Counter("ultimate_rag_llm_provider_errors",
                                       "Failed language model requests (each try) by kind", ["kind"], registry=r)

    def provider_error(self, kind: str) -> None:
        self.provider_errors.labels(kind=kind).inc()

    def collect(self) -> Iterator[Metric]:
        yield from self.registry.collect()
