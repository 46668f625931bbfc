"""What one misbehaving client costs the broker and everyone else: the abuse cases, measured.

Usage: python bench/abuse.py [--case NAME ...] [--seconds S] [--root DIR] [--config FILE]

Starts ``emubroker standalone`` (in memory; ``--root DIR`` runs the broker of another checkout,
e.g. an export of ``main``, for a side-by-side "before") and plays each case against it, printing
one table per case. Cases:

* ``receipts``: a producer (raw socket) sends 100 B messages as fast as the socket takes them and
  never reads its SEND_RECEIPTs. Broker RSS every second, and whether (when) the broker closes it.
* ``consumer``: a persistent topic flooded by the official client (batching, 1 KiB); one
  subscription's consumer (raw socket) grants 1,000,000 permits and never reads its socket.
  Baseline in the same broker: the same flood with that subscription's consumer gone (its backlog
  is stored the same way), so the difference is what is buffered for the stuck socket.
* ``flood``: a quiet official client (send, receive, ack, 10 ms pause) measures its round trips
  alone, then while 200 connections (4 processes) send 2 MiB SEND frames with random metadata as
  fast as the broker reads them. p50 / p99 / max of the quiet round trips, flood MiB/s.
* ``partial``: 50 connections each send all but the last byte of a 5 MiB frame and go silent.
  Broker RSS before and after, and how long until the broker hangs up on them.

Numbers only; asserts nothing. docs/reliability.md records a run and its command.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import multiprocessing
import os
import random
import resource
import selectors
import socket
import statistics
import struct
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from brokerproc import ROOT, Broker, broker_process
from rawpeer import RawPeer, metadata, send_frame

from protocol import commands as c
from protocol.framing import checksum, encode_frame

MIB = 1024 * 1024

BrokerFactory = Callable[[], contextlib.AbstractContextManager[Broker]]


def raise_fd_limit(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))


def topic_name(prefix: str) -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"


class RssSampler:
    """Samples a broker's RSS every ``period`` seconds in a thread."""

    def __init__(self, broker: Broker, period: float = 0.5) -> None:
        self.broker = broker
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._start = time.monotonic()
        self._period = period

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((time.monotonic() - self._start, self.broker.rss_mib()))
            except Exception:
                return
            self._stop.wait(self._period)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak(self) -> float:
        return max(rss for _, rss in self.samples)

    @property
    def last(self) -> float:
        return self.samples[-1][1]


# ---- receipts ----------------------------------------------------------------------------------


def case_receipts(start: BrokerFactory, seconds: float) -> None:
    with start() as broker:
        _receipts(broker, seconds)


def _receipts(broker: Broker, seconds: float) -> None:
    peer = RawPeer(broker.url)
    peer.handshake()
    name = peer.create_producer(topic_name("receipts"))
    chunk = b"".join(send_frame(1, i, metadata(name, i), b"x" * 100) for i in range(1000))
    sent = 0
    closed_at: float | None = None
    stop = threading.Event()
    start = time.monotonic()

    def flood() -> None:
        nonlocal sent, closed_at
        try:
            while not stop.is_set():
                peer.sock.sendall(chunk)
                sent += 1000
        except OSError:
            if not stop.is_set():
                closed_at = time.monotonic() - start

    peer.sock.settimeout(None)
    before = broker.rss_mib()
    with RssSampler(broker) as rss:
        thread = threading.Thread(target=flood, daemon=True)
        thread.start()
        thread.join(seconds)
        stop.set()
    with contextlib.suppress(OSError):  # already closed by the broker's keep-alive
        peer.sock.shutdown(socket.SHUT_RDWR)
    peer.close()
    thread.join()
    closed = f"closed at {closed_at:.1f} s" if closed_at is not None else "still open"
    print(f"{'RSS before':<14} {'peak':>8} {'at end':>8} {'SENDs written':>14}  connection")
    print(f"{before:>10.1f} MiB {rss.peak:>8.1f} {rss.last:>8.1f} {sent:>14,}  {closed}")


# ---- consumer ----------------------------------------------------------------------------------


def subscription_stats(broker: Broker, topic: str) -> dict[str, Any]:
    path = topic.replace("://", "/")
    with urllib.request.urlopen(f"{broker.admin}/admin/v2/{path}/stats", timeout=30) as resp:
        doc: dict[str, Any] = json.load(resp)
    return doc


