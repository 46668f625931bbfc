"""Bad input thrown at a live broker process while a well-behaved client keeps working.

Thousands of generated malformed, oversized and out-of-place frames go to ``emubroker
standalone`` over raw sockets. Meanwhile the official client produces and consumes on its own
topic. Afterwards: the broker still serves, every good message arrived exactly once and in order,
and a reader from the earliest position finds exactly the acknowledged entries, nothing more.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from urllib.parse import urlparse

import pulsar
import pytest

from protocol import commands as c
from protocol.codec import encode_record
from protocol.errors import ServerError
from protocol.framing import (
    DEFAULT_MAX_MESSAGE_SIZE,
    FRAME_PADDING,
    build_entry,
    checksum,
    decode_frame,
    encode_frame,
    encode_payload_frame,
)
from tests.integration.conftest import make_client
from tests.support.broker import StandaloneProcess, standalone_process

pytestmark = pytest.mark.integration

STORM_CASES = 3000
CONNECT = encode_frame(c.Connect(client_version="storm", protocol_version=20))


@pytest.fixture(scope="module")
def broker() -> Iterator[StandaloneProcess]:
    with standalone_process() as proc:
        yield proc


def _address(service_url: str) -> tuple[str, int]:
    parsed = urlparse(service_url)
    assert parsed.hostname is not None
    assert parsed.port is not None
    return parsed.hostname, parsed.port


def _frame(body: bytes) -> bytes:
    """A frame around arbitrary command bytes (``total | cmd_size | body``)."""
    return struct.pack(">II", len(body) + 4, len(body)) + body


def _send_entry(producer_id: int, sequence_id: int, *, crc_delta: int = 0) -> bytes:
    meta = c.MessageMetadata(producer_name="storm", sequence_id=sequence_id, publish_time=1)
    entry = build_entry(encode_record(meta), b"storm-payload")
    return encode_payload_frame(
        c.Send(producer_id=producer_id, sequence_id=sequence_id),
        entry,
        checksum(entry) ^ crc_delta,
    )


def _valid_frames(topic: str) -> list[bytes]:
    """Well-formed frames for a connection that did the handshake; mutated by the storm."""
    return [
        encode_frame(c.LookupTopic(topic=topic, request_id=1)),
        encode_frame(c.PartitionedTopicMetadata(topic=topic, request_id=2)),
        encode_frame(c.Producer(topic=topic, producer_id=1, request_id=3)),
        encode_frame(
            c.Subscribe(
                topic=topic,
                subscription="storm",
                sub_type=c.SubType.SHARED,
                consumer_id=1,
                request_id=4,
            )
        ),
        encode_frame(c.Flow(consumer_id=1, message_permits=10)),
        encode_frame(
            c.Ack(
                consumer_id=1,
                ack_type=c.AckType.INDIVIDUAL,
                message_id=(c.MessageIdData(ledger_id=1, entry_id=0),),
            )
        ),
        encode_frame(c.Seek(consumer_id=1, request_id=5, message_publish_time=0)),
        _send_entry(1, 0),
    ]


def _storm_case(rng: random.Random, topic: str) -> tuple[bool, bytes]:
    """One bad input: (whether to do the handshake first, the bytes to send)."""
    kind = rng.randrange(10)
    if kind == 0:  # noise
        return rng.random() < 0.5, rng.randbytes(rng.randrange(1, 300))
    if kind == 1:  # a frame header announcing more than the broker accepts
        limit = DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING
        return rng.random() < 0.5, struct.pack(">I", rng.randrange(limit + 1, 1 << 32)) + b"x"
    if kind == 2:  # total size below the minimum
        return True, struct.pack(">I", rng.randrange(4)) + rng.randbytes(8)
    if kind == 3:  # command size past the end of the frame
        body = rng.randbytes(rng.randrange(0, 40))
        return True, struct.pack(">II", len(body) + 4, len(body) + rng.randrange(1, 100)) + body
    if kind == 4:  # a type number with no body or a body missing its required fields
        type_number = rng.choice([*range(2, 41), 50, 64, 68, 99, 127])
        return True, _frame(bytes([0x08, type_number]))
    if kind == 5:  # random protobuf-looking command bytes
        return True, _frame(rng.randbytes(rng.randrange(1, 60)))
    if kind == 6:  # a valid frame before CONNECT
        return False, rng.choice(_valid_frames(topic))
    if kind == 7:  # a command only brokers send
        return True, rng.choice(
            [
                encode_frame(c.Connected(server_version="x", protocol_version=20)),
                encode_frame(c.SendReceipt(producer_id=1, sequence_id=0)),
                encode_frame(c.Success(request_id=1)),
                encode_frame(c.Error(request_id=1, error=ServerError.UnknownError, message="x")),
            ]
        )
    if kind == 8:  # SEND for a producer this connection never created
        return True, _send_entry(rng.randrange(1, 1000), rng.randrange(1000))
    # a valid frame with a few bytes flipped, or cut short
    data = bytearray(rng.choice(_valid_frames(topic)))
    if rng.random() < 0.3:
        return True, bytes(data[: rng.randrange(1, len(data))])
    for _ in range(rng.randrange(1, 4)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return True, bytes(data)


def _throw(address: tuple[str, int], handshake: bool, data: bytes) -> None:
    with socket.create_connection(address, timeout=5) as sock:
        if handshake:
            sock.sendall(CONNECT)
            _read_frame(sock)  # CONNECTED
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            # Drain whatever the broker answers until it hangs up or goes quiet.
            sock.settimeout(0.05)
            while sock.recv(65536):
                pass
        except (TimeoutError, ConnectionError):
            pass


def _read_frame(sock: socket.socket) -> c.Command:
    header = _recv_exactly(sock, 4)
    (size,) = struct.unpack(">I", header)
    return decode_frame(_recv_exactly(sock, size)).command


def _read_until_closed(sock: socket.socket) -> None:
    while True:
        _read_frame(sock)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        out += chunk
    return out


class GoodTraffic:
    """Produce and consume one message at a time with the official client until stopped."""

    def __init__(self, client: pulsar.Client, topic: str) -> None:
        self.producer = client.create_producer(topic, batching_enabled=False)
        self.consumer = client.subscribe(topic, "good", consumer_type=pulsar.ConsumerType.Shared)
        self.sent: list[bytes] = []
        self.received: list[bytes] = []
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            i = 0
            while not self._stop.is_set():
                payload = f"good-{i}".encode()
                self.producer.send(payload)
                self.sent.append(payload)
                msg = self.consumer.receive(10_000)
                self.received.append(msg.data())
                self.consumer.acknowledge(msg)
                i += 1
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.failure = exc

    def __enter__(self) -> GoodTraffic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


def _wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


def test_bad_frame_storm_leaves_the_broker_and_good_clients_intact(
    broker: StandaloneProcess,
) -> None:
    address = _address(broker.service_url)
    good_topic = f"persistent://public/default/good-{uuid.uuid4().hex[:8]}"
    storm_topic = f"persistent://public/default/storm-{uuid.uuid4().hex[:8]}"
    rng = random.Random(20261122)
    client = make_client(broker.service_url)
    try:
        with GoodTraffic(client, good_topic) as good:
            _wait_for(lambda: len(good.received) >= 5)
            for _ in range(STORM_CASES):
                _throw(address, *_storm_case(rng, storm_topic))
            before = len(good.received)
            _wait_for(lambda: len(good.received) >= before + 5)
        # The storm reached the broker and was refused connection by connection (logged).
        _wait_for(lambda: _refusals(broker) >= STORM_CASES // 4)
        assert good.failure is None, good.failure
        assert broker.proc.poll() is None, "the broker died"
        assert good.received == good.sent[: len(good.received)]
        assert len(good.sent) - len(good.received) <= 1  # at most the one in flight at stop

        reader = client.create_reader(good_topic, pulsar.MessageId.earliest)
        stored = []
        while reader.has_message_available():
            stored.append(reader.read_next(5_000).data())
        assert stored == good.sent
        with urllib.request.urlopen(f"{broker.admin_url}/admin/v2/brokers/health") as reply:
            assert reply.read() == b"ok"
    finally:
        client.close()


def _refusals(broker: StandaloneProcess) -> int:
    return sum("closing connection" in line for line in list(broker.output))


def _connected(address: tuple[str, int]) -> socket.socket:
    sock = socket.create_connection(address, timeout=5)
    sock.sendall(CONNECT)
    assert isinstance(_read_frame(sock), c.Connected)
    return sock


def test_bad_checksum_fails_only_that_message(broker: StandaloneProcess) -> None:
    topic = f"persistent://public/default/crc-{uuid.uuid4().hex[:8]}"
    with _connected(_address(broker.service_url)) as sock:
        sock.sendall(encode_frame(c.Producer(topic=topic, producer_id=7, request_id=1)))
        assert isinstance(_read_frame(sock), c.ProducerSuccess)
        sock.sendall(_send_entry(7, 0, crc_delta=1) + _send_entry(7, 1))
        error = _read_frame(sock)
        assert isinstance(error, c.SendError)
        assert (error.sequence_id, error.error) == (0, ServerError.ChecksumError)
        receipt = _read_frame(sock)
        assert isinstance(receipt, c.SendReceipt)
        assert receipt.sequence_id == 1
        assert receipt.message_id is not None
        assert receipt.message_id.entry_id == 0  # the bad entry was not stored


def test_errors_use_the_request_s_own_response_type(broker: StandaloneProcess) -> None:
    with _connected(_address(broker.service_url)) as sock:
        sock.sendall(encode_frame(c.LookupTopic(topic="persistent://no/such/t", request_id=3)))
        lookup = _read_frame(sock)
        assert isinstance(lookup, c.LookupTopicResponse)
        assert lookup.response == c.LookupType.FAILED
        assert lookup.error == ServerError.TopicNotFound
        sock.sendall(encode_frame(c.PartitionedTopicMetadata(topic="no/such/t", request_id=4)))
        meta = _read_frame(sock)
        assert isinstance(meta, c.PartitionedTopicMetadataResponse)
        assert meta.response == c.MetadataResult.FAILED


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(_frame(bytes([0x08, 27])), id="unknown-command"),
        pytest.param(struct.pack(">I", 1 << 30) + b"x", id="oversized"),
        pytest.param(encode_frame(c.Connected(server_version="x")), id="broker-only-command"),
    ],
)
def test_protocol_violations_close_only_that_connection(
    broker: StandaloneProcess, data: bytes
) -> None:
    address = _address(broker.service_url)
    with _connected(address) as bystander, _connected(address) as offender:
        offender.sendall(data)
        offender.settimeout(5)
        with pytest.raises(ConnectionError):
            _read_until_closed(offender)
        bystander.sendall(encode_frame(c.Ping()))
        assert isinstance(_read_frame(bystander), c.Pong)
