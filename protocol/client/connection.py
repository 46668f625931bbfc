"""One client connection to one broker: the async pump around the sans-IO `Connection`.

Three loops share a cancel scope (STYLE.md §1.2, a thin pump):

* the reader receives a chunk, feeds it to `protocol.connection.Connection` and dispatches every
  complete frame in it before reading again (bulk decoding per chunk);
* the writer joins everything queued since its last wake-up into one `send` (batched writes);
  a frame written while nothing is queued or being sent goes straight to a transport that takes
  bytes without waiting (an in-memory pipe), and the writer is not woken at all;
* the keep-alive loop pings the broker every interval and declares the connection dead when a
  PING went unanswered for a whole interval (spec §3.2).

Replies are routed by response *type* and request id, because request ids are only unique per
kind of request (spec §4.1); MESSAGE, SEND_RECEIPT, SEND_ERROR and CLOSE_* go to the producer or
consumer registered under their id. When the connection ends, for whatever reason, every pending
request fails with `ConnectionBrokenError` and every registered handler is told, so it can
reconnect (spec §9).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final, Protocol

import anyio

from protocol import commands as c
from protocol.client._util import Future, with_deadline
from protocol.client.transport import DEFAULT_RECEIVE_SIZE, Transport
from protocol.clock import Clock
from protocol.connection import CLOSED, PROTOCOL_VERSION, Connection, Role, State
from protocol.errors import (
    BrokerError,
    ClientClosedError,
    ConnectionBrokenError,
    LocalProtocolError,
    ProtocolError,
    ServerError,
)
from protocol.framing import DEFAULT_MAX_MESSAGE_SIZE, FRAME_PADDING, Frame, Payload

__all__ = ["ClientConnection", "ConsumerListener", "ProducerListener"]

logger = logging.getLogger(__name__)

CLIENT_VERSION: Final = "emubroker-protocol-client-0.1"

MAX_INCOMING_FRAME: Final = 512 * 1024 * 1024
"""The C++ client accepts frames of any size (spec §2.3); we still bound what one frame may make
us buffer, far above any broker's `maxMessageSize` + padding."""

ASSUMED_MAX_MESSAGE_SIZE: Final = DEFAULT_MAX_MESSAGE_SIZE - FRAME_PADDING
"""What the C++ client assumes when CONNECTED carries no `max_message_size` (spec §2.3)."""

# Which pending-request table a request's reply is looked up in (spec §4.1: ids collide across
# kinds). Everything not listed is answered by SUCCESS / ERROR / a command-specific response.
_REQUEST_KIND: dict[type[c.Record], str] = {
    c.LookupTopic: "lookup",
    c.PartitionedTopicMetadata: "metadata",
    c.GetSchema: "schema",
    c.ConsumerStats: "stats",
    c.Ack: "ack",
}
_RESPONSE_KIND: dict[type[c.Record], str] = {
    c.LookupTopicResponse: "lookup",
    c.PartitionedTopicMetadataResponse: "metadata",
    c.GetSchemaResponse: "schema",
    c.ConsumerStatsResponse: "stats",
    c.AckResponse: "ack",
    c.Success: "generic",
    c.ProducerSuccess: "generic",
    c.GetLastMessageIdResponse: "generic",
    c.GetTopicsOfNamespaceResponse: "generic",
}


class ProducerListener(Protocol):
    """What a connection calls on a registered producer (from the reader task; never blocks)."""

    def handle_receipt(self, receipt: c.SendReceipt) -> bool:
        """Match a receipt; False means the broker broke the receipt rules (spec §6.2)."""
        ...

    def handle_send_error(self, error: c.SendError) -> bool:
        """Handle SEND_ERROR; False means the connection must be closed (spec §6.3)."""
        ...

    def handle_close(self, cnx: ClientConnection) -> None:
        """The broker closed this producer (CLOSE_PRODUCER) or the connection ended."""
        ...


class ConsumerListener(Protocol):
    """What a connection calls on a registered consumer (from the reader task; never blocks)."""

    def handle_message(self, message: c.Message, payload: Payload, cnx: ClientConnection) -> None:
        """A MESSAGE for this consumer."""
        ...

    def handle_active_change(self, is_active: bool) -> None:
        """ACTIVE_CONSUMER_CHANGE (Failover)."""
        ...

    def handle_close(self, cnx: ClientConnection) -> None:
        """The broker closed this consumer (CLOSE_CONSUMER) or the connection ended."""
        ...