def case_consumer(start: BrokerFactory, seconds: float) -> None:
    import pulsar

    print(
        f"{'run':<10} {'RSS before':>10} {'peak':>8} {'at end':>8} {'published':>11} {'msg/s':>9}"
        f" {'to stuck':>10}  stuck consumer"
    )
    for stuck in (False, True):
        with start() as broker:
            topic = topic_name("stuck")
            client = pulsar.Client(
                broker.url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
            )
            # The subscription exists in both runs, so its backlog is stored in both.
            client.subscribe(topic, "stuck").close()
            peer = None
            if stuck:
                peer = RawPeer(broker.url)
                peer.handshake()
                peer.subscribe(topic, "stuck")
                peer.command(c.Flow(consumer_id=1, message_permits=1_000_000))
            producer = client.create_producer(
                topic,
                batching_max_publish_delay_ms=5,
                max_pending_messages=5000,
                block_if_queue_full=True,
            )
            payload = b"x" * 1024
            before = broker.rss_mib()
            published = 0
            with RssSampler(broker) as rss:
                began = time.monotonic()
                while time.monotonic() - began < seconds:
                    for _ in range(1000):
                        producer.send_async(payload, None)
                    published += 1000
                producer.flush()
                elapsed = time.monotonic() - began
            state = "-"
            to_stuck = "-"
            if peer is not None:
                doc = subscription_stats(broker, topic)["subscriptions"]["stuck"]
                to_stuck = f"{sum(c['msgOutCounter'] for c in doc['consumers']):,}"
                state = peer_state(peer)
                peer.close()
            print(
                f"{'stuck' if stuck else 'baseline':<10} {before:>10.1f} {rss.peak:>8.1f}"
                f" {rss.last:>8.1f} {published:>11,} {published / elapsed:>9,.0f}"
                f" {to_stuck:>10}  {state}"
            )
            client.close()


def peer_state(peer: RawPeer) -> str:
    """ "open", or "closed by broker" when its socket reads EOF (what is buffered is skipped)."""
    peer.sock.setblocking(False)
    try:
        while True:
            data = peer.sock.recv(1 << 20)
            if not data:
                return "closed by broker"
    except BlockingIOError:
        return "open"
    except OSError:
        return "closed by broker"


# ---- flood / fairness --------------------------------------------------------------------------


