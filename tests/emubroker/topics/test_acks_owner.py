"""The acknowledgement state's owner, unit by unit: what each operation changes and reports."""

from __future__ import annotations

from typing import Any

from emubroker.storage import MemoryBackend
from emubroker.topics.acks import AckChange, Acknowledgements
from emubroker.topics.consumer import Consumer
from emubroker.topics.cursor import Cursor, words_from_mask
from emubroker.topics.managed_ledger import LedgerPolicy, ManagedLedger
from emubroker.topics.requests import SubscribeRequest
from protocol.commands import MessageIdData, SubType
from protocol.ids import WholeEntryIds
from storage_stub.ledger import LedgerStore
from tests.emubroker.topics.helpers import FakeConsumerSink, make_entry


def _ledger(entries: int, *, batch: int | None = None) -> ManagedLedger:
    store = LedgerStore()
    ml = ManagedLedger.create(
        MemoryBackend(store), policy=LedgerPolicy(), ledger_id=store.create_ledger()
    )
    made = [make_entry(b"%d" % i, sequence_id=i, batch=batch) for i in range(entries)]
    ml.append_many_nowait([e for e, _, _ in made], [info for _, _, info in made])
    return ml


def _consumer(name: str = "c") -> Consumer:
    owner: Any = None  # the owner never calls back into the consumer's subscription
    request = SubscribeRequest(
        subscription="s", sub_type=SubType.SHARED, consumer_id=1, consumer_name=name
    )
    return Consumer(request, FakeConsumerSink(), 1, owner)


def _ids(ml: ManagedLedger, *indexes: int, ack_set: tuple[int, ...] = ()) -> list[MessageIdData]:
    out = []
    for index in indexes:
        ledger_id, entry_id = ml.position(index)
        out.append(MessageIdData(ledger_id=ledger_id, entry_id=entry_id, ack_set=ack_set))
    return out


def test_an_individual_ack_settles_deliveries_and_says_what_changed() -> None:
    ml = _ledger(4)
    acks = Acknowledgements(Cursor(), ml)
    acks.limit_unacked(block_at=2, unblock_at=1)
    consumer = _consumer()
    for index in (0, 1):
        assert acks.deliver(consumer, index, 1) == (1, (), 0)
    assert consumer.blocked  # two unacked reach the limit
    assert acks.ack_individual(_ids(ml, 1)) == AckChange(
        moved=False, entries=1, settled=1, unblocked=True
    )
    assert (consumer.unacked, consumer.pending, consumer.blocked) == (1, {0: 1}, False)
    assert acks.ack_individual(_ids(ml, 0, 1)) == AckChange(True, 1, 1, False)
    assert acks.cursor.mark_delete == 1
    assert acks.ack_individual(_ids(ml, 0)) == AckChange(False, 0, 0, False)  # already acked


def test_a_partly_acked_batch_is_charged_its_rest_and_keeps_its_redelivery_count() -> None:
    ml = _ledger(1, batch=4)
    acks = Acknowledgements(Cursor(), ml)
    consumer = _consumer()
    acks.deliver(consumer, 0, 4)
    assert acks.redeliver(consumer, [0], count=True) == [0]
    # The client sends the bits still unacked: 0b1100, messages 0 and 1 acked.
    ack_set = words_from_mask(0b1100, 4)
    assert acks.ack_individual(_ids(ml, 0, ack_set=ack_set)) == AckChange(False, 0, 0, False)
    assert acks.deliver(consumer, 0, 4) == (2, ack_set, 1)
    assert acks.ack_individual(_ids(ml, 0)) == AckChange(True, 1, 2, False)
    assert acks.deliver(consumer, 0, 4)[2] == 0  # acknowledged: its count is forgotten


def test_a_cumulative_ack_forgets_redelivery_counts_behind_it() -> None:
    ml = _ledger(6)
    acks = Acknowledgements(Cursor(), ml)
    consumer = _consumer()
    for index in range(6):
        acks.deliver(consumer, index, 1)
    assert sorted(acks.redeliver(consumer, [4, 5], count=True)) == [4, 5]
    change = acks.ack_cumulative(_ids(ml, 4))
    assert change == AckChange(moved=True, entries=5, settled=4, unblocked=False)
    assert acks.deliver(consumer, 5, 1)[2] == 1  # after the ack: still counted
    assert acks.backlog() == 1


def test_releases_give_back_the_entries_and_count_only_when_asked() -> None:
    ml = _ledger(3)
    acks = Acknowledgements(Cursor(), ml)
    consumer = _consumer()
    for index in range(3):
        acks.deliver(consumer, index, 1)
    assert acks.redeliver(consumer, [2, 7], count=False) == [2]  # 7 was never delivered
    assert not acks.needs_delivery(0)
    assert acks.needs_delivery(2)
    assert sorted(acks.release(consumer, count=True)) == [0, 1]
    assert (consumer.unacked, consumer.pending) == (0, {})
    assert [acks.deliver(consumer, i, 1)[2] for i in range(3)] == [1, 1, 0]
    acks.forget_redeliveries()
    acks.forget(consumer)
    assert acks.deliver(consumer, 0, 1) == (1, (), 0)


