"""Pure ack bookkeeping: grouping, batch tracking, negative-ack timing."""

from __future__ import annotations

from protocol import commands as c
from protocol.batch import indexes_of
from protocol.client.acks import AckGrouper, BatchTracker, NackTracker, entry_data
from protocol.ids import MessageId


def test_grouper_merges_duplicates_and_reports_full() -> None:
    grouper = AckGrouper(consumer_id=3, max_ids=3)
    assert not grouper.add_individual(entry_data(1, 0))
    assert not grouper.add_individual(entry_data(1, 0))  # same entry: still one id
    assert not grouper.add_individual(entry_data(1, 1))
    assert grouper.add_individual(entry_data(1, 2))
    (ack,) = grouper.take()
    assert ack.consumer_id == 3
    assert [d.entry_id for d in ack.message_id] == [0, 1, 2]
    assert grouper.take() == []


def test_grouper_intersects_partial_batch_acks() -> None:
    grouper = AckGrouper(consumer_id=0)
    first = c.MessageIdData(ledger_id=1, entry_id=0, ack_set=(0b0110,), batch_size=4)
    second = c.MessageIdData(ledger_id=1, entry_id=0, ack_set=(0b1100,), batch_size=4)
    grouper.add_individual(first)
    grouper.add_individual(second)
    (ack,) = grouper.take()
    assert indexes_of(ack.message_id[0].ack_set, 4) == {2}


def test_grouper_keeps_only_the_furthest_cumulative_position() -> None:
    grouper = AckGrouper(consumer_id=0)
    grouper.add_cumulative(MessageId(1, 5), entry_data(1, 5))
    grouper.add_cumulative(MessageId(1, 3), entry_data(1, 3))
    assert grouper.is_duplicate(1, 4)
    assert not grouper.is_duplicate(1, 6)
    (ack,) = grouper.take()
    assert ack.ack_type is c.AckType.CUMULATIVE
    assert ack.message_id[0].entry_id == 5


def test_batch_tracker_completes_an_entry_when_all_delivered_indexes_are_acked() -> None:
    tracker = BatchTracker()
    tracker.received(1, 7, {0, 2, 3}, 4)  # index 1 was acked before the redelivery
    assert not tracker.ack((1, 7), 0)
    assert indexes_of(tracker.outstanding((1, 7)), 4) == {2, 3}
    assert not tracker.ack((1, 7), 3)
    assert tracker.ack((1, 7), 2)
    assert tracker.ack((1, 9), 0)  # unknown entry: ack it whole


def test_cumulative_inside_a_batch_acks_the_previous_entry() -> None:
    tracker = BatchTracker()
    tracker.received(1, 4, {0, 1, 2}, 3)
    assert tracker.cumulative(MessageId(1, 4, -1, 1, 3)) == entry_data(1, 3)
    assert tracker.cumulative(MessageId(1, 4, -1, 2, 3)) == entry_data(1, 4)
    assert tracker.cumulative(MessageId(1, 0, -1, 0, 2)) == entry_data(1, 0)


def test_nack_tracker_releases_entries_after_the_delay() -> None:
    tracker = NackTracker(delay=1.0)
    tracker.add(MessageId(1, 5, -1, 2, 3), now=0.0)
    tracker.add(MessageId(1, 2), now=0.5)
    assert tracker.next_deadline() == 1.0
    assert tracker.pop_due(0.9) == []
    assert tracker.pop_due(1.0) == [entry_data(1, 5)]  # the whole entry of the batch
    tracker.discard((1, 2))
    assert tracker.next_deadline() is None