class ClientConnection:
    """The pump for one TCP (or in-memory) connection to a broker URL.

    Create it, `await handshake()`, then run `run()` in a task group until it returns.

    Args:
        url: the broker URL this connection serves (the pool key).
        transport: the byte stream, owned from now on.
        clock: time source for the keep-alive and the handshake deadline.
        keep_alive_interval: seconds between PINGs; None disables them.
        on_closed: called once when the connection has ended (pool bookkeeping).
    """

    def __init__(
        self,
        url: str,
        transport: Transport,
        clock: Clock,
        *,
        keep_alive_interval: float | None = 30.0,
        on_closed: Callable[[ClientConnection], None] | None = None,
    ) -> None:
        self.url = url
        self._transport = transport
        self._clock = clock
        self._keep_alive_interval = keep_alive_interval
        self._on_closed = on_closed
        self._conn = Connection(Role.CLIENT, max_frame_size=MAX_INCOMING_FRAME)
        self.max_message_size = ASSUMED_MAX_MESSAGE_SIZE
        self.protocol_version = 0
        self._outbox: list[bytes] = []
        self._sending = False  # the writer's `send` is under way: a direct write would overtake
        self._wakeup = anyio.Event()
        self._pending: dict[tuple[str, int], Future[c.Command]] = {}
        self.producers: dict[int, ProducerListener] = {}
        self.consumers: dict[int, ConsumerListener] = {}
        self._scope = anyio.CancelScope()
        self._finished = anyio.Event()
        self._close_reason: Exception | None = None
        self._frames_received = 0
        self._dispatch_table: dict[type[c.Record], Callable[[Frame], None]] = {
            c.Message: self._on_message,
            c.SendReceipt: self._on_send_receipt,
            c.SendError: self._on_send_error,
            c.Error: self._on_error,
            c.CloseProducer: self._on_close_producer,
            c.CloseConsumer: self._on_close_consumer,
            c.Ping: self._on_ping,
            c.Pong: _ignore,
            c.ActiveConsumerChange: self._on_active_consumer_change,
            # A terminated topic's consumer: nothing more will come, which our consumers
            # already see as silence.
            c.ReachedEndOfTopic: _ignore,
        }
        for response in _RESPONSE_KIND:
            self._dispatch_table[response] = self._on_response

    # ---- state ---------------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        """True while the connection can carry requests."""
        return self._close_reason is None and self._conn.state is State.OPEN

    def new_request_id(self) -> int:
        """A request id unique on this connection."""
        return self._conn.next_request_id()

    # ---- handshake -----------------------------------------------------------------------------

    async def handshake(
        self,
        deadline: float | None,
        *,
        client_version: str = CLIENT_VERSION,
        authentication: c.AuthData | None = None,
    ) -> c.Connected:
        """Send CONNECT and wait for CONNECTED (spec §3.1).

        Args:
            deadline: when to give up (clock time), None for never.
            client_version: sent in CONNECT.
            authentication: the credential CONNECT carries (``auth_method_name`` and
                ``auth_data``); None: method ``none``, no data.

        Raises:
            BrokerError: the broker refused the CONNECT (ERROR, e.g. `AuthenticationError`).
            ConnectionBrokenError: the stream failed, ended or carried something else.
            OperationTimeoutError: no CONNECTED before `deadline`.
        """
        connect = c.Connect(
            client_version=client_version,
            protocol_version=PROTOCOL_VERSION,
            auth_method_name=(authentication.auth_method_name if authentication else None)
            or "none",
            auth_data=authentication.auth_data if authentication else None,
            feature_flags=c.FeatureFlags(
                supports_auth_refresh=True, supports_broker_entry_metadata=True
            ),
        )

        async def exchange() -> c.Connected:
            await self._transport.send(self._conn.send(connect))
            while True:
                data = await self._transport.receive(DEFAULT_RECEIVE_SIZE)
                try:
                    self._conn.receive_data(data)
                    frame = self._conn.next_frame()
                except ProtocolError as exc:
                    raise ConnectionBrokenError(f"bad handshake from {self.url}: {exc}") from exc
                if frame is CLOSED:
                    raise ConnectionBrokenError(f"{self.url} closed during the handshake")
                if frame is None:
                    continue
                if isinstance(frame.command, c.Error):
                    # A refused CONNECT (ServerCnx.authenticationFailed): its code, e.g. the
                    # non-retriable AuthenticationError, not a broken connection to retry.
                    raise BrokerError.for_code(frame.command.error, frame.command.message or "")
                assert isinstance(frame.command, c.Connected)  # Connection enforces it
                return frame.command

        try:
            connected = await with_deadline(self._clock, deadline, exchange, "CONNECT")
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._transport.aclose()
            raise
        self.protocol_version = connected.protocol_version
        if connected.max_message_size:
            self.max_message_size = connected.max_message_size
        return connected

    # ---- pump ----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Pump until the connection ends or `aclose` is called; never raises for a broken link."""
        try:
            with self._scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._guard, self._write_loop)
                    if self._keep_alive_interval is not None:
                        tg.start_soon(self._guard, self._keep_alive_loop)
                    await self._guard(self._read_loop)
        finally:
            self._teardown()
            with anyio.CancelScope(shield=True):
                await self._transport.aclose()
            self._finished.set()

    async def aclose(self) -> None:
        """Close the connection and wait until its tasks have ended."""
        self._stop(ClientClosedError(f"connection to {self.url} closed by the client"))
        await self._finished.wait()

    def _stop(self, reason: Exception) -> None:
        if self._close_reason is None:
            self._close_reason = reason
        self._scope.cancel()

    async def _guard(self, loop: Callable[[], Awaitable[None]]) -> None:
        # Every way a loop can end is a reason to end the whole connection.
        try:
            await loop()
        except (ConnectionBrokenError, ClientClosedError, ProtocolError) as exc:
            self._stop(exc if isinstance(exc, ClientClosedError) else _broken(exc))
        else:
            self._stop(ConnectionBrokenError(f"{self.url} closed the connection"))

    async def _read_loop(self) -> None:
        conn = self._conn
        dispatch = self._dispatch_table
        # Frames that arrived with CONNECTED are already buffered; drain them first.
        while True:
            while True:
                frame = conn.next_frame()
                if frame is None:
                    break
                if frame is CLOSED:
                    return
                self._frames_received += 1
                dispatch[type(frame.command)](frame)
            data = await self._transport.receive(DEFAULT_RECEIVE_SIZE)
            conn.receive_data(data)

    async def _write_loop(self) -> None:
        transport = self._transport
        while True:
            await self._wakeup.wait()
            self._wakeup = anyio.Event()
            out, self._outbox = self._outbox, []
            self._sending = True
            await transport.send(out[0] if len(out) == 1 else b"".join(out))
            self._sending = False

    async def _keep_alive_loop(self) -> None:
        assert self._keep_alive_interval is not None
        ping = self._conn.send(c.Ping())
        seen_at_ping: int | None = None
        while True:
            await self._clock.sleep(self._keep_alive_interval)
            if seen_at_ping is not None and self._frames_received == seen_at_ping:
                # spec §3.2: a PING sent one interval ago and nothing received since.
                raise ConnectionBrokenError(f"{self.url} did not answer PING")
            seen_at_ping = self._frames_received
            self.write(ping)

    def _teardown(self) -> None:
        reason = self._close_reason or ConnectionBrokenError(f"{self.url} connection ended")
        self._close_reason = reason
        self._conn.close()
        error = (
            reason
            if isinstance(reason, ConnectionBrokenError)
            else ConnectionBrokenError(f"connection to {self.url} closed: {reason}")
        )
        pending, self._pending = self._pending, {}
        for future in pending.values():
            future.set_exception(error)
        producers, self.producers = self.producers, {}
        consumers, self.consumers = self.consumers, {}
        for producer in producers.values():
            producer.handle_close(self)
        for consumer in consumers.values():
            consumer.handle_close(self)
        if self._on_closed is not None:
            self._on_closed(self)

    # ---- writing -------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Write ready-made frame bytes, at once if possible, else through the writer.

        At once when nothing is queued or being sent ahead of them and the transport takes them
        without waiting; otherwise queued, and the writer sends everything queued in one go.

        Raises:
            ConnectionBrokenError: the connection has ended.
        """
        self._check_open()
        outbox = self._outbox
        if not outbox and not self._sending:
            # Nothing is ahead of this frame: a transport that takes it at once saves waking the
            # writer (in a simulation, a round of the event loop per write).
            try:
                if self._transport.send_nowait(data):
                    return
            except (ConnectionBrokenError, ClientClosedError) as exc:
                # As when the writer's send fails: the connection ends and its teardown tells
                # every pending request and handler; the caller's frame is as good as queued.
                self._stop(exc if isinstance(exc, ClientClosedError) else _broken(exc))
                return
        outbox.append(data)
        # The writer renews the event and takes the outbox together, so the event is already
        # set whenever the outbox held something: only the first frame has to wake it.
        if len(outbox) == 1:
            self._wakeup.set()

    def _check_open(self) -> None:
        if self._close_reason is not None or self._conn.state is State.CLOSED:
            raise ConnectionBrokenError(f"connection to {self.url} is closed")

    def send_command(self, command: c.Command) -> None:
        """Queue a command that expects no reply (FLOW, ACK, REDELIVER, ...).

        Raises:
            ConnectionBrokenError: the connection has ended.
        """
        self._check_open()
        self.write(self._conn.send(command))

    def request(self, command: c.Command) -> Future[c.Command]:
        """Queue a request and return the future of its reply.

        The future fails with the `BrokerError` of an ERROR reply, with `ConnectionBrokenError`
        when the connection ends first; failure-form replies (LOOKUP_RESPONSE Failed, ...) are
        returned as they are for the caller to interpret.

        Raises:
            ConnectionBrokenError: the connection has ended.
        """
        key = (_REQUEST_KIND.get(type(command), "generic"), _request_id(command))
        future: Future[c.Command] = Future()
        self._check_open()
        self.write(self._conn.send(command))
        self._pending[key] = future
        # A request that timed out must not leave its slot behind.
        future.add_done_callback(lambda _f: self._forget_request(key))
        return future

    def _forget_request(self, key: tuple[str, int]) -> None:
        self._pending.pop(key, None)

    # ---- registration --------------------------------------------------------------------------

    def add_producer(self, producer_id: int, producer: ProducerListener) -> None:
        """Route this connection's frames for `producer_id` to `producer`."""
        self.producers[producer_id] = producer

    def remove_producer(self, producer_id: int) -> None:
        """Stop routing frames for `producer_id` (unknown ids are ignored)."""
        self.producers.pop(producer_id, None)

    def add_consumer(self, consumer_id: int, consumer: ConsumerListener) -> None:
        """Route this connection's frames for `consumer_id` to `consumer`."""
        self.consumers[consumer_id] = consumer

    def remove_consumer(self, consumer_id: int) -> None:
        """Stop routing frames for `consumer_id` (unknown ids are ignored)."""
        self.consumers.pop(consumer_id, None)

    # ---- dispatch ------------------------------------------------------------------------------

    def _on_message(self, frame: Frame) -> None:
        command: c.Message = frame.command  # type: ignore[assignment]  # routed by type
        consumer = self.consumers.get(command.consumer_id)
        if consumer is not None and frame.payload is not None:
            consumer.handle_message(command, frame.payload, self)

    def _on_send_receipt(self, frame: Frame) -> None:
        command: c.SendReceipt = frame.command  # type: ignore[assignment]  # routed by type
        producer = self.producers.get(command.producer_id)
        if producer is not None and not producer.handle_receipt(command):
            raise ConnectionBrokenError(
                f"receipt for sequence id {command.sequence_id} does not match the pending sends"
            )

    def _on_send_error(self, frame: Frame) -> None:
        command: c.SendError = frame.command  # type: ignore[assignment]  # routed by type
        producer = self.producers.get(command.producer_id)
        # spec §6.3: anything but ChecksumError closes the connection, like the C++ client.
        if producer is None or not producer.handle_send_error(command):
            raise ConnectionBrokenError(
                f"SEND_ERROR {ServerError(command.error).name}: {command.message}"
            )

    def _on_response(self, frame: Frame) -> None:
        command = frame.command
        if isinstance(command, c.ProducerSuccess) and not command.producer_ready:
            return  # WaitForExclusive: a second PRODUCER_SUCCESS follows (spec §6.1)
        key = (_RESPONSE_KIND[type(command)], _request_id(command))
        future = self._pending.pop(key, None)
        if future is not None:
            future.set_result(command)

    def _on_error(self, frame: Frame) -> None:
        command: c.Error = frame.command  # type: ignore[assignment]  # routed by type
        future = self._pending.pop(("generic", command.request_id), None)
        if future is not None:
            future.set_exception(BrokerError.for_code(command.error, command.message))

    def _on_close_producer(self, frame: Frame) -> None:
        command: c.CloseProducer = frame.command  # type: ignore[assignment]  # routed by type
        producer = self.producers.pop(command.producer_id, None)
        if producer is not None:
            producer.handle_close(self)

    def _on_close_consumer(self, frame: Frame) -> None:
        command: c.CloseConsumer = frame.command  # type: ignore[assignment]  # routed by type
        consumer = self.consumers.pop(command.consumer_id, None)
        if consumer is not None:
            consumer.handle_close(self)

    def _on_ping(self, frame: Frame) -> None:
        self.send_command(c.Pong())

    def _on_active_consumer_change(self, frame: Frame) -> None:
        command: c.ActiveConsumerChange = frame.command  # type: ignore[assignment]  # routed by type
        consumer = self.consumers.get(command.consumer_id)
        if consumer is not None:
            consumer.handle_active_change(command.is_active)


def _request_id(command: c.Command) -> int:
    """The `request_id` of a request or response (every kind routed here has one)."""
    value = getattr(command, "request_id", None)
    if not isinstance(value, int):
        raise LocalProtocolError(f"{type(command).__name__} has no request id")
    return value


def _ignore(frame: Frame) -> None:
    return None


def _broken(exc: Exception) -> ConnectionBrokenError:
    if isinstance(exc, ConnectionBrokenError):
        return exc
    broken = ConnectionBrokenError(f"protocol violation: {exc}")
    broken.__cause__ = exc
    return broken
