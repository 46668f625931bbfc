"""Broker memory while a consumer that never reads its socket is subscribed to a busy topic.

Usage: python bench/nonpersistent_drop.py [--seconds S] [--size B]

Starts ``emubroker standalone`` and publishes to a ``non-persistent://`` topic as fast as the
official client goes (batching on, 1 KiB payloads) for S seconds, twice, side by side:

* baseline: the topic's only subscriber is a consumer that keeps up (``pulsar-client``);
* stuck: a second subscription whose consumer (a raw socket) subscribes, grants 1,000,000
  permits and then never reads again, as a client that hung would.

Per run it prints the broker's resident memory before, at its peak and after, the messages
published, and what the stuck subscription's stats say: ``msgDropRate`` sampled while the
messages flow, and the messages it was sent (``msgOutCounter`` of its consumer). With Pulsar's
rule (drop for a consumer whose connection is not writable) the stuck run's memory stays within
a few MiB of the baseline's; without it the broker queues every message for the stuck socket.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time
import urllib.request
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pulsar
from throughput import broker_process, new_topic

from protocol import commands as c
from protocol.connection import CLOSED, Connection, Role

MIB = 1024 * 1024


def stuck_consumer(url: str, topic: str) -> socket.socket:
    """Subscribe over a raw socket, grant a million permits, and never read again."""
    host, port = url.removeprefix("pulsar://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    conn = Connection(Role.CLIENT)

    def request(command: c.Command) -> None:
        sock.sendall(conn.send(command))
        while True:
            conn.receive_data(sock.recv(65536))
            frame = conn.next_frame()
            if frame is CLOSED:
                raise RuntimeError("the broker closed the connection")
            if frame is not None:
                return

    request(c.Connect(client_version="stuck-consumer", protocol_version=20))
    request(
        c.Subscribe(
            topic=topic,
            subscription="stuck",
            sub_type=c.SubType.EXCLUSIVE,
            consumer_id=1,
            request_id=1,
        )
    )
    sock.sendall(conn.send(c.Flow(consumer_id=1, message_permits=1_000_000)))
    return sock


def stats(admin: str, topic: str) -> dict[str, Any]:
    path = topic.replace("://", "/")
    with urllib.request.urlopen(f"{admin}/admin/v2/{path}/stats", timeout=30) as response:
        doc: dict[str, Any] = json.load(response)
    return doc


def run(url: str, admin: str, broker: Any, seconds: float, size: int, stuck: bool) -> None:
    topic = f"non-persistent://public/default/{new_topic()}"
    client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    reader = client.subscribe(topic, "reading", receiver_queue_size=5000)
    received = 0
    done = threading.Event()

    def read() -> None:
        nonlocal received
        while not done.is_set():
            try:
                reader.receive(200)
            except pulsar.Timeout:
                continue
            received += 1

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    sock = stuck_consumer(url, topic) if stuck else None
    producer = client.create_producer(
        topic, batching_max_publish_delay_ms=5, max_pending_messages=5000, block_if_queue_full=True
    )
    payload = b"x" * size
    before = peak = broker.memory_info().rss
    drop_rates: list[float] = []
    published = 0
    start = last_sample = time.monotonic()
    while time.monotonic() - start < seconds:
        for _ in range(1000):
            producer.send_async(payload, None)
        published += 1000
        if time.monotonic() - last_sample >= 1.0:
            last_sample = time.monotonic()
            peak = max(peak, broker.memory_info().rss)
            if stuck:
                drop_rates.append(
                    stats(admin, topic)["subscriptions"]["stuck"].get("msgDropRate", 0.0)
                )
    producer.flush()
    elapsed = time.monotonic() - start
    peak = max(peak, broker.memory_info().rss)
    sent_to_stuck = 0
    if stuck:
        doc = stats(admin, topic)["subscriptions"]["stuck"]
        sent_to_stuck = sum(consumer["msgOutCounter"] for consumer in doc["consumers"])
    time.sleep(1.0)  # let the reading consumer catch up
    done.set()
    thread.join()
    after = broker.memory_info().rss
    name = "stuck" if stuck else "baseline"
    drop = f"{max(drop_rates):>12,.0f}" if drop_rates else f"{'-':>12}"
    print(
        f"{name:<9} {before / MIB:>8.1f} {peak / MIB:>8.1f} {after / MIB:>8.1f}"
        f" {published:>11,} {published / elapsed:>9,.0f} {received:>10,}"
        f" {drop} {sent_to_stuck if stuck else '-':>10}"
    )
    if sock is not None:
        sock.close()
    client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    with broker_process() as (url, admin, broker):
        print(f"non-persistent topic, {args.size} B payloads, {args.seconds:.0f} s per run")
        print(
            f"{'run':<9} {'RSS MiB':>8} {'peak':>8} {'after':>8} {'published':>11}"
            f" {'msg/s':>9} {'read':>10} {'drops/s max':>12} {'to stuck':>10}"
        )
        for stuck in (False, True):
            run(url, admin, broker, args.seconds, args.size, stuck)


if __name__ == "__main__":
    main()