def random_send(rng: random.Random, size: int) -> bytes:
    """A SEND frame of about ``size`` bytes whose metadata is random bytes (checksum correct)."""
    meta = rng.randbytes(rng.randrange(1, 2048))
    payload = rng.randbytes(1024) * (size // 1024)
    entry = struct.pack(">I", len(meta)) + meta + payload
    body = encode_frame(c.Send(producer_id=1, sequence_id=rng.randrange(1 << 32)))[8:]
    crc = struct.pack(">HI", 0x0E01, checksum(entry))
    return struct.pack(">II", 4 + len(body) + len(crc) + len(entry), len(body)) + body + crc + entry


def flooder(url: str, connections: int, frame_size: int, seconds: float, out: object) -> None:
    """One flooding process: ``connections`` sockets, each sending random SENDs, reads drained."""
    raise_fd_limit(4096)
    rng = random.Random(os.getpid())
    frames = [random_send(rng, frame_size) for _ in range(4)]
    selector = selectors.DefaultSelector()
    peers = []
    for _ in range(connections):
        peer = RawPeer(url)
        peer.handshake()
        peer.create_producer(topic_name("flood"))
        peer.sock.setblocking(False)
        state = {"view": memoryview(frames[rng.randrange(4)]), "peer": peer}
        selector.register(peer.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, state)
        peers.append(peer)
    sent = 0
    closed = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and selector.get_map():
        for key, events in selector.select(0.5):
            state = key.data
            sock = key.fileobj
            try:
                if events & selectors.EVENT_READ and not sock.recv(1 << 16):
                    selector.unregister(sock)
                    closed += 1
                    continue
                if events & selectors.EVENT_WRITE:
                    n = sock.send(state["view"])
                    sent += n
                    state["view"] = state["view"][n:]
                    if not state["view"]:
                        state["view"] = memoryview(frames[rng.randrange(4)])
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                selector.unregister(sock)
                closed += 1
    out.put((sent, closed))  # type: ignore[attr-defined]
    for peer in peers:
        peer.close()


def quiet_round_trips(url: str, seconds: float) -> list[float]:
    """Send one message, receive it, ack it, pause 10 ms; the round trips in ms."""
    import pulsar

    client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    topic = topic_name("quiet")
    consumer = client.subscribe(topic, "quiet")
    producer = client.create_producer(topic, batching_enabled=False)
    out: list[float] = []
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            start = time.perf_counter()
            producer.send(b"q" * 100)
            message = consumer.receive(60_000)
            out.append((time.perf_counter() - start) * 1000)
            consumer.acknowledge(message)
            time.sleep(0.01)
    finally:
        client.close()
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def case_flood(start: BrokerFactory, seconds: float) -> None:
    with start() as broker:
        _flood(broker, seconds)


def _flood(broker: Broker, seconds: float, connections: int = 200, processes: int = 4) -> None:
    print(
        f"{'run':<8} {'round trips':>11} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"
        f" {'flood MiB/s':>12} {'RSS peak':>9}  flooders closed"
    )
    for flooding in (False, True):
        procs = []
        queue: multiprocessing.Queue[tuple[int, int]] = multiprocessing.Queue()
        if flooding:
            for _ in range(processes):
                proc = multiprocessing.Process(
                    target=flooder,
                    args=(broker.url, connections // processes, 2 * MIB, seconds + 5, queue),
                )
                proc.start()
                procs.append(proc)
            time.sleep(5)  # let every flooder connect and start
        with RssSampler(broker) as rss:
            trips = quiet_round_trips(broker.url, seconds)
        flooded = closed = 0
        for proc in procs:
            sent, lost = queue.get()
            flooded += sent
            closed += lost
            proc.join()
        rate = f"{flooded / MIB / (seconds + 5):>12.1f}" if flooding else f"{'-':>12}"
        print(
            f"{'flood' if flooding else 'quiet':<8} {len(trips):>11,} "
            f"{statistics.median(trips):>8.2f} {percentile(trips, 0.99):>8.2f}"
            f" {max(trips):>8.2f} {rate} {rss.peak:>9.1f}  {closed if flooding else '-'}"
        )


# ---- partial frames ----------------------------------------------------------------------------


def case_partial(start: BrokerFactory, seconds: float) -> None:
    with start() as broker:
        _partial(broker, seconds)


def _partial(broker: Broker, seconds: float, connections: int = 50) -> None:
    raise_fd_limit(4096)
    total = 5 * MIB
    head = struct.pack(">I", total)
    body = b"\0" * (total - 1)  # one byte short of the frame
    before = broker.rss_mib()
    peers = []
    for _ in range(connections):
        peer = RawPeer(broker.url)
        peer.handshake()
        peer.sock.settimeout(None)
        with contextlib.suppress(OSError):
            peer.send(head + body)
        peers.append(peer)
    time.sleep(1.0)
    held = broker.rss_mib()
    start = time.monotonic()
    open_peers = set(range(connections))
    reaped_at: list[float] = []
    selector = selectors.DefaultSelector()
    for i, peer in enumerate(peers):
        peer.sock.setblocking(False)
        selector.register(peer.sock, selectors.EVENT_READ, i)
    while open_peers and time.monotonic() - start < seconds:
        for key, _ in selector.select(0.5):
            try:
                data = key.fileobj.recv(1 << 16)  # type: ignore[union-attr]
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                selector.unregister(key.fileobj)
                open_peers.discard(key.data)
                reaped_at.append(time.monotonic() - start)
    after = broker.rss_mib()
    for peer in peers:
        peer.close()
    reaped = f"{len(reaped_at)} in {max(reaped_at):.1f} s" if reaped_at else "none"
    print(f"{'RSS before':>10} {'holding':>8} {'after':>8}  hung up on (within {seconds:.0f} s)")
    print(f"{before:>10.1f} {held:>8.1f} {after:>8.1f}  {reaped}")


CASES = {
    "receipts": case_receipts,
    "consumer": case_consumer,
    "flood": case_flood,
    "partial": case_partial,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", choices=sorted(CASES))
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--root", default=ROOT, help="checkout whose broker to run")
    parser.add_argument("--config", help="broker.conf for the broker")
    args = parser.parse_args()
    raise_fd_limit(8192)
    extra = ("--config", args.config) if args.config else ()
    for name in args.case or list(CASES):
        print(f"== {name} ({args.seconds:.0f} s, broker from {args.root})")
        CASES[name](functools.partial(broker_process, *extra, root=args.root), args.seconds)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
