"""The commands that talk to a running server over HTTP, built on :mod:`ultimate_rag.client`:
``mcp``, ``ingest``, ``search``, ``ask`` and ``status`` (SPEC §11)."""

from __future__ import annotations

import argparse

from .common import add_connection_options, api_key, server_url
from .ingest import add_ingest_command
from .query import add_query_commands
from .status import add_status_command


def add_http_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mcp = sub.add_parser("mcp", help="MCP server over stdio for agents (talks to a running server over HTTP)")
    add_connection_options(mcp)
    mcp.set_defaults(func=_mcp)
    add_ingest_command(sub)
    add_query_commands(sub)
    add_status_command(sub)


def _mcp(args: argparse.Namespace) -> int:
    from .common import CliError

    try:
        key = api_key(args)
    except CliError as exc:
        import sys

        print(f"error: {exc}", file=sys.stderr)
        return exc.status
    from ..mcp_server.stdio import run_stdio

    run_stdio(server_url(args), key)  # stdout is the protocol channel: nothing else is printed there
    return 0
