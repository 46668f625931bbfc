from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar, cast

import pytest

from emubroker.storage import BookieBackend, MemoryBackend
from emubroker.topics.managed_ledger import LedgerPolicy, ManagedLedger
from protocol.framing import payload_section
from storage_stub.ledger import LedgerFencedError, LedgerStore, StorageError
from tests.emubroker.topics.helpers import make_entry

T = TypeVar("T")


def _memory(store: LedgerStore, max_entries: int) -> ManagedLedger:
    bookie = MemoryBackend(store)
    policy = LedgerPolicy(max_entries=max_entries)
    return ManagedLedger.create(bookie, policy=policy, ledger_id=store.create_ledger())


def _one(ml: ManagedLedger, entry: bytes, info: object) -> tuple[int, int]:
    return ml.append_many_nowait([entry], [info])[0]  # type: ignore[list-item]


def _append(ml: ManagedLedger, n: int) -> list[tuple[int, int]]:
    out = []
    for i in range(n):
        entry, _, info = make_entry(b"%d" % i)
        out.append(_one(ml, entry, info))
    return out


def test_rollover_keeps_ids_increasing_and_maps_both_ways() -> None:
    store = LedgerStore()
    ml = _memory(store, 3)
    first = ml.current_ledger_id
    assert ml.last_position() == (first, -1)
    ids = _append(ml, 7)
    assert ids[:3] == [(first, 0), (first, 1), (first, 2)]
    assert ids == sorted(ids)
    assert len(ml.ledger_ids) == 3
    for index, (ledger_id, entry_id) in enumerate(ids):
        assert ml.position(index) == (ledger_id, entry_id)
        assert ml.index_of(ledger_id, entry_id) == index
    assert ml.index_of(first, 3) is None  # past that ledger's end
    assert ml.index_of(first, -1) is None
    assert ml.index_of(999, 0) is None
    assert ml.index_at_or_after(999, 0) == 7
    assert ml.index_at_or_after(0, 5) == 0  # an older ledger: start of ours
    # A read is cut at the ledger boundary.
    ledger_id, entry_id, sections = ml.read(1, 5)
    assert (ledger_id, entry_id, len(sections)) == (first, 1, 2)
    assert ml.last_message_id() == (*ids[-1], -1)
    assert store.info(first).state.value == "closed"


def test_append_many_equals_appending_one_by_one_across_rollovers() -> None:
    bulk = _memory(LedgerStore(), 3)
    single = _memory(LedgerStore(), 3)
    made = [make_entry(b"%d" % i) for i in range(8)]
    positions = bulk.append_many_nowait([e for e, _, _ in made[:2]], [i for _, _, i in made[:2]])
    positions += bulk.append_many_nowait([e for e, _, _ in made[2:]], [i for _, _, i in made[2:]])
    assert positions == [_one(single, entry, info) for entry, _, info in made]
    assert bulk.ledger_ids == single.ledger_ids
    assert bulk.infos == single.infos
    assert bulk.read(3, 5) == single.read(3, 5)


class FencingStore(LedgerStore):
    """A store whose new ledgers come fenced once ``fence_new`` is set (a lost ownership)."""

    __slots__ = ("fence_new",)

    def __init__(self) -> None:
        super().__init__()
        self.fence_new = False

    def create_ledger(self) -> int:
        ledger_id = super().create_ledger()
        if self.fence_new:
            self.fence(ledger_id)
        return ledger_id


def test_append_many_reports_what_it_stored_before_storage_failed() -> None:
    store = FencingStore()
    ml = _memory(store, 2)
    made = [make_entry(b"%d" % i) for i in range(5)]
    _one(ml, made[0][0], made[0][2])
    first = ml.current_ledger_id
    store.fence_new = True
    # One entry fits in the first ledger; the ledger rolled over to refuses the rest.
    positions = ml.append_many_nowait([e for e, _, _ in made[1:]], [i for _, _, i in made[1:]])
    assert positions == [(first, 1)]
    assert ml.count == 2
    # Retrying the rest stores nothing, so the failure itself is raised.
    with pytest.raises(LedgerFencedError):
        ml.append_many_nowait([e for e, _, _ in made[2:]], [i for _, _, i in made[2:]])
    assert ml.count == 2


def test_index_of_the_current_ledger_takes_its_shortcut_with_the_same_answers() -> None:
    ml = _memory(LedgerStore(), 2)
    ids = _append(ml, 5)
    for index, (ledger_id, entry_id) in enumerate(ids):
        assert ml.index_of(ledger_id, entry_id) == index
    current = ml.current_ledger_id
    assert ml.index_of(current, 1) is None  # the current ledger holds one entry so far
    assert ml.index_of(current, -1) is None


