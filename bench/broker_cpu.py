"""Broker CPU per message on the produce -> consume hot path, with the official client.

Usage: python bench/broker_cpu.py [--messages N] [--batched-messages N] [--sizes 100,1024]
                                  [--only unbatched|batched] [--no-split] [--no-warmup]
                                  [--profile OUT.prof]

Starts ``emubroker standalone`` as a subprocess and, for unbatched and batched producers and each
payload size, produces N messages with the official ``pulsar-client`` while one consumer receives
and acknowledges them. It samples the CPU time (user + system, psutil) of the broker process and
of the client process(es) around each run and prints, per run:

- ``broker us/msg``: the broker's CPU per message, the number the hot path work is judged by
  (it does not depend on how fast the client is, as long as the broker is not idle-spinning);
- ``client us/msg``: the client side's CPU per message (all client processes together);
- ``e2e msg/s``: end to end rate, first send to last receive;
- ``broker sys %``: the kernel's share of the broker's CPU (its system time over user + system);
- ``faults/kmsg``: the broker's minor page faults per 1,000 messages (``/proc/PID/stat``), the
  copies it makes into fresh memory.

Before the measured runs the broker first runs, unmeasured, each mode and size it will measure
(20,000 unbatched / 100,000 batched messages, on a topic of their own, one client process), so
that the figures are the broker's steady state: a load experiment runs for minutes, and the first
run on a fresh broker also pays its one-time costs (the first topic, producer and consumer, codec
plans and modules built or imported on first use, the allocator's growth). ``--no-warmup`` measures
the first runs instead, as this bench did before.

Each case runs twice: once with producer and consumer in this process ("1 proc"; the official
Python client pays ~15 us/msg of its own, so batched e2e is client bound) and once with the
producer and the consumer in two separate client processes ("2 procs"), which spreads the client
cost over processes (on a 2-core machine the three processes still share two cores).

Last, the "relay floor": the CPU an anyio session that only relays bytes (a reader task and a
writer task, as the broker's session) spends per entry of a batched run's size, fed one entry
per read. Batched broker CPU per message cannot go below it divided by the messages per entry.
Each size is also relayed on the raw non-blocking socket ("raw socket": ``recv``/``send`` tried
first, ``anyio.wait_readable``/``wait_writable`` only when the socket is not ready), what a byte
stream of our own under the session could cost instead of anyio's.

``--profile OUT.prof`` runs the broker under cProfile in CPU time (``time.process_time``), from
the end of the warm-up (or of the start with ``--no-warmup``), and writes the profile when it
stops (it is stopped with SIGINT, which the broker handles cleanly); CPU numbers of such a run
are inflated by the profiler. Numbers only; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BROKER_ARGS = ("--admin-port", "0", "--log-level", "WARNING")
# The unmeasured warm-up run of each mode (at most the measured run's length).
WARMUP_MESSAGES = {False: 20_000, True: 100_000}

# The broker under a CPU-time cProfile (python -c SOURCE OUT ARGS...): process time, not wall
# time, so that waits (a `send` the kernel completes later, an idle loop) are not counted. It
# profiles from the SIGUSR1 the bench sends after the warm-up, so that the profile is of the
# steady state, not of the start and the first runs.
PROFILED_BROKER = """
import cProfile, signal, sys, time
from emubroker.__main__ import main
profile = cProfile.Profile(time.process_time)
signal.signal(signal.SIGUSR1, lambda *_: profile.enable())
try:
    code = main(sys.argv[2:])
finally:
    profile.disable()
    profile.dump_stats(sys.argv[1])
