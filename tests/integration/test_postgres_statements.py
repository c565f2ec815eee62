"""Statements whose optional parts are parameters rather than SQL built at run time: each optional
part, given or not, against the real database."""

from __future__ import annotations

from ultimate_rag.adapters.postgres.audit import AuditLog
from ultimate_rag.adapters.postgres.connectors import ConnectorRepository

from .helpers import new_kb


async def test_the_audit_list_filters_by_page_and_knowledge_base(container) -> None:
    audit = AuditLog(container.infra.db)
    kb, other = await new_kb(container), await new_kb(container)
    prefix = f"p{kb.hex[:6]}"
    for n, where in enumerate((kb, other, kb, None)):
        await audit.record(key_prefix=prefix, action=f"act{n}", knowledge_base_id=where, detail={"n": n})
    mine = [e for e in await audit.list(limit=1000) if e["key_prefix"] == prefix]
    assert [e["action"] for e in mine] == ["act3", "act2", "act1", "act0"]  # newest first
    newest = mine[0]["id"]
    assert [e["action"] for e in await audit.list(limit=2, before_id=newest)] == ["act2", "act1"]
    assert [e["action"] for e in await audit.list(limit=10, knowledge_base_id=kb)] == ["act2", "act0"]
    assert [e["action"] for e in await audit.list(limit=10, knowledge_base_id=kb,
                                                  before_id=mine[1]["id"])] == ["act0"]


async def test_a_connector_update_changes_only_what_it_is_given(container) -> None:
    repo = ConnectorRepository(container.infra.db, sync_max_attempts=3)
    kb = await new_kb(container)
    made = await repo.create(kb, kind="urls", name="pages", config={"urls": ["http://a"]}, schedule_seconds=60)
    assert made.next_sync_at is not None
    renamed = await repo.update(kb, made.id, name="renamed")
    assert (renamed.name, renamed.config, renamed.schedule_seconds, renamed.next_sync_at) == \
        ("renamed", made.config, 60, made.next_sync_at)
    moved = await repo.update(kb, made.id, config={"urls": ["http://b"]}, schedule_seconds=3600, schedule_given=True)
    assert (moved.name, moved.config, moved.schedule_seconds) == ("renamed", {"urls": ["http://b"]}, 3600)
    assert moved.next_sync_at is not None and moved.next_sync_at > made.next_sync_at
    cleared = await repo.update(kb, made.id, schedule_seconds=None, schedule_given=True)
    assert (cleared.config, cleared.schedule_seconds, cleared.next_sync_at) == ({"urls": ["http://b"]}, None, None)


async def test_json_parameters_round_trip_exactly(container) -> None:
    """JSON parameters are encoded by orjson, with the standard library's encoder for what orjson
    refuses: integer keys become strings, an integer beyond 64 bits keeps every digit, text keeps
    every character."""
    from psycopg.types.json import Jsonb

    value = {1: "one", "big": 2**70 + 1, "text": "naïve 中文 한국어 \u2028", "nested": [1.5, None, True]}
    row = await container.infra.db.fetchone("SELECT %(v)s::jsonb AS v", {"v": Jsonb(value)})
    assert row == {"v": {"1": "one", "big": 2**70 + 1, "text": "naïve 中文 한국어 \u2028", "nested": [1.5, None, True]}}
