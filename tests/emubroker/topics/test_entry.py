from __future__ import annotations

import gc

import pytest

from emubroker.topics import entry_info_from_metadata
from emubroker.topics.entry import EntryInfo, RunInfos, entry_info_from_entry
from protocol.codec import encode_record
from protocol.commands import KeyValue, MessageMetadata
from protocol.errors import RemoteProtocolError
from protocol.framing import build_entry
from protocol.runs import SendRun
from protocol.wire import uvarint
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


# ---- RunInfos: a producer's runs of SENDs read against its last metadata ----------------------


def _run_of(entries: list[tuple[int, bytes]]) -> SendRun:
    run = SendRun(0)
    for sequence_id, entry in entries:
        run.sequence_ids.append(sequence_id)
        run.sequence_varints.append(uvarint(sequence_id))
        run.entries.append(entry)
        run.checksums.append(0)
    return run


def _entry(**fields: object) -> bytes:
    meta = {"producer_name": "standalone-0-1", "sequence_id": 0, "publish_time": 1_700_000_000_000}
    meta.update(fields)
    return build_entry(encode_record(MessageMetadata(**meta)), b"payload")  # type: ignore[arg-type]


def _reference(entry: bytes) -> EntryInfo | None:
    try:
        return entry_info_from_entry(entry)
    except RemoteProtocolError:
        return None


@pytest.mark.parametrize(
    "entries",
    [
        # The official client: consecutive sequence ids, the publish time moving now and then.
        [
            (s, _entry(sequence_id=s, publish_time=1_700_000_000_000 + s // 3))
            for s in range(120, 140)
        ],
        # Sequence ids of one, two and three bytes, around the template's varint lengths.
        [(s, _entry(sequence_id=s)) for s in (1, 127, 128, 16383, 16384, 2**21 - 1)],
        # The SEND's sequence id is not the metadata's: read from the metadata, as before.
        [(5, _entry(sequence_id=5)), (6, _entry(sequence_id=7)), (8, _entry(sequence_id=8))],
        # Other shapes in between: a key, a batch, a delay, properties, another producer name.
        [
            (1, _entry(sequence_id=1)),
            (2, _entry(sequence_id=2, partition_key="k")),
            (3, _entry(sequence_id=3, num_messages_in_batch=1)),
            (4, _entry(sequence_id=4, deliver_at_time=5)),
            (5, _entry(sequence_id=5, properties=[KeyValue(key="a", value="b")])),
            (6, _entry(sequence_id=6, producer_name="other")),
            (7, _entry(sequence_id=7)),
            (8, _entry(sequence_id=8, uncompressed_size=3)),
            (9, _entry(sequence_id=9)),
        ],
        # Invalid metadata and entries cut short: None, the caller reports it.
        [(1, _entry(sequence_id=1)), (2, b"\x00\x00\x00\x05\x0a\x10ab"), (3, _entry()[:20])],
    ],
)
def test_run_infos_are_what_each_entry_reads_alone(entries: list[tuple[int, bytes]]) -> None:
    infos = RunInfos()
    # Twice: the second time every entry meets a template learnt before.
    for _ in range(2):
        assert infos.read(_run_of(entries)) == [_reference(entry) for _, entry in entries]


def test_run_infos_share_the_interned_producer_name() -> None:
    infos = RunInfos().read(_run_of([(s, _entry(sequence_id=s)) for s in range(3)]))
    assert len({id(info.producer_name) for info in infos if info is not None}) == 1
