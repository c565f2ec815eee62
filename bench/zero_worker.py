"""A worker process of the ceiling benchmark (``bench.ingest --embedder zero --worker-processes N``):
the product's worker as ``ultimate-rag worker`` runs it (its own process, event loop and pools, the
worker process's pool settings), with the zero-cost embedder. ``ultimate-rag up`` runs two of them
by default; one process's event loop is one core at most, whatever the machine has.

Prints ``ready`` once its pools are open; stops on SIGTERM, finishing its in-flight jobs.

    python -m bench.zero_worker DATABASE_URL DATA_DIR --concurrency 8
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from pathlib import Path

from ultimate_rag.bootstrap import build, freeze_startup_heap
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.settings import Settings
from ultimate_rag.worker import run_event_loop

from .ceiling import ZeroEmbedder


async def main_async(args: argparse.Namespace) -> None:
    # the product's poll interval: new jobs wake the worker through LISTEN; the side loops (connector
    # syncs, embedding migrations) poll at it, and a shorter one would bill their idle polls to the pipeline
    settings = Settings(database_url=args.url, data_dir=Path(args.data_dir), sparse_enabled=False)
    container = build(settings, url=args.url, embedder=ZeroEmbedder(), pool_size=args.concurrency + 4)
    await container.open()
    freeze_startup_heap()  # as ``ultimate-rag worker`` does
    worker = container.worker(WorkerConfig(concurrency=args.concurrency, heartbeat_seconds=10,
                                           poll_interval_seconds=settings.poll_interval_seconds))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("ready", flush=True)
    try:
        await worker.run(stop)
    finally:
        await container.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("url")
    parser.add_argument("data_dir")
    parser.add_argument("--concurrency", type=int, default=8)
    run_event_loop(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
