"""``ultimate-rag keys create|list|revoke``: API keys from the command line. A new key is printed
alone on the last line of the output; it is never stored, only its hash."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from uuid import UUID

from .settings import Settings

T = TypeVar("T")


def _with_keys(settings: Settings, action: Callable[[Any], Awaitable[T]]) -> T:
    from .adapters.postgres.api_keys import ApiKeyRepository
    from .adapters.postgres.database import Database
    from .bootstrap import database_url, run_migrations

    async def run() -> T:
        url = database_url(settings)
        run_migrations(settings, url)
        db = Database(url, max_size=2)
        await db.open()
        try:
            return await action(ApiKeyRepository(db))
        finally:
            await db.close()

    return asyncio.run(run())


def cmd_create(args: argparse.Namespace, settings: Settings) -> int:
    from .domain.auth import Role

    if args.admin == bool(args.kb):
        print("give either --admin or --kb KB --role reader|editor", file=sys.stderr)
        return 2
    try:
        scopes = {UUID(k): Role(args.role) for k in args.kb}
    except ValueError:
        print("--kb takes a knowledge base id (a UUID)", file=sys.stderr)
        return 2
    expires = datetime.now(UTC) + timedelta(days=args.expires_in_days) if args.expires_in_days else None
    key = _with_keys(settings, lambda repo: repo.create(is_admin=args.admin, scopes=scopes, name=args.name,
                                                         expires_at=expires))
    print("created API key (shown once; store it now):", file=sys.stderr)
    print(key)
    return 0


def cmd_list(args: argparse.Namespace, settings: Settings) -> int:
    rows = _with_keys(settings, lambda repo: repo.list())
    print(f"{'prefix':10} {'role':28} {'state':8} {'expires':20} name")
    for r in rows:
        role = "admin" if r["is_admin"] else ", ".join(f"{s['role']}:{s['knowledge_base_id'][:8]}" for s in r["scopes"])
        now = datetime.now(UTC)
        state = ("revoked" if r["revoked_at"] else
                 "expired" if r["expires_at"] and r["expires_at"] <= now else "active")
        expires = r["expires_at"].strftime("%Y-%m-%d %H:%M") if r["expires_at"] else "-"
        print(f"{r['prefix']:10} {role[:28]:28} {state:8} {expires:20} {r['name']}")
    return 0


def cmd_revoke(args: argparse.Namespace, settings: Settings) -> int:
    from .domain.errors import ResourceNotFoundError

    try:
        record = _with_keys(settings, lambda repo: repo.revoke(args.key))
    except ResourceNotFoundError:
        print(f"no API key with id or prefix {args.key}", file=sys.stderr)
        return 1
    print(f"revoked {record['prefix']}")
    return 0


def add_key_commands(sub: Any, settings_for: Callable[[argparse.Namespace], Settings]) -> None:
    keys = sub.add_parser("keys", help="manage API keys")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)

    def bind(command: Callable[[argparse.Namespace, Settings], int]) -> Callable[[argparse.Namespace], int]:
        return lambda args: command(args, settings_for(args))

    create = keys_sub.add_parser("create", help="create an API key; prints it alone on the last line")
    create.add_argument("--admin", action="store_true")
    create.add_argument("--kb", action="append", default=[], help="knowledge base id (repeatable)")
    create.add_argument("--role", choices=["reader", "editor"], default="reader")
    create.add_argument("--name", default="", help="a note to recognise the key by")
    create.add_argument("--expires-in-days", type=float, help="the key stops working after this many days")
    create.add_argument("--data-dir")
    create.set_defaults(func=bind(cmd_create))

    listing = keys_sub.add_parser("list", help="list API keys (prefixes, roles, state; never the keys)")
    listing.add_argument("--data-dir")
    listing.set_defaults(func=bind(cmd_list))

    revoke = keys_sub.add_parser("revoke", help="revoke a key by id or prefix; effective on its next request")
    revoke.add_argument("key")
    revoke.add_argument("--data-dir")
    revoke.set_defaults(func=bind(cmd_revoke))
