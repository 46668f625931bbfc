"""Fuzz and soak: hostile traffic, many connections and kill -9, while good clients keep working.

Usage: python bench/fuzz.py [--case fuzz|connections|kill ...] [--frames N] [--seconds S]
                            [--connections N] [--rounds R] [--seed N] [--root DIR]

Cases (each on its own ``emubroker standalone``; ``--root DIR`` runs another checkout's broker):

* ``fuzz``: N generated frames (``tests/support/fuzz.py``: commands with random fields drawn from
  the hypothesis strategies, truncated, oversized, wrong checksums, unknown types, out of order,
  garbage) from 4 processes of 16 connections each, connection after connection, while a
  well-behaved official client publishes 200 msg/s to one topic and consumes them;
* ``connections``: 1,000 connections held open at once (each with a producer, every other one
  with a consumer, all answering PING) while the well-behaved client runs;
* ``kill``: a durable broker (``--data-dir``) is killed with SIGKILL R times while a producer
  publishes as fast as it can and a consumer acknowledges; after the last round a fresh broker on
  the same directory delivers the rest. Every message whose publish was acknowledged must have
  been received (duplicates are allowed: delivery is at least once).

The report: broker crashes (the process died, or logged an ERROR), the well-behaved client's
latency (publish to receive) and throughput alone and under the load, broker memory before,
during and after, and acknowledged messages lost. docs/reliability.md records a run.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import selectors
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import contextlib

from brokerproc import ROOT, Broker, start_broker, stop_broker
from rawpeer import RawPeer
from wellbehaved import GOOD_HEADER, BrokerLog, GoodRun, well_behaved

from protocol import commands as c
from protocol.framing import FrameDecoder, encode_frame

FD_LIMIT = 8192


def raise_fd_limit(wanted: int = FD_LIMIT) -> None:
    """Raise the soft RLIMIT_NOFILE (the broker, started afterwards, inherits it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))


def start(args: argparse.Namespace, *extra: str) -> tuple[Broker, BrokerLog]:
    broker = start_broker(*extra, root=args.root, drain=False)
    return broker, BrokerLog(broker)


# ---- fuzz ------------------------------------------------------------------------------------


def fuzz_worker(url: str, seed: int, frames: int, threads: int, out: object, go: object) -> None:
    """One process of hostile connections: sessions of generated frames, one after another."""
    from tests.support.fuzz import FuzzTraffic

    traffic = FuzzTraffic(seed, pool_size=1_000)
    out.put({"ready": 1})  # type: ignore[attr-defined]  # the pool is drawn: CPU-heavy, not load
    go.wait()  # type: ignore[attr-defined]
    host, port = url.removeprefix("pulsar://").rsplit(":", 1)
    lock = threading.Lock()
    counts = {"frames": 0, "sessions": 0, "hung": 0}

    def next_session() -> bytes | None:
        with lock:
            if counts["frames"] >= frames:
                return None
            data, n = traffic.session(frames_wanted=20)
            counts["frames"] += n
            counts["sessions"] += 1
            return data

    def run() -> None:
        while (data := next_session()) is not None:
            try:
                sock = socket.create_connection((host, int(port)), timeout=10)
            except OSError:
                continue
            try:
                sock.sendall(data)
                sock.shutdown(socket.SHUT_WR)
                while sock.recv(1 << 16):  # until the broker hangs up
                    pass
            except TimeoutError:
                with lock:
                    counts["hung"] += 1
            except OSError:
                pass  # closed while we were still writing: a refused frame
            finally:
                sock.close()

    began = time.monotonic()
    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    counts["ms"] = int((time.monotonic() - began) * 1000)
    counts.update({f"kind:{k}": v for k, v in traffic.kinds.items()})
    out.put(counts)  # type: ignore[attr-defined]


