"""The broker's per-message protocol work, part by part, in process (no sockets, no event loop).

Usage: python bench/hotpath_parts.py [--messages N] [--rounds R]

Times, per message, the parts of the unbatched publish -> dispatch -> ack path that are pure
functions of bytes (the sans-IO core and the broker's metadata peek), on what the official
client writes: N SEND frames of 100 B in one read (sequence ids from 20,000 on, so they take
three bytes, and a publish time of six), their SEND_RECEIPTs and MESSAGE heads (entry ids from
20,000 on), and grouped ACKs of 1,000 ids. Best of R rounds, in µs of this thread's CPU per
message (CPU, not wall time: on a shared machine other processes then count less). The stateful
parts (the handler's queueing, publishing, dispatch bookkeeping, applying ACKs) are measured
with the whole broker: `bench/broker_cpu.py --profile`. Numbers only; asserts nothing.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from emubroker.topics.entry import entry_info_from_entry
from protocol import commands as c
from protocol.codec import encode_command, encode_record
from protocol.framing import (
    FrameDecoder,
    checksum,
    encode_message_head,
    encode_send_frame,
    encode_send_receipt_frames,
)
from protocol.wire import parse_ack

FIRST_ID = 20_000
PUBLISH_TIME = 1_764_000_000_000


def send_chunk(n: int) -> tuple[bytes, list[bytes]]:
    """N SEND frames as the official client writes them, joined, and their entries."""
    frames = []
    for i in range(n):
        sequence_id = FIRST_ID + i
        metadata = encode_record(
            c.MessageMetadata(
                producer_name="standalone-0-1", sequence_id=sequence_id, publish_time=PUBLISH_TIME
            )
        )
        command = c.Send(producer_id=0, sequence_id=sequence_id)
        frames.append(encode_send_frame(command, metadata, b"x" * 100, with_checksum=True))
    decoder = FrameDecoder()
    chunk = b"".join(frames)
    decoder.feed(chunk)
    entries = []
    while (frame := decoder.next_frame()) is not None:
        assert frame.payload is not None
        entries.append(frame.payload.entry)
    return chunk, entries


def ack_body(n: int) -> bytes:
    ids = [c.MessageIdData(ledger_id=0, entry_id=FIRST_ID + i) for i in range(n)]
    return encode_command(c.Ack(consumer_id=0, ack_type=c.AckType.INDIVIDUAL, message_id=ids))


def best(fn: Callable[[], object], rounds: int, n: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.thread_time()
        fn()
        times.append(time.thread_time() - start)
    return min(times) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    n = args.messages
    chunk, entries = send_chunk(n)
    ids = list(range(FIRST_ID, FIRST_ID + n))
    positions = [(0, i) for i in ids]
    ack = ack_body(min(n, 1000))
    assert parse_ack(ack, 0, len(ack)) is not None, "the ACK must be on the fast lane"

    def split_and_decode() -> None:
        decoder = FrameDecoder()
        decoder.feed(chunk)
        while decoder.next_frame() is not None:
            pass

    def metadata() -> None:
        for entry in entries:
            entry_info_from_entry(entry)

    def crc() -> None:
        for entry in entries:
            checksum(entry)

    def receipts() -> None:
        encode_send_receipt_frames(0, ids, positions)

    def heads() -> None:
        for i in ids:
            encode_message_head(0, 0, i, -1, 0, (), 130)

    def acks() -> None:
        for _ in range(n // 1000 or 1):
            parse_ack(ack, 0, len(ack))

    parts = [
        ("split the read into frames, decode each SEND", split_and_decode),
        ("read the entry's metadata (EntryInfo)", metadata),
        ("the SEND's checksum (crc32c)", crc),
        ("encode the SEND_RECEIPTs", receipts),
        ("encode the MESSAGE heads", heads),
        ("decode the grouped ACKs' ids", acks),
    ]
    total = 0.0
    for name, fn in parts:
        us = best(fn, args.rounds, n)
        total += us
        print(f"{us:6.3f} us/msg  {name}")
    print(f"{total:6.3f} us/msg  together")


if __name__ == "__main__":
    main()
