"""``ultimate-rag search QUERY --kb KB`` and ``ultimate-rag ask QUESTION --kb KB``: cited results,
or ``--json`` for scripts."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.markup import escape

from ..client import ApiError
from ..client._core import not_found_route
from .common import CliError, add_connection_options, citation_line, connect, consoles, knowledge_base, run, snippet
from .fields import filter_condition, json_object, with_metadata_filter


def add_query_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    search = sub.add_parser("search", help="search a knowledge base (over HTTP)")
    search.add_argument("query")
    search.add_argument("--kb", required=True, help="knowledge base name or id")
    search.add_argument("--top-k", type=int, default=5)
    search.add_argument("--mode", choices=["hybrid", "dense", "sparse"])
    search.add_argument("--filters", type=json_object, help='JSON, e.g. \'{"filename": "*.pdf"}\'')
    search.add_argument("--filter", action="append", type=filter_condition, metavar="KEY=VALUE|JSON",
                        help="a metadata filter: key=value, or a JSON filter object (repeatable, all must hold)")
    search.add_argument("--json", action="store_true", help="print the results as JSON")
    add_connection_options(search)
    search.set_defaults(func=lambda args: run(lambda: _search(args)))

    ask = sub.add_parser("ask", help="a grounded answer with citations (over HTTP)")
    ask.add_argument("question")
    ask.add_argument("--kb", required=True, help="knowledge base name or id")
    ask.add_argument("--top-k", type=int)
    ask.add_argument("--filters", type=json_object, help="JSON search filters")
    ask.add_argument("--filter", action="append", type=filter_condition, metavar="KEY=VALUE|JSON",
                     help="a metadata filter: key=value, or a JSON filter object (repeatable, all must hold)")
    ask.add_argument("--json", action="store_true", help="print the answer as JSON")
    add_connection_options(ask)
    ask.set_defaults(func=lambda args: run(lambda: _ask(args)))


async def _search(args: argparse.Namespace) -> int:
    out, _ = consoles()
    async with connect(args) as rag:
        kb = await knowledge_base(rag, args.kb)
        hits = await rag.search(kb.id, args.query, top_k=args.top_k, mode=args.mode,
                                filters=with_metadata_filter(args.filters, args.filter))
    if args.json:
        results = [{**h.raw, "citation": citation_line(h.raw)} for h in hits]
        print(json.dumps({"knowledge_base": {"id": kb.id, "name": kb.name}, "query": args.query,
                          "results": results, "unmatched_identifiers": hits.unmatched_identifiers},
                         ensure_ascii=False, indent=2))
        return 0
    _say_unmatched(out, hits.unmatched_identifiers, kb.name)
    if not hits:
        out.print(f"no results in {escape(kb.name)}")
    for n, h in enumerate(hits, 1):
        out.print(f"[bold]{n}.[/bold] {escape(citation_line(h.raw))}  [dim](score {h.score:.3f})[/dim]")
        out.print(f"   {escape(snippet(h.content))}", highlight=False)
    return 0


def _say_unmatched(out: Any, identifiers: list[str], kb_name: str) -> None:
    """An identifier the query names that nothing holds: said before the (usual) results."""
    if identifiers:
        out.print(f"[yellow]not found anywhere in {escape(kb_name)}[/yellow]: "
                  + ", ".join(escape(i) for i in identifiers) + " [dim](results ranked as usual)[/dim]",
                  highlight=False)


async def _ask(args: argparse.Namespace) -> int:
    out, _ = consoles()
    async with connect(args) as rag:
        kb = await knowledge_base(rag, args.kb)
        try:
            answer = await rag.answer(kb.id, args.question, top_k=args.top_k,
                                      filters=with_metadata_filter(args.filters, args.filter))
        except ApiError as exc:
            if not_found_route(exc):
                raise CliError("this server has no answer endpoint (it is older than this command): "
                               "use `ultimate-rag search` instead") from None
            raise
    if args.json:
        print(json.dumps(answer.raw, ensure_ascii=False, indent=2))
        return 0
    _say_unmatched(out, answer.unmatched_identifiers, kb.name)
    if answer.answer is None:
        out.print(f"[yellow]no answer[/yellow]: {escape(answer.reason or 'no model configured')}")
        if answer.citations:
            out.print("relevant passages:")
    else:
        out.print(escape(answer.answer), highlight=False)
        if not answer.grounded and answer.citations:
            out.print("[yellow]not grounded[/yellow]: this answer cites none of the passages below; it does not "
                      "rest on the documents", highlight=False)
        out.print("\nsources:")
    for c in answer.citations:
        out.print(f"  [{c.n}] {escape(str(c.citation))}", highlight=False)
        if answer.answer is None:
            out.print(f"      {escape(snippet(c.content, 240))}", highlight=False)
    return 0
