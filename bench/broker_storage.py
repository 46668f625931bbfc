"""Produce -> consume throughput of a broker over the bookie stub: in-process vs separate process.

Usage: python bench/broker_storage.py [--messages N] [--size BYTES] [--batched]

Runs three set-ups with the official ``pulsar-client`` (one producer with async sends, one
consumer receiving and acknowledging, both in this process) and prints messages per second
end to end, first send to last receive:

- ``memory``: ``emubroker standalone`` (in-memory ledger store, today's default);
- ``in-process stub``: ``emubroker standalone --data-dir DIR`` (durable stub hosted in the
  broker process, reached through the local client: no RPC);
- ``external stub``: ``storage-stub serve --data-dir DIR`` and ``emubroker broker
  --metadata-url/--bookie-url`` against it (every add and read is a TCP round trip).

Numbers only; asserts nothing. Bounded: every run stops after ``--messages`` messages.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pulsar

ROOT = Path(__file__).resolve().parents[1]
_READY = re.compile(r"ready.*?(pulsar://\S+|stub://\S+)")


@contextlib.contextmanager
def _process(*args: str) -> Iterator[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", *args, "--log-level", "WARNING"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    url = ""
    for line in proc.stdout:
        if match := _READY.search(line):
            url = match[1]
            break
    drain = threading.Thread(target=lambda: [None for _ in proc.stdout or ()], daemon=True)
    drain.start()
    try:
        if not url:
            raise SystemExit(f"{args} did not start")
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        drain.join(5)
        proc.stdout.close()


def _run(service_url: str, messages: int, size: int, batched: bool) -> float:
    client = pulsar.Client(service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    topic = f"persistent://public/default/bench-{time.monotonic_ns()}"
    consumer = client.subscribe(topic, "bench", receiver_queue_size=1000)
    producer = client.create_producer(
        topic, batching_enabled=batched, max_pending_messages=1000, block_if_queue_full=True
    )
    payload = b"x" * size
    start = time.monotonic()
    for _ in range(messages):
        producer.send_async(payload, None)
    for _ in range(messages):
        consumer.acknowledge(consumer.receive(30_000))
    elapsed = time.monotonic() - start
    client.close()
    return messages / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--batched", action="store_true")
    args = parser.parse_args()
    broker = ("emubroker", "standalone", "--port", "0", "--admin-port", "0")
    rows = []
    with _process(*broker) as url:
        rows.append(("memory", _run(url, args.messages, args.size, args.batched)))
    with tempfile.TemporaryDirectory() as d, _process(*broker, "--data-dir", d) as url:
        rows.append(("in-process stub", _run(url, args.messages, args.size, args.batched)))
    with (
        tempfile.TemporaryDirectory() as d,
        _process("storage_stub", "serve", "--port", "0", "--data-dir", d) as stub,
        _process(
            "emubroker",
            "broker",
            "--port",
            "0",
            "--admin-port",
            "0",
            "--metadata-url",
            stub,
            "--bookie-url",
            stub,
        ) as url,
    ):
        rows.append(("external stub", _run(url, args.messages, args.size, args.batched)))
    kind = "batched" if args.batched else "unbatched"
    print(f"{args.messages} {kind} messages of {args.size} B, produce -> consume:")
    for name, rate in rows:
        print(f"  {name:<16} {rate:>10,.0f} msg/s")


if __name__ == "__main__":
    main()
