"""``ultimate-rag status [--kb KB]``: documents per status, stuck documents and the queue depth."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.markup import escape
from rich.table import Table

from ..client import ApiError, AsyncClient
from .common import add_connection_options, connect, consoles, knowledge_base, run

ORDER = ["UPLOADING", "FETCHING", "PENDING", "PARSING", "CHUNKING", "EMBEDDING", "INDEXING", "DELETING", "READY",
         "FAILED", "OUTDATED", "DELETED"]


def add_status_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("status", help="documents per status, stuck documents, queue depth (over HTTP)")
    p.add_argument("--kb", help="one knowledge base (name or id); default: every one this key sees")
    p.add_argument("--json", action="store_true", help="print as JSON")
    add_connection_options(p)
    p.set_defaults(func=lambda args: run(lambda: _status(args)))


async def _status(args: argparse.Namespace) -> int:
    async with connect(args) as rag:
        kbs = [await knowledge_base(rag, args.kb)] if args.kb else await rag.list_knowledge_bases()
        rows: list[dict[str, Any]] = []
        for kb in kbs:
            full = await rag.get_knowledge_base(kb.id)
            rows.append({"id": full.id, "name": full.name, "counts": full.document_counts or {}})
        ids = {r["id"] for r in rows}
        stuck = await _stuck(rag, ids)
        queue = await _queue_depth(rag)
    if args.json:
        print(json.dumps({"knowledge_bases": rows, "stuck": stuck, "queue_depth": queue}, indent=2))
        return 0
    out, _ = consoles()
    statuses = [s for s in ORDER if any(r["counts"].get(s) for r in rows)] or ["READY"]
    table = Table(title="documents per status")
    table.add_column("knowledge base")
    for s in statuses:
        table.add_column(s, justify="right")
    for r in rows:
        table.add_row(escape(r["name"]), *(str(r["counts"].get(s, 0)) for s in statuses))
    out.print(table)
    if stuck is None:
        out.print("stuck documents: unknown (an admin key can see them)")
    elif not stuck:
        out.print("stuck documents: none")
    else:
        out.print(f"stuck documents: {len(stuck)}")
        for d in stuck:
            out.print(f"  {d['id']}  {escape(d['filename'])}  {d['status']} for {d['seconds_in_status']:.0f}s")
    out.print(f"queue depth: {'unknown' if queue is None else queue}")
    return 0


async def _stuck(rag: AsyncClient, kb_ids: set[str]) -> list[dict[str, Any]] | None:
    try:
        items = await rag.stuck_documents()
    except ApiError as exc:
        if exc.status_code in (401, 403):
            return None
        raise
    return [i for i in items if str(i["knowledge_base_id"]) in kb_ids]


async def _queue_depth(rag: AsyncClient) -> int | None:
    """Jobs waiting for a worker, from ``/metrics`` (None when the metrics need their own token)."""
    try:
        text = await rag.metrics_text()
    except ApiError:
        return None
    for line in text.splitlines():
        if line.startswith("ultimate_rag_queue_depth "):
            return int(float(line.split()[1]))
    return None
