"""The worker process: ``ultimate-rag worker`` or ``python -m ultimate_rag.worker``.

SIGTERM/SIGINT stop claiming; in-flight jobs get ``ULTIMATE_RAG_SHUTDOWN_GRACE_SECONDS`` to finish
and are then handed back without burning an attempt. A second signal stops at once (the leases
then expire and other workers take the jobs over).
"""

from __future__ import annotations

import asyncio
import logging
import signal

from .bootstrap import build, database_url, run_migrations
from .logs import setup_logging
from .services.worker import WorkerConfig
from .settings import Settings

log = logging.getLogger("ultimate_rag.worker")


async def run_worker(settings: Settings, concurrency: int | None = None) -> None:
    concurrency = concurrency or settings.worker_concurrency
    url = database_url(settings)
    await asyncio.to_thread(run_migrations, settings, url)
    container = build(settings, url=url, pool_size=concurrency + 4)
    await container.open()
    worker = container.worker(WorkerConfig(
        concurrency=concurrency, heartbeat_seconds=settings.effective_heartbeat_seconds,
        poll_interval_seconds=settings.poll_interval_seconds, retry_delay_seconds=settings.retry_delay_seconds,
        shutdown_grace_seconds=settings.shutdown_grace_seconds,
    ))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    main_task = asyncio.current_task()

    def on_signal(signum: int) -> None:
        if stop.is_set():
            log.warning("second signal: stopping now")
            if main_task:
                main_task.cancel()
            return
        log.info("received %s: finishing in-flight jobs", signal.Signals(signum).name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        await worker.run(stop)
    finally:
        await container.close()


def main(concurrency: int | None = None) -> None:
    settings = Settings()
    setup_logging(settings.log_level)
    try:
        asyncio.run(run_worker(settings, concurrency))
    except asyncio.CancelledError:
        pass


if __name__ == "__main__":
    main()
