"""How late the job leases' renewals come while the machine is overloaded, with the renewals on
the worker's event loop (``--mode loop``: a heartbeat task, the loop niced below the model's
threads) and on the lease keeper's thread (``--mode keeper``, the default since 2026-12-03).

Each mode runs in a process of its own, as a worker does: the local model, its threads ahead of
the event loop (``ULTIMATE_RAG_WORKER_MODEL_PRECEDENCE``), the keeper's thread started before the
loop is niced, ``--burners`` CPU-bound processes at the default priority beside it, a short lease
(``--lease`` seconds, renewed every quarter of it) and the shared corpus being ingested. The
database records every renewal as it executes (a trigger on ``ingestion_jobs.locked_at``), so the
measure does not depend on the worker's own clock: lateness = the gap between two renewals of a
job minus the renewal interval; a gap longer than the lease is a lease another worker could take.

    .venv/bin/python -m bench.heartbeat [--seconds 60] [--burners 8] [--lease 8] [--per-lang 20] [--concurrency 3]

Prints ``RESULT`` lines per mode.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ultimate_rag.bootstrap import build
from ultimate_rag.domain.models import KnowledgeBaseSettings
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.settings import Settings
from ultimate_rag.worker import model_first

from .common import fresh_database, load_corpus, machine

TRIGGER = """
CREATE TABLE bench_renewals (job_id uuid, at timestamptz);
CREATE FUNCTION bench_renewal() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO bench_renewals VALUES (NEW.id, clock_timestamp()); RETURN NEW; END $$;
CREATE TRIGGER bench_renewal AFTER UPDATE OF locked_at ON ingestion_jobs FOR EACH ROW
  WHEN (NEW.status = 'RUNNING' AND NEW.locked_at IS DISTINCT FROM OLD.locked_at)
  EXECUTE FUNCTION bench_renewal();
"""
GAPS = """
SELECT extract(epoch FROM at - lag(at) OVER (PARTITION BY job_id ORDER BY at)) AS gap FROM bench_renewals
"""


def burn() -> None:
    while True:
        pass


async def run_mode(args: argparse.Namespace) -> dict[str, float]:
    url, server, root = fresh_database()
    interval = args.lease / 4
    settings = Settings(database_url=url, data_dir=root / "data", lease_seconds=args.lease,
                        heartbeat_seconds=interval, sparse_enabled=True)
    container = build(settings, url=url, pool_size=8)
    await container.open()
    try:
        for statement in TRIGGER.strip().split(";\n"):
            await container.infra.db.execute(statement)
        kb = await container.ingest.knowledge_bases.create("heartbeat", "", KnowledgeBaseSettings())
        for doc in load_corpus().make_corpus(per_lang=args.per_lang):
            await container.ingest.ingestion.submit(kb, f"{doc['id']}.txt", None, doc["text"].encode())
        worker = container.worker(WorkerConfig(concurrency=args.concurrency, heartbeat_seconds=interval,
                                               lease_keeper=args.mode == "keeper"))
        if worker.keeper is not None:
            worker.keeper.start()  # as worker.py does: before the loop's priority is lowered
        container.embedding.embedder.count_tokens("warm up")
        model_first(container, settings)
        burners = [multiprocessing.Process(target=burn, daemon=True) for _ in range(args.burners)]
        for process in burners:
            process.start()
        stop = asyncio.Event()
        running = asyncio.create_task(worker.run(stop))
        await asyncio.sleep(args.seconds)
        stop.set()
        for process in burners:
            process.kill()
        await running
        gaps = [float(r["gap"]) for r in await container.infra.db.fetchall(GAPS) if r["gap"] is not None]
        ready = await container.infra.db.fetchone("SELECT count(*) AS n FROM documents WHERE status = 'READY'")
        lost = worker.metrics.registry.get_sample_value("ultimate_rag_worker_lease_losses_total") or 0.0
        late = sorted(max(0.0, g - interval) for g in gaps) or [0.0]
        return {"renewals": len(gaps), "interval": interval, "lease": args.lease,
                "late_p50": statistics.median(late), "late_p99": late[min(len(late) - 1, int(0.99 * len(late)))],
                "late_max": late[-1], "over_lease": sum(g > args.lease for g in gaps), "lease_losses": lost,
                "ready": ready["n"] if ready else 0, "load": os.getloadavg()[0]}
    finally:
        await container.close()
        server.cleanup()  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["loop", "keeper", "both"], default="both")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--burners", type=int, default=8)
    parser.add_argument("--lease", type=float, default=8.0)
    parser.add_argument("--per-lang", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=3, help="the worker's job slots")
    args = parser.parse_args()
    if args.mode != "both":
        print(json.dumps(asyncio.run(run_mode(args))))
        return
    print(f"machine: {machine()}; {args.burners} CPU burners, lease {args.lease:g} s renewed every "
          f"{args.lease / 4:g} s, {args.seconds:g} s a mode, {args.concurrency} job slots")
    for mode in ("loop", "keeper"):
        out = subprocess.run([sys.executable, "-m", "bench.heartbeat", "--mode", mode, "--seconds", str(args.seconds),
                              "--burners", str(args.burners), "--lease", str(args.lease),
                              "--per-lang", str(args.per_lang), "--concurrency", str(args.concurrency)],
                             capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parents[1])
        lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
        if out.returncode or not lines:
            raise SystemExit(f"mode {mode} failed:\n{out.stderr[-3000:]}")
        r = json.loads(lines[-1])
        print(f"RESULT heartbeat mode={mode} renewals={r['renewals']} late_p50={r['late_p50']:.2f}s "
              f"late_p99={r['late_p99']:.2f}s late_max={r['late_max']:.2f}s gaps_over_lease={r['over_lease']} "
              f"lease_losses={r['lease_losses']:.0f} ready={r['ready']} load={r['load']:.1f}")
        time.sleep(2)


if __name__ == "__main__":
    main()
