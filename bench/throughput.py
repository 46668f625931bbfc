"""Produce->consume throughput through one broker process, beside a raw loopback relay.

Usage: python bench/throughput.py [--messages N] [--only official|protocol|relay]

Starts ``emubroker standalone`` as a subprocess, then for each client (the official
``pulsar-client`` and our ``protocol.client``), batching on/off and payloads of 100 B / 1 KiB,
produces N messages as fast as the client pipelines them while one consumer receives and acks
them. In the same run it measures a raw loopback relay of the same bytes (sender -> relay
process -> receiver, no protocol work) and prints every rate as a ratio against it, because
absolute numbers on shared machines move from run to run while ratios measured side by side
do not. Numbers are messages per second, end to end (first send to last receive).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FRAME_OVERHEAD = 60  # approx. bytes of command + metadata around an unbatched payload


@contextlib.contextmanager
def broker_process() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "emubroker", "standalone", "--port", "0", "--admin-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        url = None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            match = re.search(r"(pulsar://\S+)", line)
            if "ready" in line and match:
                url = match.group(1)
                break
        if url is None:
            raise RuntimeError("broker did not print a ready line")
        threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep the pipe drained
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def bench_official(url: str, n: int, size: int, batched: bool) -> float:
    import pulsar

    topic = f"bench-{uuid.uuid4().hex[:8]}"
    client = pulsar.Client(url, operation_timeout_seconds=30)
    try:
        consumer = client.subscribe(topic, "bench", receiver_queue_size=5000)
        producer = client.create_producer(
            topic,
            batching_enabled=batched,
            batching_max_messages=1000,
            batching_max_publish_delay_ms=5,
            max_pending_messages=5000,
            block_if_queue_full=True,
        )
        payload = b"x" * size
        done = threading.Event()
        received = 0

        def consume() -> None:
            nonlocal received
            while received < n:
                msg = consumer.receive(30_000)
                consumer.acknowledge(msg)
                received += 1
            done.set()

        thread = threading.Thread(target=consume, daemon=True)
        start = time.perf_counter()
        thread.start()
        for _ in range(n):
            producer.send_async(payload, None)
        producer.flush()
        done.wait(120)
        elapsed = time.perf_counter() - start
        if received < n:
            raise RuntimeError(f"received {received} of {n}")
        return n / elapsed
    finally:
        client.close()


def bench_protocol(url: str, n: int, size: int, batched: bool) -> float:
    import anyio

    from protocol.client import open_client

    async def run() -> float:
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        async with open_client(url) as client:
            consumer = await client.subscribe(topic, "bench", receiver_queue_size=5000)
            producer = await client.create_producer(
                topic, batching_enabled=batched, max_pending_messages=5000
            )
            payload = b"x" * size
            received = 0

            async def consume() -> None:
                nonlocal received
                while received < n:
                    msg = await consumer.receive()
                    consumer.acknowledge(msg)
                    received += 1

            start = time.perf_counter()
            async with anyio.create_task_group() as tg:
                tg.start_soon(consume)
                for _ in range(n):
                    await producer.send_async(payload)
                await producer.flush()
            return n / (time.perf_counter() - start)

    return anyio.run(run)


def bench_relay(n: int, size: int) -> float:
    """Sender -> relay process -> receiver over loopback, `size + overhead` bytes a message."""
    relay = subprocess.Popen(
        [sys.executable, "-c", RELAY_SOURCE], stdout=subprocess.PIPE, text=True
    )
    assert relay.stdout is not None
    port = int(relay.stdout.readline())
    frame = b"x" * (size + FRAME_OVERHEAD)
    total = len(frame) * n
    try:
        sender = socket.create_connection(("127.0.0.1", port))
        receiver = socket.create_connection(("127.0.0.1", port))
        receiver.sendall(b"R")
        sender.sendall(b"S")
        got = 0

        def drain() -> None:
            nonlocal got
            while got < total:
                chunk = receiver.recv(1 << 20)
                if not chunk:
                    break
                got += len(chunk)

        thread = threading.Thread(target=drain)
        start = time.perf_counter()
        thread.start()
        for _ in range(n):
            sender.sendall(frame)  # one write per message, like an unbatched producer
        thread.join(120)
        elapsed = time.perf_counter() - start
        sender.close()
        receiver.close()
        return n / elapsed
    finally:
        relay.kill()


RELAY_SOURCE = r"""
import socket, threading
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(2)
print(srv.getsockname()[1], flush=True)
conns = {}
while len(conns) < 2:
    c, _ = srv.accept(); conns[c.recv(1)] = c
src, dst = conns[b"S"], conns[b"R"]
while True:
    data = src.recv(1 << 20)
    if not data:
        break
    dst.sendall(data)
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--only", choices=["official", "protocol", "relay"])
    args = parser.parse_args()
    n = args.messages
    rows: list[tuple[str, int, bool, float, float]] = []
    with broker_process() as url:
        for size in (100, 1024):
            relay = bench_relay(n, size)
            rows.append(("raw loopback relay", size, False, relay, 1.0))
            for batched in (False, True):
                for name, fn in (
                    ("official pulsar-client", bench_official),
                    ("protocol.client", bench_protocol),
                ):
                    if args.only and args.only not in name:
                        continue
                    try:
                        rate = fn(url, n, size, batched)
                    except (
                        Exception
                    ) as exc:  # report and go on: one failing client must not hide the rest
                        print(
                            f"{name} size={size} batched={batched}: FAILED {exc!r}", file=sys.stderr
                        )
                        continue
                    rows.append((name, size, batched, rate, rate / relay))
    print(f"{'client':<24} {'payload':>7} {'batched':>7} {'msg/s':>10} {'vs relay':>9}")
    for name, size, batched, rate, ratio in rows:
        print(f"{name:<24} {size:>7} {batched!s:>7} {rate:>10.0f} {ratio:>9.2f}")


if __name__ == "__main__":
    main()
