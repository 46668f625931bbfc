from __future__ import annotations

from emubroker.topics.managed_ledger import ManagedLedger
from storage_stub.ledger import LedgerStore
from tests.emubroker.topics.helpers import make_entry


def _append(ml: ManagedLedger, n: int) -> list[tuple[int, int]]:
    out = []
    for i in range(n):
        entry, _, info = make_entry(b"%d" % i)
        out.append(ml.append(entry, info))
    return out


def test_rollover_keeps_ids_increasing_and_maps_both_ways() -> None:
    store = LedgerStore()
    ml = ManagedLedger(store, max_entries_per_ledger=3)
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