def case_fuzz(args: argparse.Namespace) -> None:
    broker, log = start(args)
    try:
        rss_start = broker.rss_mib()
        quiet = well_behaved(broker.url, args.seconds)
        rss_before = broker.rss_mib()
        queue: multiprocessing.Queue[dict[str, int]] = multiprocessing.Queue()
        go = multiprocessing.Event()
        procs = [
            multiprocessing.Process(
                target=fuzz_worker,
                args=(broker.url, args.seed + i, args.frames // 4, 16, queue, go),
            )
            for i in range(4)
        ]
        for proc in procs:
            proc.start()
        for _ in procs:
            queue.get()  # ready
        # The well-behaved client publishes for exactly as long as the fuzz lasts.
        fuzz_over = threading.Event()
        result: list[GoodRun] = []
        good = threading.Thread(
            target=lambda: result.append(well_behaved(broker.url, 3600, until=fuzz_over))
        )
        good.start()
        go.set()
        totals: dict[str, int] = {}
        longest = 0
        for proc in procs:
            counts = queue.get()
            longest = max(longest, counts.pop("ms"))
            for key, value in counts.items():
                totals[key] = totals.get(key, 0) + value
            proc.join()
        rss_peak = broker.rss_mib()
        fuzz_over.set()
        good.join()
        under = result[0]
        fuzz_seconds = longest / 1000
        rss_after = broker.rss_mib()
        alive = broker.alive()
    finally:
        stop_broker(broker)
    print(
        f"fuzz: {totals['frames']:,} frames in {totals['sessions']:,} connections,"
        f" {fuzz_seconds:.0f} s; hung connections {totals['hung']}"
    )
    print("  kinds: " + ", ".join(f"{k[5:]} {v:,}" for k, v in totals.items() if k[:5] == "kind:"))
    print(
        f"crashes: {0 if alive and not log.errors else 1} (process alive: {alive},"
        f" ERROR lines: {len(log.errors)})"
    )
    for line in log.errors[:5]:
        print("  " + line)
    print(
        f"broker RSS MiB: start {rss_start:.1f}, before fuzz {rss_before:.1f},"
        f" during {rss_peak:.1f}, after {rss_after:.1f}"
    )
    print(GOOD_HEADER)
    print(quiet.row("alone"))
    print(under.row("during the fuzz"))


# ---- connections -----------------------------------------------------------------------------


def hold_connections(url: str, count: int) -> tuple[list[RawPeer], threading.Event]:
    """Open ``count`` connections, each with a producer (every other one a consumer too), and
    answer every PING on them from a thread until the returned event is set."""
    peers: list[RawPeer] = []
    for i in range(count):
        peer = RawPeer(url)
        peer.handshake()
        topic = f"persistent://public/default/held-{i % 50}"
        peer.create_producer(topic)
        if i % 2:
            peer.subscribe(topic, f"held-{i}", consumer_id=1)
            peer.command(c.Flow(consumer_id=1, message_permits=100))
        peers.append(peer)
    stop = threading.Event()
    pong = encode_frame(c.Pong())

    def answer() -> None:
        selector = selectors.DefaultSelector()
        decoders = {}
        for peer in peers:
            peer.sock.setblocking(False)
            selector.register(peer.sock, selectors.EVENT_READ, peer)
            decoders[peer] = FrameDecoder(max_frame_size=1 << 30)
        while not stop.is_set():
            for key, _ in selector.select(0.2):
                peer = key.data
                try:
                    data = peer.sock.recv(1 << 16)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                if not data:
                    selector.unregister(peer.sock)
                    continue
                decoder = decoders[peer]
                decoder.feed(data)
                while (frame := decoder.next_frame()) is not None:
                    if isinstance(frame.command, c.Ping):
                        with contextlib.suppress(OSError):
                            peer.sock.send(pong)

    threading.Thread(target=answer, daemon=True).start()
    return peers, stop


def case_connections(args: argparse.Namespace) -> None:
    broker, log = start(args)
    try:
        rss_start = broker.rss_mib()
        quiet = well_behaved(broker.url, args.seconds)
        began = time.monotonic()
        peers, stop = hold_connections(broker.url, args.connections)
        opened = time.monotonic() - began
        rss_held = broker.rss_mib()
        under = well_behaved(broker.url, args.seconds)
        still_open = sum(1 for p in peers if p.sock.fileno() >= 0)
        stop.set()
        for peer in peers:
            peer.close()
        time.sleep(2)
        rss_after = broker.rss_mib()
        alive = broker.alive()
    finally:
        stop_broker(broker)
    print(
        f"connections: {len(peers):,} opened in {opened:.1f} s (each CONNECT + PRODUCER,"
        f" half SUBSCRIBE + FLOW), {still_open:,} held through the run"
    )
    print(
        f"crashes: {0 if alive and not log.errors else 1} (process alive: {alive},"
        f" ERROR lines: {len(log.errors)})"
    )
    print(
        f"broker RSS MiB: start {rss_start:.1f}, holding {rss_held:.1f}"
        f" ({(rss_held - rss_start) * 1024 / len(peers):.0f} KiB per connection),"
        f" after closing {rss_after:.1f}"
    )
    print(GOOD_HEADER)
    print(quiet.row("alone"))
    print(under.row(f"{len(peers):,} connections open"))


# ---- kill -9 ---------------------------------------------------------------------------------


def kill_round(
    url: str, topic: str, seconds: float, seq: int, run: GoodRun, kill: Broker | None
) -> int:
    """Produce (and consume) as fast as possible; SIGKILL ``kill`` after ``seconds``."""
    import pulsar

    client = pulsar.Client(
        url, operation_timeout_seconds=5, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    lock = threading.Lock()
    try:
        consumer = client.subscribe(topic, "soak", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(
            topic,
            batching_enabled=True,
            max_pending_messages=2000,
            block_if_queue_full=True,
            send_timeout_millis=5000,
        )
        stop = threading.Event()

        def consume() -> None:
            while not stop.is_set():
                try:
                    message = consumer.receive(200)
                except Exception:
                    if kill is None:
                        return  # the last round drains until nothing more comes
                    continue
                with lock:
                    run.received.add(struct.unpack(">Q", message.data()[:8])[0])
                with contextlib.suppress(Exception):
                    consumer.acknowledge(message)

        def acked(n: int) -> object:
            def callback(result: object, _msg_id: object) -> None:
                with lock:
                    if result == pulsar.Result.Ok:
                        run.acknowledged.add(n)
                    else:
                        run.failed_sends += 1

            return callback

        reader = threading.Thread(target=consume, daemon=True)
        reader.start()
        if kill is not None:
            killer = threading.Timer(seconds, lambda: os.kill(kill.popen.pid, signal.SIGKILL))
            killer.start()
            deadline = time.monotonic() + seconds + 2
            while time.monotonic() < deadline and kill.popen.poll() is None:
                try:
                    producer.send_async(struct.pack(">Q", seq) + b"x" * 100, acked(seq))
                except Exception:
                    break
                seq += 1
            kill.popen.wait()
            killer.cancel()
            time.sleep(0.5)
        else:
            reader.join(timeout=60)
        stop.set()
        reader.join()
    finally:
        with contextlib.suppress(Exception):
            client.close()
    return seq


def case_kill(args: argparse.Namespace) -> None:
    data_dir = tempfile.mkdtemp(prefix="emubroker-soak-")
    topic = f"persistent://public/default/soak-{uuid.uuid4().hex[:8]}"
    run = GoodRun()
    seq = 0
    crashes = 0
    error_lines: list[str] = []
    began = time.monotonic()
    try:
        for _ in range(args.rounds):
            broker, log = start(args, "--data-dir", data_dir)
            seq = kill_round(broker.url, topic, args.kill_after, seq, run, kill=broker)
            error_lines += log.errors
        broker, log = start(args, "--data-dir", data_dir)
        rss = broker.rss_mib()
        kill_round(broker.url, topic, 0, seq, run, kill=None)
        alive = broker.alive()
        stop_broker(broker)
        error_lines += log.errors
        crashes = 0 if alive else 1
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    run.seconds = time.monotonic() - began
    print(
        f"kill -9: {args.rounds} rounds of {args.kill_after:.0f} s, {seq:,} messages sent,"
        f" {len(run.acknowledged):,} acknowledged, {len(run.received):,} distinct received,"
        f" {run.failed_sends:,} sends failed (unacknowledged, in flight at a kill)"
    )
    print(f"acknowledged messages lost: {run.lost}")
    print(
        f"crashes other than the kills: {crashes + (1 if error_lines else 0)}"
        f" (ERROR lines: {len(error_lines)}); RSS of the recovering broker {rss:.1f} MiB"
    )
    for line in error_lines[:5]:
        print("  " + line)


CASES = {"fuzz": case_fuzz, "connections": case_connections, "kill": case_kill}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", choices=sorted(CASES))
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=20.0, help="well-behaved run length")
    parser.add_argument("--connections", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kill-after", type=float, default=4.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--root", default=ROOT, help="checkout whose broker to run")
    args = parser.parse_args()
    raise_fd_limit()
    for name in args.case or list(CASES):
        print(f"== {name} (broker from {args.root})")
        CASES[name](args)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
