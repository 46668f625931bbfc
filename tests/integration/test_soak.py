"""The fast parts of the soak harness (bench/fuzz.py ``kill`` and ``connections``).

A durable broker is killed with SIGKILL while the official client publishes as fast as it can
and a consumer acknowledges; after the last kill a broker on the same directory delivers the
rest. Every message whose publish was acknowledged must arrive (at least once). And a broker
holds 1,000 connections while the official client is served as usual.
"""

from __future__ import annotations

import contextlib
import resource
import signal
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pulsar
import pytest

from protocol import commands as c
from protocol.framing import FrameDecoder, encode_frame
from tests.integration.conftest import make_client
from tests.integration.test_durability import _Proc, _process, _standalone
from tests.support.broker import standalone_process

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
        # Until every acknowledged message has arrived (all the test asserts), rather than until
        # two quiet seconds: a lost one ends the wait at the receive timeout and fails below.
        while not tally.acknowledged <= tally.received:
            try:
                message = consumer.receive(10_000)
            except pulsar.Timeout:
                break
            tally.received.add(struct.unpack(">Q", message.data())[0])
            consumer.acknowledge(message)
        client.close()
    assert len(tally.acknowledged) > 1000  # the kills came under real load
    assert tally.acknowledged - tally.received == set()


@contextlib.contextmanager
def open_files(wanted: int) -> Iterator[None]:
    """This process may hold ``wanted`` descriptors for the block (skips if it cannot)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"needs {wanted} open files, the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def answer_of(sock: socket.socket) -> c.Command:
    decoder = FrameDecoder()
    while (frame := decoder.next_frame()) is None:
        data = sock.recv(65536)
        assert data, "closed by the broker"
        decoder.feed(data)
    return frame.command


def test_a_thousand_connections_are_held_while_a_client_is_served() -> None:
    with open_files(1500), standalone_process() as broker:
        url = urlparse(broker.service_url)
        connect = encode_frame(c.Connect(client_version="many", protocol_version=20))
        held: list[socket.socket] = []
        try:
            for _ in range(1000):
                sock = socket.create_connection((url.hostname, url.port), 10)
                sock.sendall(connect)
                held.append(sock)
            assert all(isinstance(answer_of(sock), c.Connected) for sock in held)
            client = make_client(broker.service_url)
            try:
                topic = f"persistent://public/default/many-{uuid.uuid4().hex[:8]}"
                consumer = client.subscribe(topic, "s")
                producer = client.create_producer(topic)
                for i in range(100):
                    producer.send(b"%d" % i)
                received = [consumer.receive(10_000).data() for _ in range(100)]
                assert received == [b"%d" % i for i in range(100)]
            finally:
                client.close()
            ping = encode_frame(c.Ping())
            for sock in held:  # every one of them still served
                sock.sendall(ping)
            assert all(answer_of(sock) == c.Pong() for sock in held)
        finally:
            for sock in held:
                sock.close()
        assert broker.proc.poll() is None
