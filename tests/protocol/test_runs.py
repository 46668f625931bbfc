"""protocol/runs.py: a run of SENDs is exactly the SEND frames the generic decoder reads (§6.2).

A chunk is decoded twice: frame by frame (``FrameDecoder.next_frame`` only) and the broker's way
(``next_send_run`` first, frames for the rest). Both must give the same SENDs with the same
values, in the same order, and fail at the same frame, on generated chunks of what the official
client writes, on mutations of them and on random bytes.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from protocol import commands as c
from protocol.codec import encode_record
from protocol.connection import Connection, Role
from protocol.errors import RemoteProtocolError
from protocol.framing import FrameDecoder, encode_frame, encode_send_frame
from protocol.runs import read_send_run
from protocol.wire import uvarint

MAX_FRAME = 64 * 1024


def send_frame(producer_id: int, sequence_id: int, payload: bytes = b"x" * 10) -> bytes:
    metadata = encode_record(
        c.MessageMetadata(producer_name="p-0", sequence_id=sequence_id, publish_time=1_700_000)
    )
    command = c.Send(producer_id=producer_id, sequence_id=sequence_id)
    return encode_send_frame(command, metadata, payload, with_checksum=True)


def frame_by_frame(chunk: bytes) -> list[Any]:
    """What the generic decoder makes of ``chunk``: each frame's values, then an error or end."""
    decoder = FrameDecoder(MAX_FRAME)
    decoder.feed(chunk)
    out: list[Any] = []
    while True:
        try:
            frame = decoder.next_frame()
        except RemoteProtocolError:
            return [*out, "error"]
        if frame is None:
            return out
        command = frame.command
        if type(command) is c.Send and frame.payload is not None:
            out.append((command, frame.payload.entry, frame.payload.checksum))
        else:
            out.append(command)


def with_runs(chunk: bytes) -> tuple[list[Any], int]:
    """The broker's way: runs first, frames for the rest; also how many SENDs came in runs."""
    decoder = FrameDecoder(MAX_FRAME)
    decoder.feed(chunk)
    out: list[Any] = []
    in_runs = 0
    while True:
        run = decoder.next_send_run()
        if run is not None:
            assert len(run) > 0
            for sequence_id, entry, crc, varint in zip(
                run.sequence_ids, run.entries, run.checksums, run.sequence_varints, strict=True
            ):
                # The varint is the canonical encoding of the id.
                assert varint == uvarint(sequence_id)
                command = c.Send(producer_id=run.producer_id, sequence_id=sequence_id)
                out.append((command, entry, crc))
            in_runs += len(run)
            continue
        try:
            frame = decoder.next_frame()
        except RemoteProtocolError:
            return [*out, "error"], in_runs
        if frame is None:
            return out, in_runs
        command = frame.command
        if type(command) is c.Send and frame.payload is not None:
            out.append((command, frame.payload.entry, frame.payload.checksum))
        else:
            out.append(command)


SEQUENCE_IDS = st.sampled_from([0, 1, 127, 128, 300, 16383, 16384, 20000, 2**21 - 1, 2**21, 2**40])

client_sends = st.lists(
    st.tuples(st.sampled_from([0, 1, 5, 127, 128]), SEQUENCE_IDS, st.binary(max_size=20)),
    min_size=1,
    max_size=12,
)
client_chunks = client_sends.map(lambda sends: b"".join(send_frame(*send) for send in sends))


@st.composite
def mutated(draw: st.DrawFn, valid: st.SearchStrategy[bytes]) -> bytes:
    data = bytearray(draw(valid))
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.integers(0, max(len(data) - 1, 0)))
        action = draw(st.sampled_from(["set", "cut", "insert"]))
        if action == "set" and data:
            data[where] = draw(st.integers(0, 255))
        elif action == "cut":
            del data[where:]
        else:
            data[where:where] = draw(st.binary(min_size=1, max_size=3))
    return bytes(data)


@given(client_sends)
def test_runs_read_what_the_frames_read(sends: list[tuple[int, int, bytes]]) -> None:
    chunk = b"".join(send_frame(*send) for send in sends)
    out, in_runs = with_runs(chunk)
    assert out == frame_by_frame(chunk)
    # Every SEND of the client's shape comes in a run: a one-byte producer id, a sequence id
    # of up to three bytes.
    assert in_runs == sum(1 for p, s, _ in sends if p < 0x80 and s < 2**21)


@given(st.one_of(mutated(client_chunks), st.binary(max_size=200)))
@example(send_frame(0, 1)[:-1])  # incomplete: left to the frame decoder, which waits
@example(send_frame(0, 128)[:12] + b"\x80\x00" + send_frame(0, 128)[14:])  # non-canonical
def test_runs_agree_on_mutated_and_random_bytes(chunk: bytes) -> None:
    assert with_runs(chunk)[0] == frame_by_frame(chunk)


def test_a_run_stops_at_another_producer_and_at_other_commands() -> None:
    flow = encode_frame(c.Flow(consumer_id=1, message_permits=10))
    chunk = send_frame(1, 1) + send_frame(1, 2) + send_frame(2, 3) + flow + send_frame(2, 4)
    found = read_send_run(chunk, 0, MAX_FRAME)
    assert found is not None
    run, end = found
    assert (run.producer_id, run.sequence_ids) == (1, [1, 2])
    run, end = read_send_run(chunk, end, MAX_FRAME) or (None, 0)
    assert run is not None
    assert (run.producer_id, run.sequence_ids) == (2, [3])
    assert read_send_run(chunk, end, MAX_FRAME) is None  # the FLOW


def test_a_frame_over_the_limit_is_left_to_the_decoder() -> None:
    frame = send_frame(0, 1, b"x" * 100)
    assert read_send_run(frame, 0, len(frame) - 5) is None
    decoder = FrameDecoder(len(frame) - 5)
    decoder.feed(frame)
    assert decoder.next_send_run() is None
    with pytest.raises(RemoteProtocolError, match="exceeds the limit"):
        decoder.next_frame()


def test_a_connection_gives_runs_only_to_an_open_broker() -> None:
    frame = send_frame(0, 1)
    client = Connection(Role.CLIENT)
    client.receive_data(frame)
    assert client.next_send_run() is None
    broker = Connection(Role.BROKER)
    broker.receive_data(frame)
    assert broker.next_send_run() is None  # still in the handshake: the frame decides
    with pytest.raises(RemoteProtocolError):
        broker.next_frame()
