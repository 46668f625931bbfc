"""The fast part of the soak harness (bench/fuzz.py ``kill``): kill -9 under load, repeated.

A durable broker is killed with SIGKILL while the official client publishes as fast as it can
and a consumer acknowledges; after the last kill a broker on the same directory delivers the
rest. Every message whose publish was acknowledged must arrive (at least once).
"""

from __future__ import annotations

import contextlib
import signal
import struct
import threading
import time
import uuid
from pathlib import Path

import pulsar
import pytest

from tests.integration.conftest import make_client
from tests.integration.test_durability import _Proc, _process, _standalone

pytestmark = pytest.mark.integration


class Tally:
    def __init__(self) -> None:
        self.acknowledged: set[int] = set()
        self.received: set[int] = set()
        self.lock = threading.Lock()


def load_then_kill(broker: _Proc, topic: str, first: int, tally: Tally, seconds: float) -> int:
    """Publish from ``first`` on and consume until the broker is killed ``seconds`` in."""
    client = make_client(broker.url)
    consumer = client.subscribe(topic, "soak", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(
        topic, max_pending_messages=500, block_if_queue_full=True, send_timeout_millis=3000
    )
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            try:
                message = consumer.receive(100)
            except Exception:
                continue
            with tally.lock:
                tally.received.add(struct.unpack(">Q", message.data())[0])
            with contextlib.suppress(Exception):
                consumer.acknowledge(message)

    def acked(n: int) -> object:
        def callback(result: object, _msg_id: object) -> None:
            if result == pulsar.Result.Ok:
                with tally.lock:
                    tally.acknowledged.add(n)

        return callback

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    killer = threading.Timer(seconds, broker.stop, args=(signal.SIGKILL,))
    killer.start()
    n = first
    while broker.proc.poll() is None:
        with contextlib.suppress(Exception):
            producer.send_async(struct.pack(">Q", n), acked(n))
        n += 1
    killer.join()
    time.sleep(0.3)  # callbacks of sends that failed with the connection
    stop.set()
    reader.join()
    client.close()
    return n


def test_repeated_kill_9_under_load_loses_nothing_acknowledged(tmp_path: Path) -> None:
    topic = f"persistent://public/default/soak-{uuid.uuid4().hex[:8]}"
    tally = Tally()
    sent = 0
    for _ in range(3):
        with _process(_standalone(tmp_path)) as broker:
            sent = load_then_kill(broker, topic, sent, tally, seconds=1.5)
    with _process(_standalone(tmp_path)) as broker:
        client = make_client(broker.url)
        consumer = client.subscribe(topic, "soak")
        while True:
            try:
                message = consumer.receive(2000)
            except pulsar.Timeout:
                break
            tally.received.add(struct.unpack(">Q", message.data())[0])
            consumer.acknowledge(message)
        client.close()
    assert len(tally.acknowledged) > 1000  # the kills came under real load
    assert tally.acknowledged - tally.received == set()