def test_trim_nowait_deletes_whole_consumed_ledgers_never_the_current_one() -> None:
    store = LedgerStore()
    ml = _memory(store, 3)
    ids = _append(ml, 8)  # ledgers of entries 0-2, 3-5, 6-7 (current)
    first, second, current = ml.ledger_ids
    assert ml.oldest_closed_last == 2
    assert ml.trim_nowait(1) == 0  # the first ledger is not wholly consumed
    assert ml.trim_nowait(4) == 1
    assert ml.ledger_ids == (second, current)
    assert ml.first_index == 3
    assert ml.oldest_closed_last == 5
    with pytest.raises(StorageError):
        store.read(first, 0, 0)
    # What is left reads and maps as before; the trimmed entries' infos are gone.
    assert ml.read(3, 3)[2] == store.read(second, 0, 0)
    assert ml.index_of(*ids[3]) == 3
    assert ml.index_of(*ids[2]) is None  # a trimmed entry is no longer one of the topic's
    assert ml.base == 3
    assert len(ml.infos) == 5
    assert ml.info(3) is ml.infos[0]
    assert ml.info(2).producer_name == ""  # the placeholder of a trimmed entry
    assert ml.trim_nowait(100) == 1  # everything consumed: all but the current ledger
    assert ml.ledger_ids == (current,)
    assert ml.oldest_closed_last > ml.count  # only the current ledger: nothing to trim
    assert ml.count == 8
    assert ml.last_message_id() == (*ids[-1], -1)


@pytest.mark.anyio
async def test_trim_in_memory_mode_is_trim_nowait() -> None:
    ml = _memory(LedgerStore(), 2)
    _append(ml, 5)
    assert await ml.trim(3) == 2
    assert ml.first_index == 4


def test_memory_mode_rolls_over_by_size_once_a_ledger_holds_max_size() -> None:
    store = LedgerStore()
    entry, _, info = make_entry(b"x" * 100)
    ml = ManagedLedger.create(
        MemoryBackend(store),
        policy=LedgerPolicy(max_entries=1000, max_size=3 * len(entry)),
        ledger_id=store.create_ledger(),
    )
    ids = [_one(ml, entry, info) for _ in range(7)]
    # Three entries fill a ledger's size; the next add goes to a new ledger.
    assert [entry_id for _, entry_id in ids] == [0, 1, 2, 0, 1, 2, 0]
    assert len(ml.ledger_ids) == 3


def test_what_a_long_run_keeps_per_entry_is_bounded_by_its_live_ledgers() -> None:
    store = LedgerStore()
    ml = _memory(store, 10)
    for _ in range(100):  # 1,000 entries, each consumed soon after it was written
        _append(ml, 10)
        ml.trim_nowait(ml.count - 1)
    assert ml.count == 1000
    assert len(ml.infos) <= 10  # the current ledger's entries only, not 1,000 (placeholders)
    assert ml.base == ml.first_index
    assert store.statistics().ledgers == 1
    assert ml.last_message_id()[:2] == ml.last_position()


class _BookieAnsweringAtOnce:
    """A bookie client whose calls return without suspending (a stub reply already there)."""

    def __init__(self) -> None:
        self.ledgers: dict[int, list[bytes]] = {}

    async def create_ledger(self, *, request_timeout: float | None = None) -> int:
        ledger_id = len(self.ledgers) + 1
        self.ledgers[ledger_id] = []
        return ledger_id

    async def add_entry(
        self, ledger_id: int, data: bytes, *, request_timeout: float | None = None
    ) -> int:
        self.ledgers[ledger_id].append(data)
        return len(self.ledgers[ledger_id]) - 1


def _run_without_suspending(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end in this step; AssertionError if it suspends on the way."""
    try:
        coro.send(None)
    except StopIteration as done:
        return cast("T", done.value)
    coro.close()
    raise AssertionError("suspended")


@pytest.mark.anyio
async def test_a_bookie_append_suspends_only_where_the_bookie_does() -> None:
    # Its lock is free: taking it yields nothing (anyio's default lock yields once), so a
    # publisher's SEND run of one entry (a batched producer's) costs its task one step, the
    # bookie's reply, not one more. (Longer runs pipeline their adds in worker tasks.)
    bookie = _BookieAnsweringAtOnce()
    ml = await ManagedLedger.open(BookieBackend(bookie), policy=LedgerPolicy())  # type: ignore[arg-type]
    assert ml is not None
    entry, crc, info = make_entry(b"x")
    section = payload_section(entry, crc)
    assert _run_without_suspending(ml.append_many([section], [info])) == [(1, 0)]
    assert _run_without_suspending(ml.append_many([section], [info])) == [(1, 1)]
    assert bookie.ledgers == {1: [section, section]}
