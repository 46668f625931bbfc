from __future__ import annotations

import gc

import pytest

from emubroker.topics import entry_info_from_metadata
from emubroker.topics.entry import entry_info_from_entry
from protocol.codec import encode_record
from protocol.commands import MessageMetadata
from protocol.errors import RemoteProtocolError
from tests.emubroker.topics.helpers import make_entry


def test_plain_message_info() -> None:
    meta = MessageMetadata(producer_name="p", sequence_id=7, publish_time=123)
    info = entry_info_from_metadata(encode_record(meta), size=99)
    assert info.num_messages == 1
    assert not info.batched
    assert info.publish_time == 123
    assert info.key is None
    assert info.deliver_at_time is None
    assert (info.producer_name, info.sequence_id, info.size) == ("p", 7, 99)


def test_batch_presence_and_ordering_key_win() -> None:
    meta = MessageMetadata(
        producer_name="p",
        sequence_id=0,
        publish_time=1,
        num_messages_in_batch=1,
        partition_key="pk",
        ordering_key=b"ok",
        deliver_at_time=5000,
    )
    info = entry_info_from_metadata(encode_record(meta))
    assert info.batched
    assert info.num_messages == 1
    assert info.key == b"ok"
    assert info.deliver_at_time == 5000


def test_partition_key_is_the_fallback_key() -> None:
    meta = MessageMetadata(producer_name="p", sequence_id=0, publish_time=1, partition_key="ké")
    assert entry_info_from_metadata(encode_record(meta)).key == "ké".encode()


def test_garbage_metadata_raises_remote_protocol_error() -> None:
    with pytest.raises(RemoteProtocolError):
        entry_info_from_metadata(b"\xff\xff\xff")


def test_an_info_costs_no_gc_header_and_no_producer_name_of_its_own() -> None:
    # One info is kept per live entry: entries of one producer share its name's string.
    first, _, _ = make_entry(b"a", sequence_id=1, producer_name="standalone-0-42")
    second, _, _ = make_entry(b"b", sequence_id=2, producer_name="standalone-0-42")
    a, b = entry_info_from_entry(first), entry_info_from_entry(second)
    assert a.producer_name is b.producer_name
    assert not gc.is_tracked(a)
