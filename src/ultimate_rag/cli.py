"""The ``ultimate-rag`` command (SPEC §11): up, serve, worker, migrate, keys create, janitor."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .cli_http import add_http_commands
from .cli_keys import add_key_commands
from .logs import setup_logging_from
from .settings import Settings

log = logging.getLogger("ultimate_rag.cli")

def _settings(args: argparse.Namespace) -> Settings:
    """The settings of this command, handed to bootstrap explicitly (never through the environment)."""
    overrides: dict[str, Any] = {}
    if getattr(args, "data_dir", None):
        overrides["data_dir"] = Path(args.data_dir).resolve()
    settings = Settings(**overrides)
    setup_logging_from(settings)
    return settings


def ensure_admin_key(settings: Settings) -> tuple[str, bool]:
    """The admin key from the environment, or from ``{data_dir}/admin.key`` (created, mode 0600)."""
    if settings.admin_key:
        return settings.admin_key, False
    path = settings.data_dir / "admin.key"
    if path.exists():
        return path.read_text().strip(), False
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    key = f"urk_admin_{secrets.token_urlsafe(32)}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(key + "\n")
    return key, True


def cmd_migrate(args: argparse.Namespace) -> int:
    from .bootstrap import run_migrations

    applied = run_migrations(_settings(args))
    print(f"applied migrations: {applied}" if applied else "database schema is up to date")
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from .worker import main

    main(args.concurrency, _settings(args))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    settings = _settings(args)
    key, _ = ensure_admin_key(settings)
    from .bootstrap import database_url, run_migrations

    url = database_url(settings)
    run_migrations(settings, url)
    _run_api(settings.model_copy(update={"database_url": url, "admin_key": key}), args.host, args.port)
    return 0


def _run_api(settings: Settings, host: str, port: int, on_signal: Callable[[], object] | None = None) -> None:
    """Serve until SIGINT/SIGTERM, then return normally so the caller can stop what it started
    (uvicorn would otherwise re-raise the signal and end the process before that)."""
    import uvicorn

    from .api.app import create_app

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if on_signal is not None:  # e.g. `up` stops replacing workers the moment it is told to stop
                on_signal()
            super().handle_exit(sig, frame)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    # JSON logs: uvicorn's records go through the root handler instead of its own text handlers
    logging_config: dict[str, Any] = {} if settings.log_format == "text" else {"log_config": None}
    config = uvicorn.Config(create_app(settings), host=host, port=port, log_level="info", proxy_headers=False,
                            **logging_config)
    Server(config).run()


def cmd_up(args: argparse.Namespace) -> int:
    """Everything on one machine: database (embedded unless configured), migrations, workers, API."""
    settings = _settings(args)
    from .bootstrap import database_url, run_migrations

    url = database_url(settings)  # starts the embedded server (unless one is configured)
    run_migrations(settings, url)
    key, created = ensure_admin_key(settings)
    keeper = WorkerKeeper(lambda i: subprocess.Popen([sys.executable, "-m", "ultimate_rag.worker"],
                                                      env=_worker_env(settings, i, url)), args.workers)
    keeper.start()
    base = f"http://{args.host}:{args.port}"
    print(f"\nultimate-rag is up: {base}  (API docs: {base}/docs)", flush=True)
    _announce_key(settings, base, key, created)
    try:
        _run_api(settings.model_copy(update={"database_url": url, "admin_key": key}), args.host, args.port,
                 on_signal=keeper.stop)
    finally:
        # told once already when a signal stopped the API: a second SIGTERM now, maybe seconds
        # later, would ask the workers to hand their jobs back without the grace period
        workers = keeper.procs if keeper.told else keeper.stop()
        for proc in workers:
            try:
                proc.wait(timeout=settings.shutdown_grace_seconds + 5)
            except subprocess.TimeoutExpired:
                proc.kill()
    return 0


def _announce_key(settings: Settings, base: str, key: str, created: bool) -> None:
    """The admin key is printed once, when it is created; after that (or when it comes from the
    environment) only where it is, so that it does not land in container logs and journals."""
    if not created:
        where = ("from ULTIMATE_RAG_ADMIN_KEY" if settings.admin_key
                 else f"in {settings.data_dir / 'admin.key'}")
        print(f"admin key: {where} (not printed)", flush=True)
        print(f"workbench: {base}/  (log in with the admin key)", flush=True)
        return
    print(f"admin key (new, saved to {settings.data_dir / 'admin.key'}; shown only this once): {key}", flush=True)
    # the key rides in the URL fragment, which browsers never send to the server (docs/workbench.md)
    from urllib.parse import quote

    print(f"workbench (logs straight in): {base}/#key={quote(key, safe='')}", flush=True)


class WorkerKeeper(threading.Thread):
    """``up``'s worker processes, kept running: one that exits (killed, crashed) is replaced, with a
    log line; one that keeps dying young waits longer each time (up to a minute) before the next."""

    def __init__(self, spawn: Callable[[int], subprocess.Popen[bytes]], count: int) -> None:
        super().__init__(name="worker-keeper", daemon=True)
        self._spawn = spawn
        self._guard = threading.Lock()
        self._halted = threading.Event()
        self.procs = [spawn(i) for i in range(count)]
        self._born = [time.monotonic()] * count
        self._early_deaths = [0] * count
        self.told = False  # the workers were sent the stop signal

    def run(self) -> None:
        while not self._halted.wait(1.0):
            for i, proc in enumerate(list(self.procs)):
                if proc.poll() is None:
                    continue
                lived = time.monotonic() - self._born[i]
                self._early_deaths[i] = self._early_deaths[i] + 1 if lived < 30 else 0
                delay = min(2.0 ** self._early_deaths[i], 60.0) if self._early_deaths[i] > 1 else 0.0
                log.warning("worker %d (pid %d) exited with %s: starting a new one%s", i, proc.pid,
                            proc.returncode, f" in {delay:.0f}s" if delay else "")
                if delay and self._halted.wait(delay):
                    return
                with self._guard:
                    if self._halted.is_set():
                        return
                    self.procs[i] = self._spawn(i)
                    self._born[i] = time.monotonic()

    def stop(self) -> list[subprocess.Popen[bytes]]:
        """Stop replacing workers and send each running one SIGTERM, at once (on every stop signal
        ``up`` receives: a worker that got the same signal from its process group counts the two
        as one stop, see stop_signals.py); returns them, for the caller to wait for."""
        with self._guard:
            self._halted.set()
            self.told = True
            for proc in self.procs:
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.send_signal(signal.SIGTERM)
        return list(self.procs)


def _worker_env(settings: Settings, index: int, database_url: str) -> dict[str, str]:
    """A worker process's environment: the database and data directory this command uses (a child
    process learns them from its environment), and its own metrics port (base port + index)."""
    env = os.environ.copy()
    env["ULTIMATE_RAG_DATABASE_URL"] = database_url
    env["ULTIMATE_RAG_DATA_DIR"] = str(settings.data_dir)
    env["ULTIMATE_RAG_PARENT_PID"] = str(os.getpid())  # workers stop when `up` is gone, even after a SIGKILL
    if settings.worker_metrics_port:
        env["ULTIMATE_RAG_WORKER_METRICS_PORT"] = str(settings.worker_metrics_port + index)
    return env


def cmd_janitor(args: argparse.Namespace) -> int:
    """One sweep of orphaned objects, snapshots and vectors; prints what it removed."""
    settings = _settings(args)
    if args.grace_seconds is not None and args.grace_seconds < 0:
        print("--grace-seconds must be 0 or more", file=sys.stderr)
        return 2
    from .bootstrap import build, database_url, run_migrations

    async def sweep() -> int:
        url = database_url(settings)
        run_migrations(settings, url)
        container = build(settings, url=url, pool_size=3)
        await container.open()
        try:
            report = await container.maintenance.janitor.with_grace(args.grace_seconds).sweep()
        finally:
            await container.close()
        for key in report.objects:
            print(f"removed object {key}")
        for path in report.snapshots:
            print(f"removed chunk snapshots {path}")
        for path in report.temp_files:
            print(f"removed temp file {path}")
        for document_id, count in report.vectors.items():
            print(f"removed {count} vector(s) of document {document_id}")
        print(report.summary())
        return 1 if report.errors else 0

    return asyncio.run(sweep())


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ultimate-rag", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="run everything: database, migrations, API and workers")
    up.add_argument("--host", default="127.0.0.1")
    up.add_argument("--port", type=int, default=8000)
    up.add_argument("--workers", type=int, default=2)
    up.add_argument("--data-dir")
    up.set_defaults(func=cmd_up)

    serve = sub.add_parser("serve", help="run the API only")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--data-dir")
    serve.set_defaults(func=cmd_serve)

    worker = sub.add_parser("worker", help="run a worker process")
    worker.add_argument("--concurrency", type=int)
    worker.add_argument("--data-dir")
    worker.set_defaults(func=cmd_worker)

    mig = sub.add_parser("migrate", help="apply database migrations")
    mig.add_argument("--data-dir")
    mig.set_defaults(func=cmd_migrate)

    janitor = sub.add_parser("janitor", help="remove orphaned objects, snapshots and vectors (one pass)")
    janitor.add_argument("--grace-seconds", type=float,
                         help="leave files younger than this (default: ULTIMATE_RAG_ORPHAN_GRACE_SECONDS)")
    janitor.add_argument("--data-dir")
    janitor.set_defaults(func=cmd_janitor)

    add_key_commands(sub, _settings)
    add_http_commands(sub)  # mcp, ingest, search, ask, status: over HTTP
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
