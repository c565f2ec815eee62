"""The worker process: ``ultimate-rag worker`` or ``python -m ultimate_rag.worker``.

SIGTERM/SIGINT stop claiming; in-flight jobs get ``ULTIMATE_RAG_SHUTDOWN_GRACE_SECONDS`` to finish
and are then handed back without burning an attempt. Signals arriving together (a process group's
and the one ``up`` forwards) are one stop; a later second signal hands the jobs back at once, a
third stops at once (the leases then expire and other workers take the jobs over): stop_signals.py.

Every ``ULTIMATE_RAG_JANITOR_INTERVAL_SECONDS`` the process offers to sweep orphans (one process
at a time wins the lock). With ``ULTIMATE_RAG_WORKER_METRICS_PORT`` set it serves its own /metrics.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

import psycopg

from .adapters.embedders.engine_embedders import EngineEmbedder
from .adapters.embedders.precedence import give_model_precedence
from .bootstrap import Container, build, database_url, freeze_startup_heap, run_migrations
from .logs import setup_logging_from
from .observability import WorkerMetrics
from .services.job_loop import IngestionWorker, WorkerConfig
from .settings import Settings
from .stop_signals import StopLevel, StopSignals

log = logging.getLogger("ultimate_rag.worker")
T = TypeVar("T")


async def run_worker(settings: Settings, concurrency: int | None = None) -> None:
    concurrency = concurrency or settings.worker_concurrency
    url = database_url(settings)
    await _until_database_answers(lambda: asyncio.to_thread(run_migrations, settings, url),
                                  settings.poll_interval_seconds)
    container = build(settings, url=url, pool_size=concurrency + 4)
    await container.open()
    worker = container.worker(WorkerConfig(
        concurrency=concurrency, heartbeat_seconds=settings.effective_heartbeat_seconds,
        poll_interval_seconds=settings.poll_interval_seconds, retry_delay_seconds=settings.retry_delay_seconds,
        shutdown_grace_seconds=settings.shutdown_grace_seconds,
        janitor_interval_seconds=settings.janitor_interval_seconds,
    ))
    if worker.keeper is not None:  # the lease keeper's thread keeps the process's priority: started first
        worker.keeper.start()
    model_first(container, settings)
    freeze_startup_heap()
    metrics = _serve_metrics(settings, container, worker)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    main_task = asyncio.current_task()

    signals = StopSignals()

    def on_signal(signum: int) -> None:
        name = signal.Signals(signum).name
        level = signals.receive()
        if level is None:  # e.g. the process group's signal and the one `up` forwards: one stop
            log.info("received %s again: already stopping", name)
        elif level == StopLevel.FINISH:
            log.info("received %s: finishing in-flight jobs", name)
            stop.set()
        elif level == StopLevel.HAND_BACK:
            log.warning("received %s again: handing in-flight jobs back now", name)
            stop.set()
            worker.hand_back_now()
        else:
            log.warning("received %s a third time: stopping now, leases will expire", name)
            if main_task:
                main_task.cancel()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    orphan_watch = asyncio.create_task(_stop_when_parent_dies(stop))
    try:
        await worker.run(stop)
    finally:
        orphan_watch.cancel()
        if metrics is not None:
            metrics.stop()
        await container.close()


def model_first(container: Container, settings: Settings) -> bool:
    """With the local model, this process's own steps yield to the model's threads (precedence.py)."""
    embedder = container.embedding.embedder
    thread = embedder.model_thread if isinstance(embedder, EngineEmbedder) else None
    return thread is not None and give_model_precedence(thread, settings.worker_model_precedence)


async def _until_database_answers(step: Any, pause: float, attempts: int = 60) -> None:
    """A worker that starts while the database is restarting waits for it (one line per try)
    instead of exiting: nobody may be there to start it again."""
    for attempt in range(1, attempts + 1):
        try:
            await step()
            return
        except psycopg.OperationalError as exc:
            if attempt == attempts:
                raise
            log.warning("database unavailable at start (%s); retrying", str(exc).strip().splitlines()[0][:200])
            await asyncio.sleep(max(pause, 1.0))


async def _stop_when_parent_dies(stop: asyncio.Event) -> None:
    """A worker started by ``ultimate-rag up`` shuts down gracefully once ``up`` is gone, however it
    went (a SIGKILL gives it no chance to stop its children): no worker is left running unowned."""
    parent = os.environ.get("ULTIMATE_RAG_PARENT_PID")
    if not parent or not parent.isdigit():
        return
    while not stop.is_set():
        if os.getppid() != int(parent):
            log.warning("the process that started this worker is gone: stopping")
            stop.set()
            return
        await asyncio.sleep(1.0)


def _serve_metrics(settings: Settings, container: Container, worker: IngestionWorker) -> WorkerMetrics | None:
    """The worker's own /metrics, when a port is configured. A port that cannot be bound is
    reported and the worker runs on: metrics never stop ingestion."""
    worker.metrics.watch_embedding(container.embedding.service)
    if settings.worker_metrics_port is None:
        return None
    try:
        port = worker.metrics.serve(settings.worker_metrics_port, settings.worker_metrics_host)
    except OSError as exc:
        log.error("cannot serve worker metrics on %s:%s: %s", settings.worker_metrics_host,
                  settings.worker_metrics_port, exc)
        return None
    log.info("worker metrics on http://%s:%d/metrics", settings.worker_metrics_host, port)
    return worker.metrics


def run_event_loop(main: Coroutine[Any, Any, T]) -> T:
    """uvloop where it is installed: a worker's time goes largely to psycopg's waits, which register
    and unregister the socket with the loop for every statement (in C with uvloop: measured in
    bench/RESULTS.md, the ceiling's worker CPU per document -10 %); plain asyncio otherwise."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def main(concurrency: int | None = None, settings: Settings | None = None) -> None:
    settings = settings or Settings()
    setup_logging_from(settings)
    try:
        run_event_loop(run_worker(settings, concurrency))
    except asyncio.CancelledError:
        pass


if __name__ == "__main__":
    main()