sys.exit(code)
"""


@contextlib.contextmanager
def broker_process(profile: str | None) -> Iterator[tuple[str, psutil.Process]]:
    """Run ``emubroker standalone`` on free ports; yield its service URL and process."""
    runner = ["-c", PROFILED_BROKER, profile] if profile else ["-m", "emubroker"]
    proc = subprocess.Popen(
        [sys.executable, *runner, "standalone", "--port", "0", *BROKER_ARGS],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        url = None
        deadline = time.monotonic() + 30
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
        yield url, psutil.Process(proc.pid)
    finally:
        proc.send_signal(signal.SIGINT)  # a clean stop, so that cProfile writes its file
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def cpu_seconds(processes: list[psutil.Process]) -> float:
    """User + system CPU seconds of the processes (children excluded)."""
    total = 0.0
    for p in processes:
        times = p.cpu_times()
        total += times.user + times.system
    return total


def broker_split(p: psutil.Process) -> tuple[float, float, int]:
    """The broker's user and system CPU seconds and its minor page faults (Linux /proc)."""
    times = p.cpu_times()
    try:
        with open(f"/proc/{p.pid}/stat") as f:
            minflt = int(f.read().rsplit(")", 1)[1].split()[7])
    except OSError:
        minflt = 0
    return times.user, times.system, minflt


def producer_options(batched: bool) -> dict[str, object]:
    return {
        "batching_enabled": batched,
        "batching_max_messages": 1000,
        "batching_max_publish_delay_ms": 5,
        "max_pending_messages": 5000,
        "block_if_queue_full": True,
    }


def run_one_process(url: str, n: int, size: int, batched: bool) -> tuple[float, float]:
    """Produce and consume in this process; returns (elapsed seconds, client CPU seconds)."""
    import pulsar

    client = pulsar.Client(url, operation_timeout_seconds=30)
    me = psutil.Process()
    try:
        topic = f"cpu-{uuid.uuid4().hex[:8]}"
        consumer = client.subscribe(topic, "bench", receiver_queue_size=5000)
        producer = client.create_producer(topic, **producer_options(batched))
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
        c0 = cpu_seconds([me])
        start = time.perf_counter()
        thread.start()
        for _ in range(n):
            producer.send_async(payload, None)
        producer.flush()
        done.wait(300)
        elapsed = time.perf_counter() - start
        c1 = cpu_seconds([me])
        if received < n:
            raise RuntimeError(f"received {received} of {n}")
        return elapsed, c1 - c0
    finally:
        client.close()


# The two-process run: each side is this file run with --role; they report CLOCK_MONOTONIC
# stamps (system-wide on Linux) so that the parent can compute the end-to-end time.


def role_consumer(url: str, topic: str, n: int) -> None:
    import pulsar

    client = pulsar.Client(url, operation_timeout_seconds=30)
    consumer = client.subscribe(topic, "bench", receiver_queue_size=5000)
    print("ready", flush=True)
    for _ in range(n):
        msg = consumer.receive(30_000)
        consumer.acknowledge(msg)
    print(f"end {time.monotonic()!r}", flush=True)
    client.close()


def role_producer(url: str, topic: str, n: int, size: int, batched: bool) -> None:
    import pulsar

    client = pulsar.Client(url, operation_timeout_seconds=30)
    producer = client.create_producer(topic, **producer_options(batched))
    payload = b"x" * size
    print("ready", flush=True)
    sys.stdin.readline()  # go
    print(f"start {time.monotonic()!r}", flush=True)
    for _ in range(n):
        producer.send_async(payload, None)
    producer.flush()
    client.close()


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # the C++ client logs to stderr
        text=True,
        cwd=ROOT,
    )


def _expect(proc: subprocess.Popen[str], word: str) -> str:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"client process ended before printing {word!r}")
        if line.startswith(word):
            return line


