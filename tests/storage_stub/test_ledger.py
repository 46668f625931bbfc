"""Tests for ``storage_stub.ledger``: unit tests plus a hypothesis model of the whole store."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from storage_stub.ledger import (
    EntryOutOfRangeError,
    LedgerClosedError,
    LedgerFencedError,
    LedgerInfo,
    LedgerState,
    LedgerStore,
    LedgerStoreStatistics,
    NoSuchLedgerError,
    StorageError,
    error_for_code,
)

if TYPE_CHECKING:
    from collections.abc import Callable


@pytest.fixture
def store() -> LedgerStore:
    return LedgerStore()


def test_ledger_ids_start_at_one_and_increase(store: LedgerStore) -> None:
    assert [store.create_ledger() for _ in range(3)] == [1, 2, 3]


def test_deleted_ledger_ids_are_never_reused(store: LedgerStore) -> None:
    first = store.create_ledger()
    store.delete(first)
    assert store.create_ledger() == first + 1
    assert store.ledger_ids() == [first + 1]


def test_entries_get_consecutive_ids_and_read_back_in_order(store: LedgerStore) -> None:
    lid = store.create_ledger()
    assert store.last_add_confirmed(lid) == -1
    assert [store.add_entry(lid, bytes([i])) for i in range(5)] == [0, 1, 2, 3, 4]
    assert store.last_add_confirmed(lid) == 4
    assert store.read(lid, 0, 4) == [b"\x00", b"\x01", b"\x02", b"\x03", b"\x04"]
    assert store.read(lid, 2, 2) == [b"\x02"]


def test_add_entries_is_add_entry_for_each_in_order(store: LedgerStore) -> None:
    bulk = store.create_ledger()
    one_by_one = store.create_ledger()
    data = [b"a", bytearray(b"bc"), b"", b"def"]
    assert store.add_entries(bulk, data) == 0  # type: ignore[arg-type]  # a mutable one too
    assert store.add_entries(bulk, [b"g"]) == 4
    for item in [*data, b"g"]:
        store.add_entry(one_by_one, bytes(item))
    assert store.read(bulk, 0, 4) == store.read(one_by_one, 0, 4)
    assert all(type(entry) is bytes for entry in store.read(bulk, 0, 4))
    assert store.info(bulk).size_bytes == store.info(one_by_one).size_bytes == 7
    assert store.statistics().entries == 10
    assert store.add_entries(bulk, []) == 5  # nothing added: the next id, LAC unchanged
    assert store.last_add_confirmed(bulk) == 4


def test_add_entries_to_a_refused_ledger_stores_none_of_them(store: LedgerStore) -> None:
    lid = store.create_ledger()
    store.add_entry(lid, b"a")
    store.fence(lid)
    with pytest.raises(LedgerFencedError):
        store.add_entries(lid, [b"b", b"c"])
    assert store.last_add_confirmed(lid) == 0
    assert store.statistics().entries == 1
    with pytest.raises(NoSuchLedgerError):
        store.add_entries(999, [b"x"])


def test_entries_are_stored_as_immutable_copies(store: LedgerStore) -> None:
    lid = store.create_ledger()
    buf = bytearray(b"abc")
    store.add_entry(lid, buf)  # type: ignore[arg-type]  # a mutable buffer on purpose
    buf[0] = ord("X")
    assert store.read(lid, 0, 0) == [b"abc"]
    assert type(store.read(lid, 0, 0)[0]) is bytes


def test_read_result_is_not_a_view_of_the_ledger(store: LedgerStore) -> None:
    lid = store.create_ledger()
    store.add_entry(lid, b"a")
    got = store.read(lid, 0, 0)
    got.append(b"z")
    assert store.read(lid, 0, 0) == [b"a"]


@pytest.mark.parametrize(
    ("first", "last"),
    [(0, 3), (-1, 0), (2, 1), (3, 3)],
    ids=["past-lac", "negative", "reversed", "after-lac"],
)
def test_read_outside_confirmed_range_raises(store: LedgerStore, first: int, last: int) -> None:
    lid = store.create_ledger()
    for data in (b"a", b"b", b"c"):
        store.add_entry(lid, data)
    with pytest.raises(EntryOutOfRangeError, match="last add confirmed is 2") as info:
        store.read(lid, first, last)
    assert info.value.ledger_id == lid


def test_read_of_empty_ledger_raises(store: LedgerStore) -> None:
    lid = store.create_ledger()
    with pytest.raises(EntryOutOfRangeError, match="last add confirmed is -1"):
        store.read(lid, 0, 0)


@pytest.mark.parametrize(
    "op",
    [
        lambda s: s.add_entry(99, b"x"),
        lambda s: s.read(99, 0, 0),
        lambda s: s.last_add_confirmed(99),
        lambda s: s.close(99),
        lambda s: s.fence(99),
        lambda s: s.delete(99),
        lambda s: s.info(99),
    ],
    ids=["add", "read", "lac", "close", "fence", "delete", "info"],
)
def test_unknown_ledger_raises_no_such_ledger(
    store: LedgerStore, op: Callable[[LedgerStore], object]
) -> None:
    with pytest.raises(NoSuchLedgerError, match="no such ledger: 99") as info:
        op(store)
    assert info.value.ledger_id == 99


@pytest.mark.parametrize("ledger_id", [0, -1])
def test_zero_and_negative_ids_are_never_ledgers(store: LedgerStore, ledger_id: int) -> None:
    store.create_ledger()
    with pytest.raises(NoSuchLedgerError):
        store.add_entry(ledger_id, b"x")


def test_add_to_closed_ledger_raises_closed(store: LedgerStore) -> None:
    lid = store.create_ledger()
    store.add_entry(lid, b"a")
    assert store.close(lid) == 0
    with pytest.raises(LedgerClosedError, match=f"ledger {lid} is closed"):
        store.add_entry(lid, b"b")
    assert store.read(lid, 0, 0) == [b"a"]


def test_close_is_idempotent(store: LedgerStore) -> None:
    lid = store.create_ledger()
    store.close(lid)
    assert store.close(lid) == -1
    assert store.info(lid).state is LedgerState.CLOSED


def test_fence_returns_lac_and_rejects_further_adds(store: LedgerStore) -> None:
    lid = store.create_ledger()
    store.add_entry(lid, b"a")
    store.add_entry(lid, b"b")
    assert store.fence(lid) == 1
    with pytest.raises(LedgerFencedError, match=f"ledger {lid} is fenced"):
        store.add_entry(lid, b"c")
    assert store.last_add_confirmed(lid) == 1
    assert store.read(lid, 0, 1) == [b"a", b"b"]


def test_fence_is_idempotent_and_applies_to_closed_ledgers(store: LedgerStore) -> None:
    lid = store.create_ledger()
    store.add_entry(lid, b"a")
    store.close(lid)
    assert store.fence(lid) == 0
    assert store.fence(lid) == 0
    assert store.info(lid).state is LedgerState.FENCED


def test_close_after_fence_tells_the_old_writer_it_was_fenced(store: LedgerStore) -> None:
    lid = store.create_ledger()
    store.fence(lid)
    with pytest.raises(LedgerFencedError):
        store.close(lid)
    assert store.info(lid).state is LedgerState.FENCED


def test_deleted_ledger_is_gone(store: LedgerStore) -> None:
    lid = store.create_ledger()
    store.add_entry(lid, b"a")
    store.delete(lid)
    with pytest.raises(NoSuchLedgerError):
        store.read(lid, 0, 0)
    with pytest.raises(NoSuchLedgerError):
        store.delete(lid)


def test_info_is_a_frozen_snapshot(store: LedgerStore) -> None:
    lid = store.create_ledger()
    store.add_entry(lid, b"abcd")
    info = store.info(lid)
    assert info == LedgerInfo(lid, LedgerState.OPEN, 0, 4)
    store.add_entry(lid, b"e")
    assert info.last_add_confirmed == 0
    with pytest.raises(AttributeError):
        info.state = LedgerState.CLOSED  # type: ignore[misc]


def test_statistics_count_ledgers_entries_and_bytes(store: LedgerStore) -> None:
    assert store.statistics() == LedgerStoreStatistics(0, 0, 0, 0)
    a, b = store.create_ledger(), store.create_ledger()
    store.add_entry(a, b"xyz")
    store.add_entry(b, b"12")
    store.add_entry(b, b"")
    store.close(a)
    assert store.statistics() == LedgerStoreStatistics(
        ledgers=2, open_ledgers=1, entries=3, size_bytes=5
    )
    store.delete(b)
    assert store.statistics() == LedgerStoreStatistics(
        ledgers=1, open_ledgers=0, entries=1, size_bytes=3
    )


def test_snapshots_encode_for_rpc(store: LedgerStore) -> None:
    lid = store.create_ledger()
    store.fence(lid)
    raw = msgspec.msgpack.encode(store.info(lid))
    assert msgspec.msgpack.decode(raw, type=LedgerInfo) == store.info(lid)


@pytest.mark.parametrize(
    "cls", [NoSuchLedgerError, EntryOutOfRangeError, LedgerClosedError, LedgerFencedError]
)
def test_error_codes_round_trip(cls: type[StorageError]) -> None:
    assert issubclass(cls, StorageError)
    assert error_for_code(cls.code) is cls
    assert not cls.retriable


def test_unknown_error_code_maps_to_base_class() -> None:
    assert error_for_code("SomethingNewer") is StorageError


# ---- model-based test -----------------------------------------------------------------------

_ERROR_FOR_STATE = {LedgerState.CLOSED: LedgerClosedError, LedgerState.FENCED: LedgerFencedError}


class LedgerStoreMachine(RuleBasedStateMachine):
    """Drive a LedgerStore and a plain-dict model with the same operations; they must agree."""

    ledgers = Bundle("ledgers")

    def __init__(self) -> None:
        super().__init__()
        self.store = LedgerStore()
        self.model: dict[int, tuple[LedgerState, list[bytes]]] = {}
        self.last_id = 0

    @rule(target=ledgers)
    def create(self) -> int:
        lid = self.store.create_ledger()
        assert lid > self.last_id
        self.last_id = lid
        self.model[lid] = (LedgerState.OPEN, [])
        return lid

    @rule(lid=ledgers, data=st.binary(max_size=16))
    def add(self, lid: int, data: bytes) -> None:
        if lid not in self.model:
            with pytest.raises(NoSuchLedgerError):
                self.store.add_entry(lid, data)
            return
        state, entries = self.model[lid]
        if state is not LedgerState.OPEN:
            with pytest.raises(_ERROR_FOR_STATE[state]):
                self.store.add_entry(lid, data)
            return
        assert self.store.add_entry(lid, data) == len(entries)
        entries.append(data)

    @rule(lid=ledgers, first=st.integers(-2, 12), count=st.integers(0, 12))
    def read(self, lid: int, first: int, count: int) -> None:
        last = first + count - 1
        if lid not in self.model:
            with pytest.raises(NoSuchLedgerError):
                self.store.read(lid, first, last)
            return
        entries = self.model[lid][1]
        if 0 <= first <= last < len(entries):
            assert self.store.read(lid, first, last) == entries[first : last + 1]
        else:
            with pytest.raises(EntryOutOfRangeError):
                self.store.read(lid, first, last)

    def _expect_missing(self, lid: int, op: Callable[[int], object]) -> bool:
        if lid in self.model:
            return False
        with pytest.raises(NoSuchLedgerError):
            op(lid)
        return True

    @rule(lid=ledgers)
    def close(self, lid: int) -> None:
        if self._expect_missing(lid, self.store.close):
            return
        state, entries = self.model[lid]
        if state is LedgerState.FENCED:
            with pytest.raises(LedgerFencedError):
                self.store.close(lid)
            return
        assert self.store.close(lid) == len(entries) - 1
        self.model[lid] = (LedgerState.CLOSED, entries)

    @rule(lid=ledgers)
    def fence(self, lid: int) -> None:
        if self._expect_missing(lid, self.store.fence):
            return
        entries = self.model[lid][1]
        assert self.store.fence(lid) == len(entries) - 1
        self.model[lid] = (LedgerState.FENCED, entries)

    @rule(lid=ledgers)
    def delete(self, lid: int) -> None:
        # Deleted ids stay in the bundle so later rules exercise them as unknown ledgers.
        if self._expect_missing(lid, self.store.delete):
            return
        self.store.delete(lid)
        del self.model[lid]

    @invariant()
    def agrees_with_model(self) -> None:
        assert self.store.ledger_ids() == sorted(self.model)
        for lid, (state, entries) in self.model.items():
            info = self.store.info(lid)
            assert info.state is state
            assert info.last_add_confirmed == len(entries) - 1
            assert info.size_bytes == sum(map(len, entries))
            if entries:
                assert self.store.read(lid, 0, len(entries) - 1) == entries
        stats = self.store.statistics()
        assert stats.ledgers == len(self.model)
        assert stats.open_ledgers == sum(s is LedgerState.OPEN for s, _ in self.model.values())
        assert stats.entries == sum(len(e) for _, e in self.model.values())
        assert stats.size_bytes == sum(len(d) for _, e in self.model.values() for d in e)


TestLedgerStoreMachine = LedgerStoreMachine.TestCase
