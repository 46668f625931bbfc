from __future__ import annotations

import pytest

from emubroker.topics import entry_info_from_metadata
from protocol.codec import encode_record
from protocol.commands import MessageMetadata
from protocol.errors import RemoteProtocolError


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