def run_two_processes(url: str, n: int, size: int, batched: bool) -> tuple[float, float]:
    """Producer and consumer in two processes; returns (elapsed seconds, client CPU seconds)."""
    topic = f"cpu2-{uuid.uuid4().hex[:8]}"
    common = ["--url", url, "--topic", topic, "--messages", str(n)]
    consumer = _spawn("--role", "consumer", *common)
    producer: subprocess.Popen[str] | None = None
    try:
        _expect(consumer, "ready")
        extra = ["--batched"] if batched else []
        producer = _spawn("--role", "producer", *common, "--size", str(size), *extra)
        _expect(producer, "ready")
        procs = [psutil.Process(consumer.pid), psutil.Process(producer.pid)]
        c0 = cpu_seconds(procs)
        assert producer.stdin is not None
        producer.stdin.write("go\n")
        producer.stdin.flush()
        start = float(_expect(producer, "start").split()[1])
        end = float(_expect(consumer, "end").split()[1])
        c1 = cpu_seconds(procs)
        return end - start, c1 - c0
    finally:
        for proc in (producer, consumer):
            if proc is not None:
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


# The I/O floor: an anyio session that does nothing but relay what it reads (a reader task and a
# writer task woken by an Event, as emubroker.net.session does), fed entries one by one.
RELAY_SOURCE = """
import anyio
from anyio.abc import SocketAttribute

async def handle(stream):
    outbox = []
    wake = anyio.Event()

    async def writer():
        nonlocal wake
        while True:
            if not outbox:
                wake = anyio.Event()
                await wake.wait()
                continue
            out = b"".join(outbox)
            outbox.clear()
            await stream.send(out)

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)
        while True:
            try:
                data = await stream.receive(256 * 1024)
            except anyio.EndOfStream:
                tg.cancel_scope.cancel()
                return
            outbox.append(data)
            wake.set()

async def main():
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    print(listener.extra(SocketAttribute.local_port), flush=True)
    await listener.serve(handle)

anyio.run(main)
"""

# The same relay on the raw non-blocking socket: recv/send tried first, anyio only waits when the
# socket has nothing to read or no room (no transport, no pause/resume per read, no checkpoint
# after a send). What a byte stream of our own under the session could save (performance.md).
RAW_RELAY_SOURCE = """
import anyio, socket

async def handle(sock):
    sock.setblocking(False)
    outbox = []
    wake = anyio.Event()

    async def writer():
        nonlocal wake
        while True:
            if not outbox:
                wake = anyio.Event()
                await wake.wait()
                continue
            out = memoryview(b"".join(outbox))
            outbox.clear()
            while out:
                try:
                    out = out[sock.send(out):]
                except BlockingIOError:
                    await anyio.wait_writable(sock)

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)
        while True:
            try:
                data = sock.recv(256 * 1024)
            except BlockingIOError:
                await anyio.wait_readable(sock)
                continue
            if not data:
                tg.cancel_scope.cancel()
                return
            outbox.append(data)
            wake.set()

async def main():
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    print(listener.getsockname()[1], flush=True)
    async with anyio.create_task_group() as tg:
        while True:
            await anyio.wait_readable(listener)
            tg.start_soon(handle, listener.accept()[0])

anyio.run(main)
"""


