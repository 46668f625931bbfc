"""Tests for ``storage_stub.durable`` and ``storage_stub.durable_metadata``: journaled stores."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.clock import FakeClock
from storage_stub.durable import DurableLedgerStore
from storage_stub.durable_metadata import DurableMetadataTree
from storage_stub.errors import PersistenceFailedError
from storage_stub.journal import FsyncPolicy, Journal, JournalCorruptedError
from storage_stub.ledger import (
    LedgerFencedError,
    LedgerState,
    NoSuchLedgerError,
    StorageError,
)
from storage_stub.metadata import NodeStat

Snapshot = tuple[int, tuple[tuple[int, LedgerState, tuple[bytes, ...]], ...]]


def snapshot(store: DurableLedgerStore) -> Snapshot:
    ledgers = []
    for lid in store.ledger_ids():
        info = store.info(lid)
        entries = (
            store.read(lid, 0, info.last_add_confirmed) if info.last_add_confirmed >= 0 else []
        )
        ledgers.append((lid, info.state, tuple(entries)))
    return store.next_ledger_id, tuple(ledgers)


def open_journal(path: Path) -> tuple[Journal, Any]:
    return Journal.open(path, clock=FakeClock(), policy=FsyncPolicy.NEVER)


def recover(path: Path) -> DurableLedgerStore:
    journal, scanned = open_journal(path)
    try:
        return DurableLedgerStore.recover(journal, scanned)
    finally:
        journal.close_now()


async def fresh(path: Path) -> DurableLedgerStore:
    journal, scanned = open_journal(path)
    return DurableLedgerStore.recover(journal, scanned)


async def close(store: DurableLedgerStore) -> None:
    assert store._journal is not None
    await store._journal.aclose()


# ---- ledgers --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_every_mutation_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "ledgers.journal"
    store = await fresh(path)
    a, b, c, d = (store.create_ledger() for _ in range(4))
    for i in range(3):
        store.add_entry(a, b"a%d" % i)
    store.add_entry(b, b"b0")
    store.close(a)
    store.fence(b)
    store.delete(c)
    await store.wait_durable(store.ticket)
    before = snapshot(store)
    await close(store)

    again = await fresh(path)
    assert snapshot(again) == before
    assert again.ledger_ids() == [a, b, d]
    with pytest.raises(LedgerFencedError):
        again.add_entry(b, b"late write from the old owner")
    assert again.create_ledger() == d + 1  # c's id is not reused
    await close(again)


@pytest.mark.anyio
async def test_rejected_mutation_journals_nothing(tmp_path: Path) -> None:
    store = await fresh(tmp_path / "j")
    lid = store.create_ledger()
    store.fence(lid)
    ticket = store.ticket
    with pytest.raises(LedgerFencedError):
        store.add_entry(lid, b"x")
    with pytest.raises(NoSuchLedgerError):
        store.delete(99)
    store.fence(lid)  # idempotent: nothing new to journal
    assert store.ticket == ticket
    await close(store)


@pytest.mark.anyio
async def test_in_memory_mode_has_no_tickets() -> None:
    store = DurableLedgerStore()
    lid = store.create_ledger()
    assert store.add_entry(lid, b"x") == 0
    assert store.ticket == 0
    await store.wait_durable(store.ticket)  # free
    assert not store.should_compact()


@pytest.mark.anyio
async def test_compaction_drops_deleted_ledgers_and_never_reuses_their_ids(tmp_path: Path) -> None:
    path = tmp_path / "j"
    journal, scanned = open_journal(path)
    store = DurableLedgerStore.recover(journal, scanned, compact_min_dead_bytes=1000)
    keep = store.create_ledger()
    store.add_entry(keep, b"k" * 100)
    store.close(keep)
    doomed = [store.create_ledger() for _ in range(3)]
    for lid in doomed:
        store.add_entry(lid, b"d" * 500)
    assert not store.should_compact()
    for lid in doomed:
        store.delete(lid)
    assert store.should_compact()
    before = snapshot(store)
    size_before = journal.size
    await store.compact()
    assert journal.size < size_before / 5
    assert store.dead_bytes == 0
    assert not store.should_compact()
    store.add_entry(store.create_ledger(), b"after compaction")
    after = snapshot(store)
    await journal.aclose()

    again = recover(path)
    assert snapshot(again) == after
    assert after[1][0] == before[1][0]
    assert again.ledger_ids() == [keep, doomed[-1] + 1]
    assert again.next_ledger_id == doomed[-1] + 2


@pytest.mark.anyio
async def test_compaction_keeps_ids_of_deleted_newest_ledgers_burnt(tmp_path: Path) -> None:
    store = await fresh(tmp_path / "j")
    for _ in range(3):
        store.create_ledger()
    store.delete(3)
    store.delete(2)
    await store.compact()
    await close(store)
    assert recover(tmp_path / "j").next_ledger_id == 4


def test_record_that_does_not_apply_is_reported_with_its_offset(tmp_path: Path) -> None:
    path = tmp_path / "j"
    journal, _ = open_journal(path)
    # A well-formed record for a ledger that was never created.
    journal.append(msgspec.msgpack.encode([2, 7, 0, b"orphan"]))
    journal._write_and_sync(journal._fd, journal._pending)
    journal.close_now()
    with pytest.raises(JournalCorruptedError, match="offset 8: ledger record does not apply"):
        recover(path)


@pytest.mark.anyio
async def test_failed_journal_refuses_mutations_before_applying_them(tmp_path: Path) -> None:
    journal, scanned = open_journal(tmp_path / "j")
    store = DurableLedgerStore.recover(journal, scanned)
    lid = store.create_ledger()
    journal._failed = OSError("disk gone")
    with pytest.raises(PersistenceFailedError, match="not writable"):
        store.add_entry(lid, b"x")
    assert store.last_add_confirmed(lid) == -1
    with pytest.raises(PersistenceFailedError):
        await store.wait_durable(store.ticket + 1)
    journal.close_now()


# ---- recovery returns exactly the synced prefix (hypothesis) --------------------------------

ledger_ops = st.lists(
    st.one_of(
        st.tuples(st.just("create")),
        st.tuples(st.just("add"), st.integers(0, 5), st.binary(max_size=12)),
        st.tuples(st.sampled_from(["close", "fence", "delete"]), st.integers(0, 5)),
        st.tuples(st.just("sync")),
    ),
    max_size=40,
)


def _apply(store: DurableLedgerStore, op: tuple[Any, ...], created: list[int]) -> None:
    name = op[0]
    if name == "create":
        created.append(store.create_ledger())
        return
    if not created:
        return
    lid = created[op[1] % len(created)]
    try:
        if name == "add":
            store.add_entry(lid, op[2])
        elif name == "close":
            store.close(lid)
        elif name == "fence":
            store.fence(lid)
        else:
            store.delete(lid)
    except StorageError:
        pass  # rejected operations journal nothing; the model says why


@settings(max_examples=60)
@given(ops=ledger_ops, data=st.data())
def test_recovery_returns_exactly_the_synced_prefix(
    ops: list[tuple[Any, ...]], data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "j"

        async def scenario() -> tuple[list[tuple[int, Snapshot]], int]:
            store = await fresh(path)
            journal = store._journal
            assert journal is not None
            history = [(journal.size, snapshot(store))]
            synced = 0
            created: list[int] = []
            for op in ops:
                if op[0] == "sync":
                    await store.wait_durable(store.ticket)
                    synced = len(history) - 1
                else:
                    _apply(store, op, created)
                    history.append((journal.size, snapshot(store)))
            # Everything reaches the file, as if the OS had written some unsynced pages too;
            # the crash below then cuts the file anywhere after the synced prefix.
            await journal.aclose()
            return history, synced

        history, synced = anyio.run(scenario)
        full = path.read_bytes()
        synced_end = history[synced][0]
        for cut in (synced_end, data.draw(st.integers(synced_end, len(full)), label="cut")):
            path.write_bytes(full[:cut])
            recovered = snapshot(recover(path))
            # The state after the last operation whose records fit entirely before the cut.
            index = max(i for i, (end, _) in enumerate(history) if end <= cut)
            assert index >= synced
            assert recovered == history[index][1]
        path.write_bytes(full[:synced_end])
        assert snapshot(recover(path)) == history[synced][1]


@settings(max_examples=40)
@given(ops=ledger_ops, every=st.integers(1, 12))
def test_recovery_after_compactions_returns_the_final_state(
    ops: list[tuple[Any, ...]], every: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "j"

        async def scenario() -> Snapshot:
            store = await fresh(path)
            created: list[int] = []
            for index, op in enumerate(ops):
                if index % every == 0:
                    await store.compact()
                if op[0] != "sync":
                    _apply(store, op, created)
            await store.compact()
            final = snapshot(store)
            await close(store)
            return final

        final = anyio.run(scenario)
        assert snapshot(recover(path)) == final


# ---- metadata -------------------------------------------------------------------------------


def recover_tree(path: Path) -> DurableMetadataTree:
    journal, scanned = open_journal(path)
    try:
        return DurableMetadataTree.recover(journal, scanned)
    finally:
        journal.close_now()


@pytest.mark.anyio
async def test_metadata_survives_a_restart_but_sessions_do_not(tmp_path: Path) -> None:
    path = tmp_path / "metadata.journal"
    journal, scanned = open_journal(path)
    meta = DurableMetadataTree.recover(journal, scanned)
    session = meta.create_session(0.0, 30.0)
    meta.put(0, "/admin/policies/public/default", b"{}")
    meta.put(0, "/admin/policies/public/default", b'{"v":2}', 0)
    meta.put(session, "/lock", b"me", ephemeral=True)
    seq_path, _ = meta.put(0, "/q/n-", b"", sequential=True)
    meta.put(0, "/gone", b"")
    meta.delete("/gone")
    await meta.wait_durable(meta.ticket)
    await journal.aclose()

    again = recover_tree(path)
    tree = again.tree
    assert tree.get("/admin/policies/public/default") == NodeStat(b'{"v":2}', 1, False, False)
    assert tree.get("/lock") is None  # its session ended with the restart
    assert tree.session_ids() == []
    assert tree.exists(seq_path)
    assert not tree.exists("/gone")
    # Counters continue: no reused session id, no reused sequential name.
    assert tree.create_session(0.0, 1.0) == session + 1
    assert tree.put(0, "/q/n-", b"", sequential=True)[0] > seq_path


@pytest.mark.anyio
async def test_ended_sessions_are_journaled_so_replay_stays_consistent(tmp_path: Path) -> None:
    path = tmp_path / "metadata.journal"
    journal, scanned = open_journal(path)
    meta = DurableMetadataTree.recover(journal, scanned)
    session = meta.create_session(0.0, 30.0)
    meta.put(session, "/e", b"old", ephemeral=True)
    await journal.aclose()

    # Restart 1 ends the session; a new writer then creates /e from scratch.
    journal, scanned = open_journal(path)
    meta = DurableMetadataTree.recover(journal, scanned)
    assert meta.put(0, "/e", b"new") == ("/e", 0)
    await journal.aclose()

    # Restart 2 must replay the end of the old session before that put (else /e would be at
    # version 1 and still ephemeral).
    tree = recover_tree(path).tree
    assert tree.get("/e") == NodeStat(b"new", 0, False, False)


@pytest.mark.anyio
async def test_metadata_compaction_keeps_the_tree(tmp_path: Path) -> None:
    path = tmp_path / "metadata.journal"
    journal, scanned = open_journal(path)
    meta = DurableMetadataTree.recover(journal, scanned, compact_min_records=50)
    session = meta.create_session(0.0, 30.0)
    for i in range(60):
        meta.put(0, "/load/broker-1", b"report %d" % i)
    meta.put(session, "/owner", b"b1", ephemeral=True)
    meta.put(0, "/q/n-", b"", sequential=True)
    assert meta.should_compact()
    await meta.compact()
    assert not meta.should_compact()
    meta.put(0, "/after", b"x")
    await journal.aclose()

    tree = recover_tree(path).tree
    assert tree.get("/load/broker-1") == NodeStat(b"report 59", 59, False, False)
    assert tree.exists("/after")
    assert tree.get("/owner") is None
    assert tree.put(0, "/q/n-", b"", sequential=True)[0] == "/q/n-0000000001"