def test_expiry_skip_and_compaction_report_the_entries_they_acknowledged() -> None:
    ml = _ledger(10)
    acks = Acknowledgements(Cursor(), ml)
    acks.ack_individual(_ids(ml, 3))
    assert acks.expire_to(4) == AckChange(True, 4, 0, False)  # 0..4, 3 was acked already
    assert acks.expire_to(2) == AckChange(False, 0, 0, False)  # behind the mark-delete
    assert acks.skip(2) == AckChange(True, 2, 0, False)
    assert acks.cursor.mark_delete == 6
    assert acks.apply_compaction([2, 8], {}) == AckChange(False, 1, 0, False)  # 2: acked
    assert acks.skip(None) == AckChange(True, 2, 0, False)  # 7 and 9
    assert acks.backlog() == 0


def test_skip_acknowledges_the_next_unacknowledged_entries_whatever_the_count() -> None:
    ml = _ledger(10)
    acks = Acknowledgements(Cursor(), ml)
    consumer = _consumer()
    acks.deliver(consumer, 2, 1)
    acks.ack_individual(_ids(ml, 1, 4, 5))
    # The next three unacknowledged: 0, 2 and 3 (1 was acked); 4 and 5 fold in.
    assert acks.skip(3) == AckChange(True, 3, 1, False)
    assert acks.cursor.mark_delete == 5
    assert (consumer.unacked, consumer.pending) == (0, {})
    assert acks.skip(0) == AckChange(False, 0, 0, False)
    assert acks.skip(10**18) == AckChange(True, 4, 0, False)  # 6..9, no walk to 10^18
    assert acks.backlog() == 0


def test_a_batch_claiming_two_billion_messages_costs_what_its_acks_carry() -> None:
    # The message count is the producer's word; a mask of that many bits would be 256 MiB, and
    # its ack set 33 million words.
    huge = 2**31 - 1
    ml = _ledger(1, batch=huge)
    acks = Acknowledgements(Cursor(), ml)
    consumer = _consumer()
    assert acks.deliver(consumer, 0, huge)[:2] == (huge, ())
    acks.ack_individual(_ids(ml, 0, ack_set=(0b101,)))  # all but messages 0 and 2
    assert acks.cursor.partial == {0: 0b101}
    acks.release(consumer, count=True)
    assert acks.deliver(consumer, 0, huge)[:2] == (2, (0b101,))
    acks.ack_individual(_ids(ml, 0, ack_set=(0b100,)))
    assert acks.deliver(consumer, 0, huge)[:2] == (1, (0b100,))
    acks.ack_individual(_ids(ml, 0, ack_set=(0,)))
    assert acks.backlog() == 0


class _FarLedger:
    count = 10**12  # an index space only: skip asks nothing else of the ledger


def test_skip_far_into_a_backlog_walks_nothing() -> None:
    ledger: Any = _FarLedger()
    acks = Acknowledgements(Cursor(), ledger)
    acks.cursor.ack(7)
    assert acks.skip(10**12 - 10) == AckChange(True, 10**12 - 10, 0, False)
    assert acks.cursor.mark_delete == 10**12 - 10  # 0..10^12-10 with 7 among them
    assert acks.skip(None).entries == 9


def test_a_seek_forgets_acks_deliveries_and_counts() -> None:
    ml = _ledger(5)
    acks = Acknowledgements(Cursor(), ml)
    consumer = _consumer()
    acks.deliver(consumer, 3, 1)
    acks.redeliver(consumer, [3], count=True)
    acks.deliver(consumer, 3, 1)
    acks.ack_individual(_ids(ml, 0, 1, 4))
    acks.reset(1)
    assert acks.cursor.mark_delete == 0
    assert (consumer.unacked, consumer.pending) == (0, {})
    assert acks.needs_delivery(4)
    assert acks.deliver(consumer, 3, 1)[2] == 0


def test_whole_entry_ids_are_applied_as_their_records_would_be() -> None:
    # What ``wire.parse_ack`` gives for a grouped ACK (``WholeEntryIds``) goes through
    # ``Acknowledgements._indexes``: the same indexes, settlements and change as the records.
    def ledger() -> ManagedLedger:
        store = LedgerStore()
        ml = ManagedLedger.create(
            MemoryBackend(store),
            policy=LedgerPolicy(max_entries=4),  # ledgers of 4 entries: 10 entries in 3
            ledger_id=store.create_ledger(),
        )
        made = [make_entry(b"%d" % i, sequence_id=i) for i in range(10)]
        ml.append_many_nowait([e for e, _, _ in made], [info for _, _, info in made])
        ml.trim_nowait(3)  # the first ledger goes
        return ml

    probe = ledger()
    first, second, current = (probe.position(i)[0] for i in (0, 4, 8))
    cases = [
        (current, [0, 1, 2, 5]),  # the current ledger, one past its end
        (second, [3, 2, 4, 1, 1]),  # an older one, out of order, repeated, past its end
        (first, [0, 1]),  # trimmed
        (current + 100, [0]),  # not this topic's
    ]
    for ledger_id, entry_ids in cases:
        states = []
        for ids in (
            WholeEntryIds(ledger_id, entry_ids),
            tuple(MessageIdData(ledger_id=ledger_id, entry_id=e) for e in entry_ids),
        ):
            ml = ledger()
            acks = Acknowledgements(Cursor(), ml)
            acks.limit_unacked(block_at=3, unblock_at=1)
            one, two = _consumer("one"), _consumer("two")
            for index in range(4, 10):
                acks.deliver(one if index % 2 else two, index, 1)
            change = acks.ack_individual(ids)
            states.append(
                (
                    change,
                    acks.cursor.mark_delete,
                    sorted(acks.cursor.acked),
                    (one.unacked, one.blocked, sorted(one.pending)),
                    (two.unacked, two.blocked, sorted(two.pending)),
                )
            )
        assert states[0] == states[1], (ledger_id, entry_ids)
