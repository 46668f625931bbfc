"""Produce->consume throughput through one broker process, beside a raw loopback relay.

Usage: python bench/throughput.py [--messages N] [--only official|protocol|relay]
                                  [--processes 1|2|both] [--sizes 100,1024] [--rounds 3]

Starts ``emubroker standalone`` as a subprocess, then for each client (the official
``pulsar-client`` and our ``protocol.client``), batching on/off and payloads of 100 B / 1 KiB,
produces N messages as fast as the client pipelines them while one consumer receives and acks
each of them, with producer and consumer in one client process and in two (a producer process
and a consumer process, as a load generator runs them). In the same run it measures a raw
loopback relay of the same bytes (sender -> relay process -> receiver, no protocol work) and
prints every rate as a ratio against it, because absolute numbers on shared machines move from
run to run while ratios measured side by side do not. Numbers are messages per second, end to
end (first send to last receive). Every case runs `--rounds` times, round after round, and the
table shows its best and its median run, with the median run's CPU per message.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FRAME_OVERHEAD = 60  # approx. bytes of command + metadata around an unbatched payload


@contextlib.contextmanager
def broker_process() -> Iterator[tuple[str, str, psutil.Process]]:
    """Run ``emubroker standalone`` on free ports; yield its service URL, admin URL and process."""
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
        url = admin = None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            match = re.search(r"(pulsar://\S+).*(http://\S+)", line)
            if "ready" in line and match:
                url, admin = match.groups()
                break
        if url is None or admin is None:
            raise RuntimeError("broker did not print a ready line")
        threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep the pipe drained
        yield url, admin, psutil.Process(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def new_topic() -> str:
    return f"bench-{uuid.uuid4().hex[:12]}"


def delete_topic(admin: str, topic: str) -> None:
    """Drop a finished case's topic, so the broker's memory stays flat from case to case.

    The in-memory store keeps a topic's entries until its ledger rolls over. A broker that
    keeps growing touches fresh memory all the time, and on this kind of VM the kernel's page
    zeroing then costs 3-22 µs per 4 KiB page depending on how much was touched before: with
    1 KiB payloads that swung the broker's CPU per message 3x from case to case.
    """
    url = f"{admin}/admin/v2/persistent/public/default/{topic}?force=true"
    urllib.request.urlopen(urllib.request.Request(url, method="DELETE"), timeout=30).close()


def bench_official(
    url: str, topic: str, n: int, size: int, batched: bool, role: str = "both"
) -> tuple[float, float]:
    """Official client; `role` is "both" (one process), "produce" or "consume" (see `run_split`).

    Returns:
        For "both", msg/s; for a split role, the `perf_counter` time of its first send
        ("produce") or its last receive ("consume"), which `run_split` turns into a rate. Then
        the CPU seconds this process spent moving the messages (set-up not included).
    """
    import pulsar

    client = pulsar.Client(
        url,
        operation_timeout_seconds=30,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    try:
        consumer = producer = None
        if role != "produce":
            consumer = client.subscribe(topic, "bench", receiver_queue_size=5000)
        if role != "consume":
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
        finished_at = 0.0

        def consume() -> None:
            nonlocal finished_at
            assert consumer is not None
            for _ in range(n):
                consumer.acknowledge(consumer.receive(30_000))
            finished_at = time.perf_counter()
            done.set()

        cpu = cpu_seconds()
        if producer is None:
            _signal_ready()
            consume()
            return finished_at, cpu_seconds() - cpu
        thread = threading.Thread(target=consume, daemon=True)
        start = time.perf_counter()
        if consumer is not None:
            thread.start()
        for _ in range(n):
            producer.send_async(payload, None)
        producer.flush()
        if consumer is None:
            return start, cpu_seconds() - cpu
        if not done.wait(120):
            raise RuntimeError("the consumer did not receive every message")
        return n / (finished_at - start), cpu_seconds() - cpu
    finally:
        client.close()


def bench_protocol(
    url: str, topic: str, n: int, size: int, batched: bool, role: str = "both"
) -> tuple[float, float]:
    """`protocol.client`; `role` as for `bench_official`."""
    import anyio

    from protocol.client import open_client

    async def run() -> tuple[float, float]:
        async with open_client(url) as client:
            consumer = producer = None
            if role != "produce":
                consumer = await client.subscribe(topic, "bench", receiver_queue_size=5000)
            if role != "consume":
                producer = await client.create_producer(
                    topic, batching_enabled=batched, max_pending_messages=5000
                )
            payload = b"x" * size
            finished_at = 0.0

            async def consume() -> None:
                nonlocal finished_at
                assert consumer is not None
                for _ in range(n):
                    consumer.acknowledge(await consumer.receive())
                finished_at = time.perf_counter()

            cpu = cpu_seconds()
            if producer is None:
                _signal_ready()
                await consume()
                return finished_at, cpu_seconds() - cpu
            start = time.perf_counter()
            async with anyio.create_task_group() as tg:
                if consumer is not None:
                    tg.start_soon(consume)
                for _ in range(n):
                    await producer.send_async(payload)
                await producer.flush()
            if consumer is None:
                return start, cpu_seconds() - cpu
            return n / (finished_at - start), cpu_seconds() - cpu

    return anyio.run(run)


def _signal_ready() -> None:
    print("ready", flush=True)


CLIENTS = {"official": bench_official, "protocol": bench_protocol}
CLIENT_NAMES = (("official", "official pulsar-client"), ("protocol", "protocol.client"))


def cpu_seconds() -> float:
    """User + system CPU of this process, all threads (the official client's C++ ones too)."""
    times = os.times()
    return times.user + times.system


def run_split(
    client: str, url: str, topic: str, n: int, size: int, batched: bool
) -> tuple[float, float]:
    """Producer and consumer in two processes: end to end from first send to last receive.

    Both stamp `time.perf_counter()`, which is the system-wide monotonic clock on Linux, so the
    two processes' readings can be subtracted.

    Returns:
        msg/s, and the CPU seconds both client processes spent moving the messages.
    """
    common = [url, topic, str(n), str(size), str(int(batched))]
    script = os.path.abspath(__file__)

    def spawn(role: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, script, "--role", role, client, *common],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )

    consumer = spawn("consume")
    try:
        assert consumer.stdout is not None
        if consumer.stdout.readline().strip() != "ready":
            raise RuntimeError("the consumer process did not subscribe")
        producer = spawn("produce")
        out, _ = producer.communicate(timeout=180)
        if producer.returncode:
            raise RuntimeError(f"the producer process failed ({producer.returncode})")
        started, producer_cpu = map(float, out.split()[-2:])
        out, _ = consumer.communicate(timeout=180)
        if consumer.returncode:
            raise RuntimeError(f"the consumer process failed ({consumer.returncode})")
        finished, consumer_cpu = map(float, out.split()[-2:])
        return n / (finished - started), producer_cpu + consumer_cpu
    finally:
        consumer.kill()


