"""The well-behaved side of bench/fuzz.py: a client that keeps publishing and consuming, and
the broker's own health (did it die, did it log an ERROR), measured while the broker is abused.
"""

from __future__ import annotations

import struct
import threading
import time
import uuid
from dataclasses import dataclass, field

from brokerproc import Broker


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


# ---- broker health ---------------------------------------------------------------------------


class BrokerLog:
    """Keeps the broker's output and counts what means a crash."""

    def __init__(self, broker: Broker) -> None:
        self.errors: list[str] = []
        self.lines = 0
        self._thread = threading.Thread(target=self._read, args=(broker,), daemon=True)
        self._thread.start()

    def _read(self, broker: Broker) -> None:
        assert broker.popen.stdout is not None
        for line in broker.popen.stdout:
            self.lines += 1
            if " ERROR " in line or "Traceback" in line or " CRITICAL " in line:
                self.errors.append(line.rstrip())


# ---- the well-behaved client -----------------------------------------------------------------


@dataclass
class GoodRun:
    latencies_ms: list[float] = field(default_factory=list)
    acknowledged: set[int] = field(default_factory=set)
    received: set[int] = field(default_factory=set)
    failed_sends: int = 0
    seconds: float = 0.0

    @property
    def lost(self) -> int:
        return len(self.acknowledged - self.received)

    def row(self, name: str) -> str:
        rate = len(self.received) / self.seconds if self.seconds else 0.0
        p50, p99 = pct(self.latencies_ms, 0.5), pct(self.latencies_ms, 0.99)
        top = max(self.latencies_ms, default=float("nan"))
        return (
            f"{name:<22} {len(self.acknowledged):>8,} {self.lost:>5} {self.failed_sends:>6}"
            f" {rate:>8.0f} {p50:>8.2f} {p99:>8.2f} {top:>8.2f}"
        )


GOOD_HEADER = (
    f"{'well-behaved client':<22} {'acked':>8} {'lost':>5} {'failed':>6} {'msg/s':>8}"
    f" {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"
)


def well_behaved(
    url: str, seconds: float, rate: float = 200.0, until: threading.Event | None = None
) -> GoodRun:
    """Publish ``rate`` msg/s with the official client and consume them; wait for stragglers.

    Publishing stops after ``seconds``, or as soon as ``until`` is set.
    """
    import pulsar

    run = GoodRun()
    client = pulsar.Client(
        url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    topic = f"persistent://public/default/good-{uuid.uuid4().hex[:8]}"
    consumer = client.subscribe(topic, "good", receiver_queue_size=1000)
    producer = client.create_producer(topic, batching_enabled=False, max_pending_messages=10_000)
    lock = threading.Lock()
    done = threading.Event()

    def consume() -> None:
        while not done.is_set():
            try:
                message = consumer.receive(200)
            except pulsar.Timeout:
                continue
            now = time.perf_counter()
            seq, sent = struct.unpack(">Qd", message.data()[:16])
            with lock:
                run.received.add(seq)
                run.latencies_ms.append((now - sent) * 1000)
            consumer.acknowledge(message)

    def acked(seq: int) -> object:
        def callback(result: object, _msg_id: object) -> None:
            with lock:
                if result == pulsar.Result.Ok:
                    run.acknowledged.add(seq)
                else:
                    run.failed_sends += 1

        return callback

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    began = time.perf_counter()
    seq = 0
    while time.perf_counter() - began < seconds and not (until and until.is_set()):
        payload = struct.pack(">Qd", seq, time.perf_counter()) + b"x" * 100
        producer.send_async(payload, acked(seq))
        seq += 1
        time.sleep(max(0.0, began + seq / rate - time.perf_counter()))
    producer.flush()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with lock:
            if run.acknowledged <= run.received:
                break
        time.sleep(0.1)
    run.seconds = time.perf_counter() - began
    done.set()
    thread.join()
    client.close()
    return run
