"""ClientConnection: handshake, keep-alive, request routing, teardown; against a scripted peer."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import anyio.lowlevel
import pytest

from protocol import commands as c
from protocol.client.connection import ASSUMED_MAX_MESSAGE_SIZE, ClientConnection
from protocol.client.transport import (
    StreamTransport,
    memory_byte_stream_pair,
    memory_transport_pair,
)
from protocol.clock import FakeClock
from protocol.connection import CLOSED, Connection, Role
from protocol.errors import (
    ConnectionBrokenError,
    OperationTimeoutError,
    ProducerBusyError,
    ServerError,
    TopicNotFoundError,
)
from protocol.framing import Payload

pytestmark = pytest.mark.anyio


class Peer:
    """The broker end, driven by hand."""

    def __init__(self, transport: StreamTransport) -> None:
        self.transport = transport
        self.conn = Connection(Role.BROKER)

    async def next_command(self) -> c.Command:
        while True:
            frame = self.conn.next_frame()
            if frame is CLOSED:
                raise EOFError
            if frame is not None:
                return frame.command
            self.conn.receive_data(await self.transport.receive())

    async def send(self, *commands: c.Command) -> None:
        await self.transport.send(b"".join(self.conn.send(cmd) for cmd in commands))

    async def accept(self, **connected: object) -> c.Connect:
        connect = await self.next_command()
        assert isinstance(connect, c.Connect)
        await self.send(c.Connected(server_version="peer", protocol_version=20, **connected))  # type: ignore[arg-type]
        return connect


Wires = tuple[StreamTransport, Peer]


@pytest.fixture
async def wires() -> AsyncIterator[Wires]:
    client_side, broker_side = memory_transport_pair()
    yield client_side, Peer(broker_side)
    await client_side.aclose()
    await broker_side.aclose()


async def open_cnx(
    wires: tuple[StreamTransport, Peer], clock: FakeClock, **connected: object
) -> tuple[ClientConnection, Peer, c.Connect]:
    transport, peer = wires
    cnx = ClientConnection("pulsar://peer:6650", transport, clock, keep_alive_interval=30.0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(cnx.handshake, None)
        connect = await peer.accept(**connected)
    return cnx, peer, connect


async def test_handshake_sends_connect_v20_and_reads_max_message_size(
    wires: Wires, fake_clock: FakeClock
) -> None:
    cnx, _peer, connect = await open_cnx(wires, fake_clock, max_message_size=1234)
    assert connect.protocol_version == 20
    assert connect.auth_method_name == "none"
    assert connect.client_version
    assert connect.feature_flags is not None
    assert connect.feature_flags.supports_broker_entry_metadata
    assert cnx.max_message_size == 1234
    assert cnx.protocol_version == 20
    assert cnx.is_open


async def test_missing_max_message_size_assumes_5mib_minus_padding(
    wires: Wires, fake_clock: FakeClock
) -> None:
    cnx, _peer, _ = await open_cnx(wires, fake_clock)
    assert cnx.max_message_size == ASSUMED_MAX_MESSAGE_SIZE == 5 * 1024 * 1024 - 10 * 1024


async def test_handshake_times_out_on_the_clock(wires: Wires, fake_clock: FakeClock) -> None:
    transport, _peer = wires
    cnx = ClientConnection("pulsar://peer:6650", transport, fake_clock)
    errors: list[Exception] = []

    async def handshake() -> None:
        try:
            await cnx.handshake(fake_clock.now() + 10.0)
        except Exception as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(handshake)
        await fake_clock.advance(9.9)
        assert errors == []
        await fake_clock.advance(0.2)
    assert len(errors) == 1
    assert isinstance(errors[0], OperationTimeoutError)


async def test_handshake_fails_when_the_peer_hangs_up(wires: Wires, fake_clock: FakeClock) -> None:
    transport, peer = wires
    cnx = ClientConnection("pulsar://peer:6650", transport, fake_clock)
    await peer.transport.aclose()
    with pytest.raises(ConnectionBrokenError):
        await cnx.handshake(None)


class Recorder:
    """A producer/consumer stand-in that records what the connection hands it."""

    def __init__(self, receipt_ok: bool = True) -> None:
        self.receipts: list[c.SendReceipt] = []
        self.messages: list[tuple[c.Message, bytes]] = []
        self.closed: list[ClientConnection] = []
        self.receipt_ok = receipt_ok
        self.active: list[bool] = []

    def handle_receipt(self, receipt: c.SendReceipt) -> bool:
        self.receipts.append(receipt)
        return self.receipt_ok

    def handle_send_error(self, error: c.SendError) -> bool:
        return error.error == ServerError.ChecksumError

    def handle_message(self, message: c.Message, payload: Payload, cnx: ClientConnection) -> None:
        self.messages.append((message, payload.entry))

    def handle_active_change(self, is_active: bool) -> None:
        self.active.append(is_active)

    def handle_close(self, cnx: ClientConnection) -> None:
        self.closed.append(cnx)


async def test_responses_are_routed_by_type_when_request_ids_collide(
    wires: Wires, fake_clock: FakeClock
) -> None:
    cnx, peer, _ = await open_cnx(wires, fake_clock)
    async with anyio.create_task_group() as tg:
        tg.start_soon(cnx.run)
        # spec §4.1: a LOOKUP and a PRODUCER may carry the same request id.
        lookup = cnx.request(c.LookupTopic(topic="t", request_id=1))
        producer = cnx.request(c.Producer(topic="t", producer_id=0, request_id=1))
        assert isinstance(await peer.next_command(), c.LookupTopic)
        assert isinstance(await peer.next_command(), c.Producer)
        await peer.send(
            c.ProducerSuccess(request_id=1, producer_name="p"),
            c.LookupTopicResponse(request_id=1, response=c.LookupType.CONNECT),
        )
        assert isinstance(await producer, c.ProducerSuccess)
        assert isinstance(await lookup, c.LookupTopicResponse)
        await cnx.aclose()


async def test_error_reply_raises_the_mapped_broker_error(
    wires: Wires, fake_clock: FakeClock
) -> None:
    cnx, peer, _ = await open_cnx(wires, fake_clock)
    async with anyio.create_task_group() as tg:
        tg.start_soon(cnx.run)
        busy = cnx.request(c.Producer(topic="t", producer_id=0, request_id=5))
        missing = cnx.request(c.GetLastMessageId(consumer_id=0, request_id=6))
        await peer.send(
            c.Error(request_id=5, error=ServerError.ProducerBusy, message="taken"),
            c.Error(request_id=6, error=ServerError.TopicNotFound, message="gone"),
        )
        with pytest.raises(ProducerBusyError, match="taken"):
            await busy
        with pytest.raises(TopicNotFoundError, match="gone"):
            await missing
        await cnx.aclose()


async def test_broker_ping_is_answered_with_pong(wires: Wires, fake_clock: FakeClock) -> None:
    cnx, peer, _ = await open_cnx(wires, fake_clock)
    async with anyio.create_task_group() as tg:
        tg.start_soon(cnx.run)
        await peer.send(c.Ping())
        assert isinstance(await peer.next_command(), c.Pong)
        await cnx.aclose()


async def test_keep_alive_pings_and_drops_a_silent_broker(
    wires: Wires, fake_clock: FakeClock
) -> None:
    cnx, peer, _ = await open_cnx(wires, fake_clock)
    pending = cnx.request(c.Seek(consumer_id=0, request_id=9))
    async with anyio.create_task_group() as tg:
        tg.start_soon(cnx.run)
        assert isinstance(await peer.next_command(), c.Seek)
        await fake_clock.advance(30.0)
        assert isinstance(await peer.next_command(), c.Ping)
        await peer.send(c.Pong())  # answered: the connection lives on
        await fake_clock.advance(30.0)
        assert isinstance(await peer.next_command(), c.Ping)
        assert cnx.is_open
        await fake_clock.advance(30.0)  # this PING went unanswered for a whole interval
    assert not cnx.is_open
    with pytest.raises(ConnectionBrokenError, match="did not answer PING"):
        await pending


async def test_dispatch_to_registered_handlers(wires: Wires, fake_clock: FakeClock) -> None:
    cnx, peer, _ = await open_cnx(wires, fake_clock)
    producer, consumer = Recorder(), Recorder()
    cnx.add_producer(3, producer)
    cnx.add_consumer(4, consumer)
    from protocol.framing import build_entry, checksum, encode_payload_frame

    entry = build_entry(b"", b"body")
    async with anyio.create_task_group() as tg:
        tg.start_soon(cnx.run)
        await peer.send(
            c.SendReceipt(producer_id=3, sequence_id=0),
            c.ActiveConsumerChange(consumer_id=4, is_active=True),
        )
        await peer.transport.send(
            encode_payload_frame(
                c.Message(consumer_id=4, message_id=c.MessageIdData(ledger_id=1, entry_id=2)),
                entry,
                checksum(entry),
            )
        )
        await peer.send(c.CloseConsumer(consumer_id=4, request_id=77))
        await anyio.wait_all_tasks_blocked()
        assert [r.sequence_id for r in producer.receipts] == [0]
        assert consumer.active == [True]
        assert consumer.messages[0][1] == entry
        assert consumer.closed == [cnx]
        assert 4 not in cnx.consumers  # CLOSE_CONSUMER unregisters it
        await cnx.aclose()
    assert producer.closed == [cnx]  # the end of the connection reaches every handler


async def test_bad_receipt_drops_the_connection(wires: Wires, fake_clock: FakeClock) -> None:
    cnx, peer, _ = await open_cnx(wires, fake_clock)
    producer = Recorder(receipt_ok=False)
    cnx.add_producer(0, producer)
    async with anyio.create_task_group() as tg:
        tg.start_soon(cnx.run)
        await peer.send(c.SendReceipt(producer_id=0, sequence_id=99))
    assert not cnx.is_open
    assert producer.closed == [cnx]


async def test_send_error_other_than_checksum_drops_the_connection(
    wires: Wires, fake_clock: FakeClock
) -> None:
    cnx, peer, _ = await open_cnx(wires, fake_clock)
    producer = Recorder()
    cnx.add_producer(0, producer)
    async with anyio.create_task_group() as tg:
        tg.start_soon(cnx.run)
        await peer.send(
            c.SendError(
                producer_id=0, sequence_id=0, error=ServerError.ChecksumError, message="crc"
            )
        )
        await anyio.wait_all_tasks_blocked()
        assert cnx.is_open  # spec §6.3: ChecksumError fails one message only
        await peer.send(
            c.SendError(
                producer_id=0, sequence_id=1, error=ServerError.PersistenceError, message="disk"
            )
        )
    assert not cnx.is_open


async def test_peer_eof_fails_pending_requests_and_rejects_writes(
    wires: Wires, fake_clock: FakeClock
) -> None:
    cnx, peer, _ = await open_cnx(wires, fake_clock)
    pending = cnx.request(c.Unsubscribe(consumer_id=0, request_id=1))
    async with anyio.create_task_group() as tg:
        tg.start_soon(cnx.run)
        await peer.transport.aclose()
    with pytest.raises(ConnectionBrokenError):
        await pending
    with pytest.raises(ConnectionBrokenError):
        cnx.send_command(c.Flow(consumer_id=0, message_permits=1))


async def test_a_frame_the_client_may_not_receive_drops_the_connection(
    wires: Wires, fake_clock: FakeClock
) -> None:
    cnx, peer, _ = await open_cnx(wires, fake_clock)
    async with anyio.create_task_group() as tg:
        tg.start_soon(cnx.run)
        from protocol.framing import encode_frame

        await peer.transport.send(encode_frame(c.Flow(consumer_id=0, message_permits=1)))
    assert not cnx.is_open


class AwaitedTransport(StreamTransport):
    """A transport that never takes bytes at once, as a socket: every write goes to the writer."""

    def send_nowait(self, data: bytes) -> bool:
        return False


async def test_writes_queued_together_go_out_in_one_send(fake_clock: FakeClock) -> None:
    client_end, broker_end = memory_byte_stream_pair()
    wires = (AwaitedTransport(client_end), Peer(StreamTransport(broker_end)))
    cnx, peer, _ = await open_cnx(wires, fake_clock)
    async with anyio.create_task_group() as tg:
        tg.start_soon(cnx.run)
        for i in range(50):
            cnx.send_command(c.Flow(consumer_id=i, message_permits=1))
        await anyio.wait_all_tasks_blocked()
        chunk = await peer.transport.receive(1 << 20)
        peer.conn.receive_data(chunk)
        flows = []
        while (frame := peer.conn.next_frame()) is not None:
            assert frame is not CLOSED
            flows.append(frame.command)
        assert len(flows) == 50  # all in the first read: one batched write
        await cnx.aclose()
    await peer.transport.aclose()


async def test_a_write_with_nothing_queued_goes_out_without_waking_the_writer(
    wires: Wires, fake_clock: FakeClock
) -> None:
    # Each task woken is a round of the event loop; a simulation pays them per message.
    cnx, peer, _ = await open_cnx(wires, fake_clock)
    rounds = 0

    async def count_rounds() -> None:
        nonlocal rounds
        while True:
            rounds += 1
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(cnx.run)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(count_rounds)
        await anyio.lowlevel.checkpoint()
        before = rounds
        cnx.send_command(c.Flow(consumer_id=7, message_permits=1))
        peer.conn.receive_data(await peer.transport.receive())  # there already: no wait
        assert rounds == before
        assert peer.conn.next_frame().command == c.Flow(consumer_id=7, message_permits=1)  # type: ignore[union-attr]
        tg.cancel_scope.cancel()


async def test_a_write_to_a_vanished_peer_ends_the_connection(
    wires: Wires, fake_clock: FakeClock
) -> None:
    cnx, peer, _ = await open_cnx(wires, fake_clock)
    async with anyio.create_task_group() as tg:
        tg.start_soon(cnx.run)
        await anyio.wait_all_tasks_blocked()
        await peer.transport.aclose()
        pending = cnx.request(c.Unsubscribe(consumer_id=0, request_id=1))  # written at once
    with pytest.raises(ConnectionBrokenError):
        await pending
    assert not cnx.is_open
