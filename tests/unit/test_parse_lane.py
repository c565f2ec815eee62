"""A long parse (a scanned book) moves into its own lane and stops holding a worker slot: small
documents behind it are processed meanwhile (services/parse_lane.py). The worker and the pipeline run
on the in-memory fakes of test_processing_fakes; the slow parse is a parse that waits to be let go."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ultimate_rag.domain.models import DocumentSource, ParsedDocument
from ultimate_rag.domain.ports import Parser
from ultimate_rag.domain.status import DocumentStatus as D
from ultimate_rag.services.job_loop import IngestionWorker, WorkerConfig
from ultimate_rag.services.parse_lane import LongParseLane
from ultimate_rag.testing.eventually import eventually

from .test_processing_fakes import TEXT, pipeline


class HeldParses:
    """The real parse, except that a source starting with ``SCAN`` waits until ``release`` (a book
    that OCR reads page by page, for as long as the test needs)."""

    def __init__(self, runner: object) -> None:
        self._runner = runner
        self.release = asyncio.Event()
        self.holding = 0

    async def parse(self, parser: Parser, source: DocumentSource, on_progress: object = None) -> ParsedDocument:
        if source.content.startswith(b"SCAN"):
            self.holding += 1
            await self.release.wait()
        return await self._runner.parse(parser, source, on_progress)  # type: ignore[attr-defined]  # the wrapped runner is typed as object here


async def test_a_parse_moves_into_the_lane_after_its_time_while_there_is_room() -> None:
    lane = LongParseLane(after_seconds=0.01, slots=1)
    entered: list[int] = []
    lane.on_enter(lambda: entered.append(lane.size))
    first_in = asyncio.Event()

    async def long_parse(release: asyncio.Event) -> None:
        async with lane.parsing():
            await eventually(lambda: asyncio.sleep(0, result=lane.size == 1))
            first_in.set()
            await release.wait()

    done = asyncio.Event()
    first = asyncio.create_task(long_parse(done))
    await first_in.wait()
    async with lane.parsing():  # the lane is full: this one keeps its ordinary slot
        await asyncio.sleep(0.05)  # scenario: longer than after_seconds
        assert lane.size == 1
    done.set()
    await first
    assert lane.size == 0 and entered == [1]
    quick = LongParseLane(after_seconds=5.0, slots=1)
    async with quick.parsing():
        pass
    assert quick.size == 0  # a short parse never enters


async def test_small_documents_are_processed_while_a_scan_parses_in_the_lane(tmp_path: Path) -> None:
    p = pipeline(tmp_path)
    held = HeldParses(p.processor._parse_runner)
    p.processor._parse_runner = held
    p.processor.lane = LongParseLane(after_seconds=0.05, slots=1)
    scan = await p.add("SCAN " + TEXT)
    small = [await p.add(f"Note {i}. " + TEXT) for i in range(3)]
    worker = IngestionWorker(p.leases, p.processor, WorkerConfig(concurrency=1, poll_interval_seconds=0.05,
                                                                 heartbeat_seconds=30))
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    try:
        # one slot, taken by the scan: the small ones are processed anyway, the scan still parsing
        await eventually(lambda: asyncio.sleep(0, result=all(r.status == D.READY for r in small)))
        assert (scan.status, held.holding) == (D.PARSING, 1)
        held.release.set()
        await eventually(lambda: asyncio.sleep(0, result=scan.status == D.READY))
    finally:
        held.release.set()
        stop.set()
        await running


async def test_without_a_lane_the_scan_holds_the_only_slot(tmp_path: Path) -> None:
    p = pipeline(tmp_path)
    held = HeldParses(p.processor._parse_runner)
    p.processor._parse_runner = held
    scan = await p.add("SCAN " + TEXT)
    small = await p.add("A small note. " + TEXT)
    worker = IngestionWorker(p.leases, p.processor, WorkerConfig(concurrency=1, poll_interval_seconds=0.05,
                                                                 heartbeat_seconds=30))
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    try:
        await eventually(lambda: asyncio.sleep(0, result=held.holding == 1))
        await asyncio.sleep(0.3)  # scenario: several polls with the slot held
        assert small.status == D.PENDING and scan.status == D.PARSING
    finally:
        held.release.set()
        stop.set()
        await running
