"""Connection pool and transactions. Nothing connects at import time."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import select
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import orjson
import psycopg
from pgvector.psycopg import register_vector_async
from psycopg.types.json import set_json_dumps

# pgvector recognises scipy arrays by looking ``scipy.sparse`` up in ``sys.modules``; when a library
# imports scipy for the first time in another thread (pymilvus during a Milvus search, datasketch in
# the dedup step), that lookup can meet the half-initialised module and fail with AttributeError
# ("partially initialized module 'scipy.sparse'"). Importing it once here, before any thread runs,
# closes the race. (scipy comes with datasketch; without it there is nothing to race with.)
with contextlib.suppress(ImportError):
    import scipy.sparse  # noqa: F401
from psycopg import pq
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from .errors import translated
from .sql import load_queries

Connection = psycopg.AsyncConnection[dict[str, Any]]
Q = load_queries("database.sql")
log = logging.getLogger(__name__)


class Database:
    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 10, register_vector: bool = True,
                 generic_plans: bool = False, acquire_timeout: float = 10.0,
                 idle_transaction_timeout: float | None = None, statement_timeout: float | None = None) -> None:
        """``generic_plans``: plan each prepared statement once for all parameters. The queue's
        statements are the same on every call, and their planning costs more than running them.
        ``idle_transaction_timeout``: the server ends a transaction of this pool that waits longer
        than this for its client's next statement, and its row locks go with it. A worker frozen
        inside a transaction (stopped, swapped out, its machine paused) would otherwise hold its
        job's rows for as long as it stays frozen, and no other worker could ever take the job
        over; work outside the database inside a transaction runs under ``kept_open``.
        ``statement_timeout``: the server cancels any statement of this pool that runs longer
        (the API's pool: a request cannot keep the database busy for minutes)."""
        self.url = url
        self.idle_transaction_timeout = idle_transaction_timeout
        self._register_vector = register_vector
        self._pool = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            kwargs={"row_factory": dict_row, "autocommit": True, "prepare_threshold": 1 if generic_plans else 5,
                    **_server_options(generic_plans, idle_transaction_timeout, statement_timeout)},
            configure=self._configure,
            open=False,
            # waiting longer for a connection only delays the caller's own error handling (a worker
            # told to stop while the database is down must not hang for the default 30 s)
            timeout=acquire_timeout,
            check=self._check,
        )

    async def _configure(self, conn: Connection) -> None:
        set_json_dumps(json_dumps, context=conn)
        if self._register_vector:
            try:
                await register_vector_async(conn)
            except psycopg.ProgrammingError:
                # before the first migration the extension does not exist yet
                pass

    @staticmethod
    async def _check(conn: Connection) -> None:
        """The pool's check before it hands a connection out, without a round trip when the
        connection is quiet: idle, and nothing from the server waiting on its socket. A server
        that restarted or ended the session has sent its goodbye (and closed the socket), which
        makes the socket readable: then the full check runs, and a dead connection is replaced
        before any caller meets it."""
        if not _quiet(conn):
            await AsyncConnectionPool.check_connection(conn)

    async def open(self) -> None:
        await self._pool.open(wait=True, timeout=30)

    async def close(self) -> None:
        await self._pool.close(timeout=2.0)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Connection]:
        """A pooled connection; the driver's errors leave it as domain errors (errors.py), so no
        caller outside the postgres adapters ever sees psycopg."""
        try:
            async with self._pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            raise translated(exc) from exc

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        async with self.connection() as conn, conn.transaction():
            yield conn

    @asynccontextmanager
    async def kept_open(self, conn: Connection) -> AsyncIterator[None]:
        """Work outside the database (vectors written, objects removed) while ``conn``'s open
        transaction holds rows: the transaction sends a no-op statement every quarter of the idle
        timeout, so the server does not take it for a frozen client's. Without a timeout, nothing."""
        if self.idle_transaction_timeout is None:
            yield
            return
        done = asyncio.Event()
        pinger = asyncio.create_task(_keep_busy(conn, self.idle_transaction_timeout / 4, done))
        try:
            yield
        finally:
            done.set()
            await pinger  # never cancelled: a statement cut off midway would spoil the connection

    async def fetchone(self, sql: Any, params: Any = None) -> dict[str, Any] | None:
        async with self.connection() as conn:
            cur = await conn.execute(sql, params)
            return await cur.fetchone()

    async def fetchall(self, sql: Any, params: Any = None, *, binary: bool = False) -> list[dict[str, Any]]:
        """``binary``: results in PostgreSQL's binary format (vectors: bytes, not text to parse)."""
        async with self.connection() as conn:
            cur = await conn.execute(sql, params, binary=binary)
            return await cur.fetchall()

    async def execute(self, sql: Any, params: Any = None) -> int:
        async with self.connection() as conn:
            cur = await conn.execute(sql, params)
            return cur.rowcount

    async def ping(self) -> bool:
        row = await self.fetchone(Q["ping"])
        return bool(row and row["ok"] == 1)


def json_dumps(obj: Any) -> bytes | str:
    """JSON and JSONB parameters (chunk rows, progress, metadata) in orjson's encoder, several times
    the standard library's speed; what orjson refuses (an integer beyond 64 bits) goes through the
    standard library's, as before. (Results are decoded by the standard library: orjson reads an
    integer beyond 64 bits as a float.)"""
    try:
        return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return json.dumps(obj)


def _quiet(conn: Connection) -> bool:
    """Open, idle outside a transaction, and with no bytes from the server pending."""
    if conn.closed or conn.pgconn.transaction_status != pq.TransactionStatus.IDLE:
        return False
    try:
        readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.OperationalError):
        return False
    return not readable


def _server_options(generic_plans: bool, idle_transaction_timeout: float | None,
                    statement_timeout: float | None = None) -> dict[str, str]:
    options = []
    if statement_timeout:
        options.append(f"-c statement_timeout={max(1, round(statement_timeout * 1000))}")
    if generic_plans:
        options.append("-c plan_cache_mode=force_generic_plan")
    if idle_transaction_timeout is not None:
        options.append(f"-c idle_in_transaction_session_timeout={max(1, round(idle_transaction_timeout * 1000))}")
    return {"options": " ".join(options)} if options else {}


async def _keep_busy(conn: Connection, every: float, done: asyncio.Event) -> None:
    while not done.is_set():
        try:
            await asyncio.wait_for(done.wait(), every)
            return
        except TimeoutError:
            pass
        try:
            await conn.execute(Q["ping"])
        except psycopg.Error as exc:  # the transaction is gone: its own next statement says so
            log.warning("a transaction kept open during outside work was ended: %s", exc)
            return


@dataclass(frozen=True)
class SharedTransaction:
    """An open transaction handed to another store (the READY commit's to the language centroids,
    the vector write's to the sparse side): a store on the same database writes in it, so its rows
    commit with it or not at all, without a transaction (and a pooled connection) of its own."""

    url: str
    conn: Connection


@asynccontextmanager
async def transaction_on(db: Database, within: object = None) -> AsyncIterator[Connection]:
    """``within`` when it is an open transaction on ``db``'s database, else a new one on ``db``."""
    if isinstance(within, SharedTransaction) and within.url == db.url:
        yield within.conn
        return
    async with db.transaction() as conn:
        yield conn
