"""The managed ledger and cursor persistence over the stub (bookie mode), on a FakeClock."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

from emubroker.metadata import MemoryMetadataStore
from emubroker.metadata.paths import managed_ledger_path
from emubroker.naming import TopicName
from emubroker.storage import BookieBackend
from emubroker.topics.compacted import Compactor
from emubroker.topics.cursor import Cursor
from emubroker.topics.cursor_flush import CursorFlusher
from emubroker.topics.managed_ledger import (
    CacheBudget,
    CacheMiss,
    LedgerPolicy,
    ManagedLedger,
    ManagedLedgerFencedError,
)
from emubroker.topics.ml_meta import decode_cursor_info, decode_ledger_info
from emubroker.topics.topic_state import TopicState
from protocol.clock import FakeClock
from storage_stub.client import StubClient
from storage_stub.ledger import LedgerFencedError
from storage_stub.server import open_stub_server
from tests.emubroker.topics.helpers import make_entry

pytestmark = pytest.mark.anyio

TOPIC = TopicName.parse("persistent://public/default/ml")
PATH = managed_ledger_path(TOPIC)


@asynccontextmanager
async def _stub(clock: FakeClock) -> AsyncIterator[StubClient]:
    async with open_stub_server(clock=clock) as server, server.open_local_client() as client:
        yield client


async def _open(
    bookie: StubClient,
    metadata: MemoryMetadataStore,
    clock: FakeClock,
    *,
    policy: LedgerPolicy | None = None,
    budget: CacheBudget | None = None,
) -> ManagedLedger:
    ml = await ManagedLedger.open(
        BookieBackend(bookie),
        policy=policy or LedgerPolicy(max_entries=3),
        clock=clock,
        metadata=metadata,
        path=PATH,
        budget=budget,
    )
    assert ml is not None
    return ml


async def _append(ml: ManagedLedger, start: int, n: int) -> list[tuple[int, int]]:
    made = [make_entry(b"%d" % i) for i in range(start, start + n)]
    return await ml.append_many([e for e, _, _ in made], [i for _, _, i in made])


async def test_rollover_by_entries_persists_the_ledger_list(fake_clock: FakeClock) -> None:
    async with _stub(fake_clock) as bookie, MemoryMetadataStore() as metadata:
        ml = await _open(bookie, metadata, fake_clock)
        positions = await _append(ml, 0, 7)
        assert len(ml.ledger_ids) == 3
        assert positions == sorted(positions)
        assert [p[1] for p in positions] == [0, 1, 2, 0, 1, 2, 0]
        stored = await metadata.get(PATH)
        assert stored is not None
        info = decode_ledger_info(stored.value)
        assert [r.ledger_id for r in info.ledgers] == list(ml.ledger_ids)
        assert [r.entries for r in info.ledgers] == [3, 3, -1]  # the open one: recovered later


async def test_rollover_waits_for_the_minimum_age_and_happens_at_the_maximum(
    fake_clock: FakeClock,
) -> None:
    policy = LedgerPolicy(max_entries=2, min_rollover=600.0, max_rollover=3600.0)
    async with _stub(fake_clock) as bookie, MemoryMetadataStore() as metadata:
        ml = await _open(bookie, metadata, fake_clock, policy=policy)
        await _append(ml, 0, 5)
        assert len(ml.ledger_ids) == 1  # full, but younger than the minimum
        await fake_clock.advance(601.0)
        await _append(ml, 5, 1)
        assert len(ml.ledger_ids) == 2
        await fake_clock.advance(3601.0)
        await _append(ml, 6, 1)  # only one entry in it, but old enough
        await fake_clock.advance(3601.0)
        await _append(ml, 7, 1)
        assert len(ml.ledger_ids) == 4


async def test_reopen_fences_the_old_writer_and_recovers_every_entry(
    fake_clock: FakeClock,
) -> None:
    async with _stub(fake_clock) as bookie, MemoryMetadataStore() as metadata:
        old = await _open(bookie, metadata, fake_clock)
        written = await _append(old, 0, 5)
        new = await _open(bookie, metadata, fake_clock)
        assert new.count == 5
        assert [new.position(i) for i in range(5)] == written
        assert [info.sequence_id for info in new.infos] == [i.sequence_id for i in old.infos]
        with pytest.raises(LedgerFencedError):
            await _append(old, 5, 1)  # the previous owner can add nothing more
        assert (await _append(new, 5, 1))[0][0] not in old.ledger_ids
        _, _, sections = await new.read_entries(0, 2)
        assert len(sections) == 3


async def test_taking_over_a_fenced_ledger_logs_info_not_a_warning(
    fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="emubroker.topics.managed_ledger")
    async with _stub(fake_clock) as bookie, MemoryMetadataStore() as metadata:
        old = await _open(bookie, metadata, fake_clock)
        await _append(old, 0, 2)
        caplog.clear()
        await _open(bookie, metadata, fake_clock)  # fences the open ledger, then rolls over
    records = [r for r in caplog.records if r.name == "emubroker.topics.managed_ledger"]
    assert not [r.getMessage() for r in records if r.levelno >= logging.WARNING]
    assert any(
        r.levelno == logging.INFO and f"ledger {old.ledger_ids[-1]} of" in r.getMessage()
        for r in records
    ), [r.getMessage() for r in records]


async def test_a_real_close_failure_on_rollover_is_still_a_warning(
    fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="emubroker.topics.managed_ledger")
    async with _stub(fake_clock) as bookie, MemoryMetadataStore() as metadata:
        ml = await _open(bookie, metadata, fake_clock, policy=LedgerPolicy(max_entries=2))
        await _append(ml, 0, 2)
        first = ml.ledger_ids[0]
        await bookie.delete_ledger(first)  # gone from the bookie: its close cannot succeed
        await _append(ml, 2, 1)  # rolls over
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"could not close ledger {first} of {PATH}" in warnings


async def test_cache_evicts_oldest_and_reads_misses_back_from_the_stub(
    fake_clock: FakeClock,
) -> None:
    budget = CacheBudget(limit=300)
    async with _stub(fake_clock) as bookie, MemoryMetadataStore() as metadata:
        ml = await _open(bookie, metadata, fake_clock, policy=LedgerPolicy(), budget=budget)
        made = [make_entry(b"x" * 40 + b"%d" % i) for i in range(10)]
        await ml.append_many([e for e, _, _ in made], [i for _, _, i in made])
        assert budget.used <= budget.limit
        assert 0 < ml.cached_bytes <= 300
        with pytest.raises(CacheMiss) as miss:
            ml.read(0, 3)
        await ml.load(miss.value.first, miss.value.last)
        _, first_entry, sections = ml.read(0, 3)
        assert first_entry == 0
        assert sections[0] == made[0][0]
        _, _, tail = ml.read(9, 9)  # the newest entry is still cached
        assert tail == [made[9][0]]


async def test_trim_deletes_ledgers_every_cursor_passed(fake_clock: FakeClock) -> None:
    async with _stub(fake_clock) as bookie, MemoryMetadataStore() as metadata:
        ml = await _open(bookie, metadata, fake_clock)
        await _append(ml, 0, 8)
        first, second = ml.ledger_ids[:2]
        assert await ml.trim(4) == 1  # ledger 1 (indexes 0..2) passed; ledger 2 not yet
        assert ml.ledger_ids[0] == second
        assert ml.first_index == 3
        assert first not in await bookie.ledger_ids()
        reopened = await _open(bookie, metadata, fake_clock)
        assert reopened.first_index == 3
        assert reopened.count == 8


async def test_a_trim_drops_the_trimmed_entries_infos_and_cache(fake_clock: FakeClock) -> None:
    budget = CacheBudget(limit=1 << 20)
    async with _stub(fake_clock) as bookie, MemoryMetadataStore() as metadata:
        ml = await _open(
            bookie, metadata, fake_clock, policy=LedgerPolicy(max_entries=10), budget=budget
        )
        for round_ in range(50):  # 500 entries, each ledger consumed once it closed
            await _append(ml, round_ * 10, 10)
            await ml.trim(ml.count - 1)
        assert ml.count == 500
        # What stays in memory is the live ledgers' (two at most: the last closed one is
        # trimmed at the next round), not one info and one cache slot per entry written.
        assert len(ml.infos) <= 20
        assert ml.base == ml.first_index
        assert budget.used == ml.cached_bytes
        assert ml.cached_bytes <= 20 * max(len(make_entry(b"%d" % 499)[0]), 1)
        assert len(await bookie.ledger_ids()) <= 2
        _, _, sections = ml.read(ml.count - 1, ml.count - 1)
        assert sections == [make_entry(b"499")[0]]


async def test_the_flush_evicts_from_the_cache_what_every_cursor_passed(
    fake_clock: FakeClock,
) -> None:
    budget = CacheBudget(limit=1 << 20)
    async with _stub(fake_clock) as bookie, MemoryMetadataStore() as metadata:
        # One ledger that does not roll over (Pulsar's default keeps a ledger 10 minutes), so
        # no trim can free anything: only the eviction of what was consumed does.
        ml = await _open(bookie, metadata, fake_clock, policy=LedgerPolicy(), budget=budget)
        made = [make_entry(b"%d" % i) for i in range(100)]
        await ml.append_many([e for e, _, _ in made], [i for _, _, i in made])
        state = TopicState(ml)
        state.cursors["fast"] = Cursor(89)
        state.cursors["slow"] = Cursor(59)
        held = ml.cached_bytes
        flusher = CursorFlusher(metadata, clock=fake_clock, retains=lambda topic: True)
        await flusher.flush(TOPIC, state)  # retention keeps the ledger, not the cache
        assert ml.cached_bytes == sum(len(e) for e, _, _ in made[60:]) < held
        assert budget.used == ml.cached_bytes
        _, _, tail = ml.read(60, 99)  # what the slow cursor has still to read stays cached
        assert tail == [e for e, _, _ in made[60:]]
        _, _, back = await ml.read_entries(10, 12)  # what it passed reads back from the stub
        assert back == [e for e, _, _ in made[10:13]]
        state.cursors["slow"].mark_delete = state.cursors["fast"].mark_delete = 99
        await flusher.flush(TOPIC, state)
        assert budget.used == ml.cached_bytes == 0  # the read-back entries went too


@pytest.mark.parametrize("keeper", ["retention", "compaction"])
async def test_the_flush_keeps_consumed_ledgers_under_retention_or_compaction(
    fake_clock: FakeClock, keeper: str
) -> None:
    async with _stub(fake_clock) as bookie, MemoryMetadataStore() as metadata:
        ml = await _open(bookie, metadata, fake_clock)
        await _append(ml, 0, 8)
        state = TopicState(ml)
        state.cursors["sub"] = Cursor(6)  # past the first two ledgers
        if keeper == "compaction":
            state.compacted = Compactor(retain_null_key=False).result(ml.count)
        flusher = CursorFlusher(
            metadata, clock=fake_clock, retains=lambda topic: keeper == "retention"
        )
        await flusher.flush(TOPIC, state)
        assert ml.first_index == 0
        state.compacted = None
        await CursorFlusher(metadata, clock=fake_clock).flush(TOPIC, state)
        assert ml.first_index == 6  # without either, both consumed ledgers go


async def test_cursors_persist_coalesced_and_resume_after_reopen(fake_clock: FakeClock) -> None:
    async with _stub(fake_clock) as bookie, MemoryMetadataStore() as metadata:
        ml = await _open(bookie, metadata, fake_clock)
        await _append(ml, 0, 10)
        state = TopicState(ml)
        cursor = state.cursors["sub"] = Cursor(-1)
        cursor.ack_many([0, 1, 2, 5, 6])
        cursor.ack_batch(8, 0b101, 3)
        flusher = CursorFlusher(metadata, clock=fake_clock, interval=1.0)
        await flusher.flush(TOPIC, state)
        node = await metadata.get(f"{PATH}/sub")
        assert node is not None
        assert decode_cursor_info(node.value).mark_delete == 2  # written as it is now
        version = node.version
        await flusher.flush(TOPIC, state)  # nothing changed: nothing written
        assert (await metadata.get(f"{PATH}/sub")).version == version  # type: ignore[union-attr]
        loaded = await CursorFlusher(metadata, clock=fake_clock).load(TOPIC, PATH)
        restored = loaded["sub"]
        assert restored.mark_delete == 2
        assert restored.ranges() == [(5, 6)]
        assert restored.partial_acks() == [(8, 0b101)]
        assert not restored.is_acked(3)
        # The first ledger (0..2) is fully consumed by every cursor: trimmed by the flush.
        assert ml.first_index == 3


async def test_a_cursor_created_again_under_its_name_is_written(fake_clock: FakeClock) -> None:
    # A subscription deleted and created again before the next flush is another cursor: its
    # node must be rewritten even though the new cursor has not changed since it was created.
    async with _stub(fake_clock) as bookie, MemoryMetadataStore() as metadata:
        state = TopicState(await _open(bookie, metadata, fake_clock))
        await _append(state.ledger, 0, 4)
        flusher = CursorFlusher(metadata, clock=fake_clock)
        for acked, expected in (([0, 1, 2], 2), ([], -1)):
            state.cursors["sub"] = Cursor(-1)  # the second time: the subscription created again
            state.cursors["sub"].ack_many(acked)
            await flusher.flush(TOPIC, state)
            loaded = await CursorFlusher(metadata, clock=fake_clock).load(TOPIC, PATH)
            assert loaded["sub"].mark_delete == expected


async def test_a_previous_owner_can_no_longer_write_once_another_opened_it(
    fake_clock: FakeClock,
) -> None:
    async with _stub(fake_clock) as bookie, MemoryMetadataStore() as metadata:
        zombie = await _open(bookie, metadata, fake_clock, policy=LedgerPolicy(max_entries=100))
        await _append(zombie, 0, 2)
        heir = await _open(bookie, metadata, fake_clock, policy=LedgerPolicy(max_entries=100))
        assert heir.count == 2
        stored = await metadata.get(PATH)
        assert stored is not None
        # Its ledger is fenced in the bookie: the add fails, nothing is acknowledged.
        with pytest.raises(LedgerFencedError):
            await _append(zombie, 2, 1)
        # Rolling over to a ledger of its own fails on the ledger list's version, for good.
        with pytest.raises(ManagedLedgerFencedError):
            await _append(zombie, 2, 1)
        with pytest.raises(ManagedLedgerFencedError):
            await _append(zombie, 2, 1)
        after = await metadata.get(PATH)
        assert after == stored  # the heir's ledger list stands
        await _append(heir, 2, 1)
        assert heir.count == 3


async def test_an_append_to_an_in_process_stub_gives_no_other_task_a_turn(
    fake_clock: FakeClock,
) -> None:
    # The ledger's lock, free, is taken without a scheduling point: in a simulation each write
    # of a publish loop cost one more round of the event loop for it alone.
    async with _stub(fake_clock) as bookie, MemoryMetadataStore() as metadata:
        ml = await _open(bookie, metadata, fake_clock, policy=LedgerPolicy(max_entries=100))
        await _append(ml, 0, 1)  # creates the first ledger (its metadata writes do give way)
        turns = 0

        async def other() -> None:
            nonlocal turns
            turns += 1

        async with anyio.create_task_group() as tg:
            tg.start_soon(other)
            assert await _append(ml, 1, 1) == [(ml.ledger_ids[-1], 1)]
            assert turns == 0
        assert turns == 1
