"""The broker's per-message protocol work, part by part, in process (no sockets, no event loop).

Usage: python bench/hotpath_parts.py [--messages N] [--rounds R]

Times, per message, the parts of the unbatched publish -> dispatch -> ack path that are pure
functions of bytes (the sans-IO core and the broker's metadata peek), on what the official
client writes: N SEND frames of 100 B in one read (sequence ids from 20,000 on, so they take
three bytes, and a publish time of six) split into runs of SENDs (``protocol.runs``), their
entry infos read against the producer's metadata template (``RunInfos``; one publish time for
all, so the template always holds, where the official client's publish time moves every
millisecond and the first entry of each millisecond is parsed), their SEND_RECEIPTs and their
MESSAGE heads as one run (entry ids from 20,000 on), and grouped ACKs of 1,000 ids. Best of R
rounds, in µs of this thread's CPU per message (CPU, not wall time: on a shared machine other
processes then count less). The stateful parts (the handler's queueing, publishing, dispatch
bookkeeping, applying ACKs) are measured with the whole broker: `bench/broker_cpu.py
--profile`. Numbers only; asserts nothing.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from emubroker.topics.entry import RunInfos
from protocol import commands as c
from protocol.codec import encode_command, encode_record
from protocol.framing import (
    FrameDecoder,
    checksum,
    encode_message_heads,
    encode_send_frame,
    encode_send_receipt_frames,
)
from protocol.runs import SendRun
from protocol.wire import parse_ack

FIRST_ID = 20_000
PUBLISH_TIME = 1_764_000_000_000


def send_chunk(n: int) -> tuple[bytes, list[SendRun]]:
    """N SEND frames as the official client writes them, joined, and the runs they make."""
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
    runs = []
    while (run := decoder.next_send_run()) is not None:
        runs.append(run)
    assert sum(map(len, runs)) == n, "the SENDs must be on the fast lane (protocol.runs)"
    return chunk, runs


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
    chunk, runs = send_chunk(n)
    entries = [entry for run in runs for entry in run.entries]
    ids = list(range(FIRST_ID, FIRST_ID + n))
    positions = [(0, i) for i in ids]
    ack = ack_body(min(n, 1000))
    assert parse_ack(ack, 0, len(ack)) is not None, "the ACK must be on the fast lane"

    def split_and_decode() -> None:
        decoder = FrameDecoder()
        decoder.feed(chunk)
        while decoder.next_send_run() is not None:
            pass

    infos = RunInfos()
    infos.read(runs[0])  # the template, learnt from the producer's first entry

    def metadata() -> None:
        for run in runs:
            infos.read(run)

    def crc() -> None:
        for entry in entries:
            checksum(entry)

    def receipts() -> None:
        encode_send_receipt_frames(0, ids, positions)

    sizes = [130] * n

    def heads() -> None:
        encode_message_heads(0, 0, FIRST_ID, -1, sizes)

    def acks() -> None:
        for _ in range(n // 1000 or 1):
            parse_ack(ack, 0, len(ack))

    parts = [
        ("split the read into runs of SENDs", split_and_decode),
        ("the entries' infos (RunInfos)", metadata),
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
