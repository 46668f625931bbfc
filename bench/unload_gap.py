"""The delivery gap a producer and a consumer see while their topic's bundle is unloaded.

    python bench/unload_gap.py [--unloads 20] [--interval 0.002] [--brokers 3]

Starts ``emubroker cluster -n BROKERS --port 0`` and, with the official client, one producer
sending a message every INTERVAL seconds (``send_async``, no batching) and one consumer
receiving them. Then, UNLOADS times: a quiet window (no unload: the baseline), then the unload
of the topic's bundle over REST (the call goes to the owner; the leader places the bundle again
on the next lookup). For each window it takes the longest pause between two consecutive
acknowledgements (the producer's gap) and between two consecutive deliveries (the consumer's
gap) in the 3 seconds after the window began.

Prints p50 and p99 (with 20 unloads, p99 is the worst) of both gaps, with and without the
unload, in milliseconds, the time the unload call took (the owner closing the bundle's topics
and releasing it), and checks that every acknowledged message was received.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pulsar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from emubroker.admin_cli import AdminClient  # noqa: E402 - after the path is set

WINDOW = 3.0
TOPIC = "persistent://public/default/unload-gap"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def longest_pause(times: list[float], start: float, end: float) -> float:
    inside = [t for t in times if start <= t <= end]
    if len(inside) < 2:
        return end - start
    return max(b - a for a, b in itertools.pairwise(inside))


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: list[float] = []
        self.acked_ids: set[int] = set()
        self.received: list[float] = []
        self.received_ids: set[int] = set()

    def on_ack(self, seq: int) -> Any:
        def done(result: Any, _msg_id: Any) -> None:
            if result == pulsar.Result.Ok:
                with self.lock:
                    self.acked.append(time.monotonic())
                    self.acked_ids.add(seq)

        return done

    def on_message(self, consumer: Any, message: Any) -> None:
        with self.lock:
            self.received.append(time.monotonic())
            self.received_ids.add(int(message.data()))
        consumer.acknowledge(message)


def run(unloads: int, interval: float, brokers: int) -> None:
    with tempfile.TemporaryDirectory(prefix="unload-gap-") as run_dir:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "emubroker", "cluster", "-n", str(brokers), "--json"),
                *("--port", "0", "--run-dir", str(Path(run_dir) / "run")),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
            cwd=ROOT,
        )
        try:
            assert proc.stdout is not None
            ready = json.loads(proc.stdout.readline())
            measure(ready, unloads, interval)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)


def measure(ready: dict[str, Any], unloads: int, interval: float) -> None:
    admin = AdminClient(ready["brokers"][0]["admin_url"])
    client = pulsar.Client(
        ready["service_url"], logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    recorder = Recorder()
    client.subscribe(TOPIC, "gap", message_listener=recorder.on_message)
    producer = client.create_producer(TOPIC, batching_enabled=False, block_if_queue_full=True)
    bundle = admin.call("GET", "/lookup/v2/topic/persistent/public/default/unload-gap/bundle")
    stop = threading.Event()

    def send() -> None:
        seq = 0
        next_at = time.monotonic()
        while not stop.is_set():
            producer.send_async(str(seq).encode(), recorder.on_ack(seq))
            seq += 1
            next_at += interval
            time.sleep(max(0.0, next_at - time.monotonic()))

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    time.sleep(1.0)  # warm: the topic is loaded, the client connected
    windows: dict[str, list[tuple[float, float]]] = {"quiet": [], "unload": []}
    calls: list[float] = []  # the unload call, redirect to the owner included
    for _ in range(unloads):
        began = time.monotonic()
        time.sleep(WINDOW)
        windows["quiet"].append((began, began + WINDOW))
        began = time.monotonic()
        admin.call("PUT", f"/admin/v2/namespaces/public/default/{bundle}/unload")
        calls.append((time.monotonic() - began) * 1000)
        time.sleep(WINDOW)
        windows["unload"].append((began, began + WINDOW))
    stop.set()
    sender.join()
    producer.flush()
    deadline = time.monotonic() + 30
    while recorder.acked_ids - recorder.received_ids and time.monotonic() < deadline:
        time.sleep(0.1)
    missing = recorder.acked_ids - recorder.received_ids
    client.close()
    print(
        f"{unloads} unloads, a message every {interval * 1000:g} ms, "
        f"{len(ready['brokers'])} brokers"
    )
    for kind, spans in windows.items():
        produced = [longest_pause(recorder.acked, a, b) * 1000 for a, b in spans]
        consumed = [longest_pause(recorder.received, a, b) * 1000 for a, b in spans]
        print(
            f"{kind:>6}: producer gap p50 {percentile(produced, 0.5):7.1f} ms  "
            f"p99 {percentile(produced, 0.99):7.1f} ms | consumer gap p50 "
            f"{percentile(consumed, 0.5):7.1f} ms  p99 {percentile(consumed, 0.99):7.1f} ms"
        )
    print(
        f"unload call (REST, to the owner, until its 204): p50 {percentile(calls, 0.5):.1f} ms  "
        f"p99 {percentile(calls, 0.99):.1f} ms"
    )
    print(
        f"acknowledged {len(recorder.acked_ids)}, received {len(recorder.received_ids)}, "
        f"acknowledged but not received {len(missing)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unloads", type=int, default=20)
    parser.add_argument("--interval", type=float, default=0.002)
    parser.add_argument("--brokers", type=int, default=3)
    args = parser.parse_args()
    run(args.unloads, args.interval, args.brokers)


if __name__ == "__main__":
    main()