def relay_floor(entry_size: int, entries: int = 1000, source: str = RELAY_SOURCE) -> float:
    """CPU seconds per entry of a relay above, entries written one at a time."""
    proc = subprocess.Popen([sys.executable, "-c", source], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        relay = psutil.Process(proc.pid)
        sock = socket.create_connection(("127.0.0.1", port))
        received = 0

        def drain() -> None:
            nonlocal received
            while received < entries * entry_size:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    break
                received += len(chunk)

        thread = threading.Thread(target=drain)
        c0 = cpu_seconds([relay])
        thread.start()
        entry = b"x" * entry_size
        for _ in range(entries):
            sock.sendall(entry)
            time.sleep(0.0005)  # one entry per read, as batches arrive
        thread.join(60)
        c1 = cpu_seconds([relay])
        sock.close()
        return (c1 - c0) / entries
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=30_000, help="unbatched run length")
    parser.add_argument("--batched-messages", type=int, default=200_000, help="batched run length")
    parser.add_argument("--sizes", default="100,1024", help="payload sizes in bytes")
    parser.add_argument("--only", choices=["unbatched", "batched"])
    parser.add_argument("--no-split", action="store_true", help="skip the two-process runs")
    parser.add_argument("--no-floor", action="store_true", help="skip the anyio relay floor")
    parser.add_argument(
        "--no-warmup", action="store_true", help="measure the broker's first runs (no warm-up)"
    )
    parser.add_argument("--profile", help="run the broker under cProfile, write stats here")
    # Internal: the client processes of the two-process run.
    parser.add_argument("--role", choices=["producer", "consumer"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, default=100, help=argparse.SUPPRESS)
    parser.add_argument("--batched", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "consumer":
        role_consumer(args.url, args.topic, args.messages)
        return
    if args.role == "producer":
        role_producer(args.url, args.topic, args.messages, args.size, args.batched)
        return

    sizes = [int(s) for s in args.sizes.split(",")]
    cases = [
        b
        for b in (False, True)
        if args.only is None or args.only == ("batched" if b else "unbatched")
    ]
    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}")
    print(
        f"{'mode':<10} {'payload':>7} {'clients':>8} {'broker us/msg':>14} "
        f"{'client us/msg':>14} {'e2e msg/s':>10} {'broker sys %':>12} {'faults/kmsg':>11}"
    )
    with broker_process(args.profile) as (url, broker):
        if not args.no_warmup:
            warmups = []
            for batched in cases:
                n = args.batched_messages if batched else args.messages
                warm = min(n, WARMUP_MESSAGES[batched])
                for size in sizes:
                    run_one_process(url, warm, size, batched)
                warmups.append(f"{warm} {'batched' if batched else 'unbatched'}")
            print(f"warm-up (not measured): {', '.join(warmups)} per size, 1 proc", flush=True)
        else:
            print("no warm-up: the broker's first runs", flush=True)
        if args.profile:
            broker.send_signal(signal.SIGUSR1)  # the profile starts here
        for batched in cases:
            n = args.batched_messages if batched else args.messages
            for size in sizes:
                runs = ["1 proc"] if args.no_split else ["1 proc", "2 procs"]
                for clients in runs:
                    b0 = cpu_seconds([broker])
                    u0, s0, f0 = broker_split(broker)
                    if clients == "1 proc":
                        elapsed, client_cpu = run_one_process(url, n, size, batched)
                    else:
                        elapsed, client_cpu = run_two_processes(url, n, size, batched)
                    b1 = cpu_seconds([broker])
                    u1, s1, f1 = broker_split(broker)
                    sys_share = (s1 - s0) / max(u1 - u0 + s1 - s0, 1e-9) * 100
                    mode = "batched" if batched else "unbatched"
                    print(
                        f"{mode:<10} {size:>7} {clients:>8} {(b1 - b0) / n * 1e6:>14.2f} "
                        f"{client_cpu / n * 1e6:>14.2f} {n / elapsed:>10.0f} {sys_share:>12.0f}"
                        f" {(f1 - f0) / n * 1000:>11.1f}",
                        flush=True,
                    )
    if not args.no_floor:
        # What one entry costs the I/O stack alone: batched broker CPU per message can only go
        # this low times the messages per entry (~450 of 100 B, ~120 of 1 KiB for the client).
        print()
        print(f"{'anyio relay floor':<27} {'entry B':>7} {'us/entry':>9} {'us/msg at N/entry':>18}")
        # 90 KB: 813 messages of 100 B, what a batched producer sends now (performance.md).
        for entry_size, per_entry in ((45_000, 450), (90_000, 813), (128 * 1024, 120)):
            for label, source in (("stream", RELAY_SOURCE), ("raw socket", RAW_RELAY_SOURCE)):
                floor = relay_floor(entry_size, source=source)
                print(
                    f"{label:<27} {entry_size:>7} {floor * 1e6:>9.0f} "
                    f"{floor / per_entry * 1e6:>12.2f} (N={per_entry})",
                    flush=True,
                )


if __name__ == "__main__":
    main()