def run_role(argv: list[str]) -> None:
    """Entry point of one side of `run_split`: prints its timestamp and CPU seconds last."""
    role, client, url, topic, n, size, batched = argv
    stamp, cpu = CLIENTS[client](url, topic, int(n), int(size), batched == "1", role)
    print(stamp, cpu, flush=True)


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
    if sys.argv[1:2] == ["--role"]:
        run_role(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--only", choices=["official", "protocol", "relay"])
    parser.add_argument(
        "--processes",
        choices=["1", "2", "both"],
        default="both",
        help="client processes: producer and consumer in one, in two, or each case both ways",
    )
    parser.add_argument("--sizes", default="100,1024", help="payload sizes, comma-separated")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="times every case runs, round after round; the table shows the best and the median",
    )
    args = parser.parse_args()
    n = args.messages
    layouts = [1, 2] if args.processes == "both" else [int(args.processes)]
    sizes = [int(size) for size in args.sizes.split(",")]
    cases = [
        (client, name, size, batched, procs)
        for size in sizes
        for batched in (False, True)
        for client, name in CLIENT_NAMES
        if args.only in (None, client)
        for procs in layouts
    ]
    relays: dict[int, list[float]] = {size: [] for size in sizes}
    runs: dict[tuple[str, int, bool, int], list[Run]] = {}
    with broker_process() as (url, admin, broker):
        # Round after round rather than case after case: a noisy minute on a shared machine
        # then hits one run of several cases, not every run of one case.
        for _ in range(args.rounds):
            for size in sizes:
                relays[size].append(bench_relay(n, size))
            for client, name, size, batched, procs in cases:
                run = run_case(client, url, admin, broker, n, size, batched, procs)
                if run is not None:
                    runs.setdefault((name, size, batched, procs), []).append(run)
    print_table(relays, runs)


Run = tuple[float, float, float]
"""One run of one case: msg/s, client CPU µs per message, broker CPU µs per message."""


def run_case(
    client: str,
    url: str,
    admin: str,
    broker: psutil.Process,
    n: int,
    size: int,
    batched: bool,
    procs: int,
) -> Run | None:
    """One run of one case on a topic of its own; None (reported) if it failed."""
    broker_cpu = sum(broker.cpu_times()[:2])
    topic = new_topic()
    try:
        if procs == 1:
            rate, client_cpu = CLIENTS[client](url, topic, n, size, batched)
        else:
            rate, client_cpu = run_split(client, url, topic, n, size, batched)
    except Exception as exc:  # report and go on: one failure must not hide the rest
        case = f"{client} size={size} batched={batched} procs={procs}"
        print(f"{case}: FAILED {exc!r}", file=sys.stderr)
        return None
    broker_cpu = sum(broker.cpu_times()[:2]) - broker_cpu
    delete_topic(admin, topic)
    return rate, client_cpu / n * 1e6, broker_cpu / n * 1e6


def print_table(
    relays: dict[int, list[float]], runs: dict[tuple[str, int, bool, int], list[Run]]
) -> None:
    """Best and median msg/s per case; the ratio, CPU and bound columns are of the median run.

    The best run is what the code can do when the machine lets it: on a shared machine noise
    only ever slows a run down. The median says what to expect from a single run.
    """
    print(
        f"{'client':<24} {'payload':>7} {'batched':>7} {'procs':>5} {'best msg/s':>10}"
        f" {'median':>10} {'vs relay':>9} {'client us/msg':>13} {'broker us/msg':>13}"
        f" {'2-core bound':>12}"
    )
    for size, rates in relays.items():
        relay = statistics.median(rates)
        print(
            f"{'raw loopback relay':<24} {size:>7} {'False':>7} {1:>5} {max(rates):>10.0f}"
            f" {relay:>10.0f} {1.0:>9.2f}"
        )
        for (name, case_size, batched, procs), case_runs in runs.items():
            if case_size != size:
                continue
            ordered = sorted(case_runs)
            rate, client_us, broker_us = ordered[(len(ordered) - 1) // 2]  # the (lower) median
            bound = 2e6 / (client_us + broker_us)  # the most 2 cores could carry at this cost
            print(
                f"{name:<24} {size:>7} {batched!s:>7} {procs:>5} {ordered[-1][0]:>10.0f}"
                f" {rate:>10.0f} {rate / relay:>9.2f} {client_us:>13.1f} {broker_us:>13.1f}"
                f" {bound:>12.0f}"
            )


if __name__ == "__main__":
    main()
