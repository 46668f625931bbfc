"""protocol/ids.py: message ids, their order and the earliest/latest sentinels (spec §10)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import commands as c
from protocol.codec import decode_command, encode_command, encode_record
from protocol.ids import EARLIEST, LATEST, MAX_I64, MessageId, is_earliest, is_latest
from tests.support.bytestreams import varint

# A small domain, so that equal ledgers/entries (where order subtleties live) are common.
small = st.integers(-1, 3)
message_ids = st.builds(
    MessageId,
    ledger_id=small,
    entry_id=small,
    partition=st.integers(-1, 2),
    batch_index=small,
    batch_size=st.integers(0, 4),
)
real_ids = st.builds(
    MessageId,
    ledger_id=st.integers(0, MAX_I64 - 1),
    entry_id=st.integers(0, MAX_I64 - 1),
    partition=st.integers(-1, 100),
    batch_index=st.integers(-1, 1000),
)


def test_ordering_ignores_partition() -> None:
    # spec §10: ordering compares ledger, entry and batch index only; equality adds partition.
    a = MessageId(1, 2, partition=0)
    b = MessageId(1, 2, partition=5)
    assert not a < b
    assert not b < a
    assert a != b
    assert sorted([b, a]) == [b, a]  # neither sorts first: the sort is stable


@given(message_ids, message_ids)
def test_less_than_compares_ledger_entry_batch_index(a: MessageId, b: MessageId) -> None:
    assert (a < b) == (
        (a.ledger_id, a.entry_id, a.batch_index) < (b.ledger_id, b.entry_id, b.batch_index)
    )


@given(message_ids, message_ids)
def test_derived_comparisons_match_the_cpp_client(a: MessageId, b: MessageId) -> None:
    # pulsar-client-cpp lib/MessageId.cc: <= is (< or ==), > is not <=, >= is not <.
    assert (a <= b) == (a < b or a == b)
    assert (a > b) == (not (a < b or a == b))
    assert (a >= b) == (not a < b)


def test_unbatched_id_sorts_before_the_first_batch_index() -> None:
    assert MessageId(4, 7) < MessageId(4, 7, batch_index=0) < MessageId(4, 7, batch_index=1)
    assert MessageId(4, 7, batch_index=999) < MessageId(4, 8)
    assert MessageId(4, MAX_I64) < MessageId(5, 0)


def test_comparing_with_another_type_is_not_supported() -> None:
    with pytest.raises(TypeError):
        _ = MessageId(1, 1) < (1, 1, -1)


# ---- sentinels (spec §1.3) ------------------------------------------------------------------


def test_sentinel_values() -> None:
    assert (EARLIEST.ledger_id, EARLIEST.entry_id) == (-1, -1)
    assert (LATEST.ledger_id, LATEST.entry_id) == (2**63 - 1, 2**63 - 1)
    assert is_earliest(EARLIEST.to_data())
    assert is_latest(LATEST.to_data())
    assert not is_earliest(LATEST.to_data())
    assert not is_latest(EARLIEST.to_data())


@given(real_ids)
def test_every_real_id_lies_between_the_sentinels(message_id: MessageId) -> None:
    assert EARLIEST < message_id < LATEST
    assert not is_earliest(message_id.to_data())
    assert not is_latest(message_id.to_data())


@pytest.mark.parametrize(
    ("data", "earliest", "latest"),
    [
        (c.MessageIdData(ledger_id=-1, entry_id=0), False, False),
        (c.MessageIdData(ledger_id=0, entry_id=-1), False, False),
        (c.MessageIdData(ledger_id=MAX_I64, entry_id=0), False, False),
        (c.MessageIdData(ledger_id=-1, entry_id=-1, partition=3, batch_index=2), True, False),
        (c.MessageIdData(ledger_id=MAX_I64, entry_id=MAX_I64, partition=1), False, True),
    ],
)
def test_sentinels_are_recognised_by_ledger_and_entry(
    data: c.MessageIdData, earliest: bool, latest: bool
) -> None:
    assert is_earliest(data) is earliest
    assert is_latest(data) is latest


def test_sentinels_survive_the_wire() -> None:
    # The client sends earliest as 2^64-1 (uint64): it must come back as -1, still earliest.
    assert encode_record(EARLIEST.to_data()) == b"\x08" + varint(2**64 - 1) + b"\x10" + varint(
        2**64 - 1
    )
    for sentinel, check in ((EARLIEST, is_earliest), (LATEST, is_latest)):
        seek = c.Seek(consumer_id=1, request_id=2, message_id=sentinel.to_data())
        decoded = decode_command(encode_command(seek))
        assert isinstance(decoded, c.Seek)
        assert decoded.message_id is not None
        assert check(decoded.message_id)


# ---- wire form ------------------------------------------------------------------------------


def test_unbatched_id_writes_no_batch_fields() -> None:
    data = MessageId(3, 4, partition=2).to_data()
    assert data == c.MessageIdData(ledger_id=3, entry_id=4, partition=2)
    assert (data.batch_index, data.batch_size) == (-1, None)


def test_batched_id_writes_index_and_size() -> None:
    data = MessageId(3, 4, partition=-1, batch_index=1, batch_size=10).to_data()
    assert (data.batch_index, data.batch_size) == (1, 10)


@given(real_ids, st.integers(0, 50))
def test_data_round_trip(message_id: MessageId, batch_size: int) -> None:
    if message_id.batch_index >= 0:
        message_id = MessageId(
            message_id.ledger_id,
            message_id.entry_id,
            message_id.partition,
            message_id.batch_index,
            batch_size,
        )
    assert MessageId.from_data(message_id.to_data()) == message_id


def test_from_data_can_override_the_partition() -> None:
    # spec §10: the consumer takes the partition from MESSAGE; a producer uses its own index.
    data = c.MessageIdData(ledger_id=1, entry_id=2, partition=-1)
    assert MessageId.from_data(data, partition=3) == MessageId(1, 2, partition=3)
    assert MessageId.from_data(data) == MessageId(1, 2, partition=-1)


def test_every_comparison_operator_works() -> None:
    # Regression: `<=` and `>=` raised TypeError (total_ordering vs msgspec's own comparisons).
    a, b = MessageId(1, 1), MessageId(1, 2)
    assert a <= b
    assert b >= a
    assert b > a
    assert a <= MessageId(1, 1)
    assert a >= MessageId(1, 1)
    assert not b <= a
    assert max(a, b) is b


def test_batch_size_is_not_part_of_identity() -> None:
    # GET_LAST_MESSAGE_ID carries no batch size; the received id of that message has one.
    received = MessageId(3, 7, -1, 4, 5)
    last = MessageId(3, 7, -1, 4, 0)
    assert received == last
    assert hash(received) == hash(last)
    assert not received > last
    assert not received < last
    assert received >= last
    assert received <= last


def test_partition_is_part_of_identity_but_not_of_order() -> None:
    assert MessageId(3, 7, 0, 1) != MessageId(3, 7, 1, 1)
    assert not MessageId(3, 7, 0, 1) < MessageId(3, 7, 1, 1)
