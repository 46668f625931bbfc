"""One client connection: a thin pump around the sans-IO ``protocol.connection.Connection``.

STYLE.md §1.2: all protocol decisions live in the core; this module only moves bytes. A session
runs three tasks in one task group:

* the **reader** receives up to ``RECEIVE_SIZE`` bytes, feeds them to the ``Connection``, drains
  every complete frame and hands each to the handler (synchronously: FLOW, ACK and SEND are
  dispatched without a task or an ``await`` per frame; consecutive SENDs of one producer go as
  one run, ``protocol.runs``), then calls the handler's ``flush`` so that it publishes the
  read's SENDs at once;
* the **writer** (``emubroker.net.writer``) drains the outbox: everything queued since its last
  wake-up is written with one ``send``, so a burst of MESSAGE frames or receipts costs one
  syscall, not one each;
* the **keep-alive** pings a silent client and drops it when it stays silent (spec §3.2).

The session is also the ``ConsumerSink``/``ProducerSink`` the topics write to: MESSAGE frames are
built from the stored payload section without re-encoding the entry (spec §2.2 "practical trick").

What a client may cost (docs/reliability.md), with the broker-wide state in
``emubroker.net.guards``:

* **Reading pauses** (Pulsar's ``ServerCnxThrottleTracker``: auto-read off) while the connection
  has ``maxPendingPublishRequestsPerConnection`` SENDs waiting for storage (until half of them
  completed), while the broker's pending publish bytes are over
  ``maxMessagePublishBufferSizeInMB`` (until half), and while its peer leaves twice the high
  water mark of replies unread (``emubroker.net.writer`` rule 2).
* **Busy connections take turns** (``ReadGate``): after a read of ``BUSY_READ_BYTES`` or more the
  next read waits for a turn, so a flood from many connections cannot starve a quiet one.
* **Partial frames** count against a broker-wide budget (``PartialFrames``); over it the
  connection whose incomplete frame moved least recently is closed.
* **Keep-alive** counts complete frames, not bytes, as Pulsar's ``PulsarHandler`` does, so a
  peer trickling a frame byte by byte is dropped like a silent one. While reading is paused by
  the broker's own back-pressure it does not judge the peer (Pulsar skips the check while
  auto-read is off); while it is paused because the peer leaves its replies unread, a write that
  completed counts as a sign of life and a peer that takes nothing is dropped.

Bad input (spec §2.5): a frame the core rejects (malformed, oversized, not allowed in this state)
ends this connection with a logged reason; the handler's cleanup still runs, so the session's
producers and consumers are closed and their unacknowledged messages become redeliverable.
Nothing here can take the broker or another connection down.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Protocol

import anyio
from anyio.abc import SocketAttribute
from anyio.streams.tls import TLSAttribute

from emubroker.net.guards import BUSY_READ_BYTES, NetGuards, ReadGate
from emubroker.net.pauses import PENDING_PUBLISHES, REPLIES_UNREAD, ReadPauses
from emubroker.net.writer import (
    FLUSH_GUARD_SECONDS,
    WRITE_BUFFER_HIGH_WATER_MARK,
    WRITE_BUFFER_LOW_WATER_MARK,
    SessionWriter,
)
from protocol import commands as c
from protocol.connection import CLOSED, Connection, Role, State
from protocol.errors import RemoteProtocolError

if TYPE_CHECKING:
    from anyio.abc import ByteStream, TaskStatus

    from emubroker.naming import AssignedBroker
    from emubroker.net.traffic import TrafficCounter
    from protocol.clock import Clock
    from protocol.framing import Frame
    from protocol.runs import SendRun

__all__ = [
    "RECEIVE_SIZE",
    "WRITE_BUFFER_HIGH_WATER_MARK",
    "WRITE_BUFFER_LOW_WATER_MARK",
    "FrameHandler",
    "HandlerFactory",
    "Session",
]

log = logging.getLogger(__name__)

RECEIVE_SIZE: Final = 256 * 1024
"""Bytes asked of the stream per read: what asyncio's transport reads from the socket at once
(``max_size``), so that anyio never splits (and copies) a chunk the transport already holds, and
a busy producer's SENDs are handled a few thousand frames per wake-up."""


class FrameHandler(Protocol):
    """What a session drives: the per-connection command handler (``emubroker.handlers``)."""

    async def run(self, *, task_status: TaskStatus[None]) -> None:
        """Own the handler's request tasks; on exit (cancellation) release its resources."""
        ...

    def handle_frame(self, frame: Frame) -> None:
        """Handle one frame from the client; must not block."""
        ...

    def handle_send_run(self, run: SendRun) -> None:
        """Handle consecutive SENDs of one producer, as ``handle_frame`` of each in turn."""
        ...

    def flush(self) -> None:
        """The frames of one read were handled: finish what they queued; must not block."""
        ...

    def writable_again(self) -> None:
        """The connection takes more again: resume deliveries held back for it."""
        ...

    def consumer_closed_by_broker(self, consumer_id: int) -> None:
        """The topics closed this consumer (unload, seek); forget it before telling the client."""
        ...

    def producer_closed_by_broker(self, producer_id: int) -> None:
        """The topics closed this producer (unload, fencing); forget it, then tell the client."""
        ...


class Session(SessionWriter):
    """The broker's side of one TCP connection.

    Args:
        stream: The connection's byte stream; the session closes it when done.
        handler_factory: Builds the command handler for this session.
        clock: Drives the keep-alive.
        max_frame_size: Largest frame accepted (``maxMessageSize`` + ``FRAME_PADDING``, §2.3).
        keepalive_interval: Seconds of silence before a PING, and again before giving up.
        guards: The broker-wide limits this session counts against (a private set if None).
        traffic: Where the bytes this session reads and writes are counted (the broker's own
            bandwidth, for its load report); None: not counted.
    """

    def __init__(
        self,
        stream: ByteStream,
        handler_factory: Callable[[Session], FrameHandler],
        *,
        clock: Clock,
        max_frame_size: int,
        keepalive_interval: float,
        guards: NetGuards | None = None,
        traffic: TrafficCounter | None = None,
    ) -> None:
        super().__init__(
            stream,
            _peer_name(stream),
            Connection(Role.BROKER, max_frame_size=max_frame_size),
            traffic,
        )
        self._clock = clock
        self._keepalive_interval = keepalive_interval
        self._guards = guards if guards is not None else NetGuards()
        self.peer_certificate: bytes | None = stream.extra(
            TLSAttribute.peer_certificate_binary, None
        )
        """The TLS client certificate the handshake verified (DER); None without one."""
        self._read_scope = anyio.CancelScope()
        self._heard = False  # a frame arrived since the keep-alive last looked
        self._pauses = ReadPauses(self._guards.publish_buffer)
        self._partial = 0  # bytes of an incomplete frame counted in guards.partial_frames
        self._publishing = 0  # bytes of SENDs awaiting storage counted in guards.publish_buffer
        self.stalled = False  # waiting for bytes from the peer (not for a read turn)
        self._ended = False
        self._handler = handler_factory(self)

    # ---- lifetime ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve the connection until the client leaves or the session is closed.

        Never raises (but for cancellation): a failure is logged and ends this connection only.
        """
        if self._traffic is not None:
            self._traffic.opened(self)
        try:
            await self._serve()
        except Exception:
            # Task boundary (STYLE.md §1.17): nothing about one connection may stop the broker.
            log.exception("connection %s failed", self.peer)
            self.close_reason = self.close_reason or "internal error"
        finally:
            if self._traffic is not None:
                self._traffic.closed(self)

    async def _serve(self) -> None:
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(self._handler.run)
                tg.start_soon(self._write_loop)
                tg.start_soon(self._keepalive_loop)
                with self._read_scope:
                    await self._read_loop()
                self._closing = True
                self._wake()
                if not self._aborted:
                    # Flush the last replies (e.g. an ERROR before a close) before hanging up.
                    with anyio.move_on_after(FLUSH_GUARD_SECONDS):
                        await self._writer_done.wait()
                tg.cancel_scope.cancel()
        finally:
            self._closing = self._ended = True
            self._guards.partial_frames.forget(self)
            self._guards.publish_buffer.add(-self._publishing)
            self.connection.close()
            with anyio.CancelScope(shield=True):
                await self._stream.aclose()
            log.info("connection %s closed: %s", self.peer, self.close_reason or "cancelled")

    def close(self, reason: str, *, error: bool = True) -> None:
        """Hang up after flushing what is queued.

        Safe to call from any task and more than once; the first reason wins.

        Args:
            reason: Why, for the log.
            error: Log as a warning (bad input, failures) rather than as routine.
        """
        if not self.close_reason:
            self.close_reason = reason
            if error:
                log.warning("closing connection %s: %s", self.peer, reason)
        self._read_scope.cancel()

    def abort(self, reason: str) -> None:
        """Hang up at once, dropping what is queued (the peer is not reading it anyway)."""
        self.close(reason)
        self._drop_outbox()
        self._wake()

    def _write_failed(self, exc: Exception) -> None:
        self.close(f"write failed: {exc!r}")

    @property
    def closing(self) -> bool:
        """True once the session stopped reading (nothing more will be handled)."""
        return self._closing or bool(self.close_reason)

    # ---- reading pauses ----------------------------------------------------------------------

    @property
    def reading_paused(self) -> frozenset[str]:
        """Why reading is paused now (empty when it is not; ``pauses``)."""
        return self._pauses.reasons()

    def pending_publishes(self, count: int, size: int) -> None:
        """``count`` SENDs of this connection (``size`` bytes) await storage: back-pressure.

        At ``maxPendingPublishRequestsPerConnection`` reading stops until half of them are
        done; the bytes count against the broker's publish buffer (``guards.PublishBuffer``).
        """
        if self._ended:
            return
        if size != self._publishing:
            self._guards.publish_buffer.add(size - self._publishing)
            self._publishing = size
        limit = self._guards.max_pending_publishes
        if limit:
            if count >= limit:
                self._pauses.set(PENDING_PUBLISHES)
            elif count <= limit // 2:
                self._pauses.set(PENDING_PUBLISHES, False)

    def _not_reading_replies(self) -> None:
        self._pauses.set(REPLIES_UNREAD)

    def _writable_again(self) -> None:
        self._pauses.set(REPLIES_UNREAD, False)
        self._handler.writable_again()

    # ---- reading -----------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        guards = self._guards
        buffer = guards.publish_buffer
        gate = guards.read_gate
        pauses = self._pauses
        busy: bool | None = False
        while True:
            if pauses.own or buffer.limited:
                await pauses.wait()
            if busy:
                busy = await self._read_in_turn(gate)
                if busy is None:
                    return
                continue
            data = await self._receive()
            if data is None or not self._handle_read(data):
                return
            busy = len(data) >= BUSY_READ_BYTES

    async def _read_in_turn(self, gate: ReadGate) -> bool | None:
        """A busy connection's read, in its turn (``ReadGate``), held while the read is handled.

        Returns:
            Whether the connection is still busy; None when the session must stop reading.
        """
        turn = await gate.take()
        try:
            data = await self._receive()
            if data is None or not self._handle_read(data):
                return None
            return len(data) >= BUSY_READ_BYTES
        finally:
            if turn:
                gate.give_back()

    async def _receive(self) -> bytes | None:
        """The next bytes (``b""`` at the end of the stream), or None when reading failed."""
        self.stalled = True  # waiting for the peer's bytes (``PartialFrames``)
        try:
            data = await self._stream.receive(RECEIVE_SIZE)
        except anyio.EndOfStream:
            return b""
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            self.close(f"read failed: {exc!r}")
            return None
        finally:
            self.stalled = False
        if self._traffic is not None:
            self._traffic.bytes_in += len(data)
        return data

    def _handle_read(self, data: bytes) -> bool:
        """Handle every complete frame of a read; False when the session must stop reading."""
        conn = self.connection
        handler = self._handler
        conn.receive_data(data)
        heard = False
        while True:
            run = conn.next_send_run()  # the producers' SENDs, most of the frames, a run at once
            if run is not None:
                heard = True
                try:
                    handler.handle_send_run(run)
                except Exception:
                    log.exception("handler failed on SENDs from %s", self.peer)
                    self.close("internal error handling SENDs")
                    return False
                if self.close_reason:
                    return False
                continue
            try:
                frame = conn.next_frame()
            except RemoteProtocolError as exc:
                self.close(f"protocol error: {exc}")
                return False
            if frame is None:
                if heard:
                    self._heard = True
                if conn.buffered != self._partial:
                    self._partial_frame(conn.buffered)
                try:
                    handler.flush()
                except Exception:
                    log.exception("handler failed finishing a read from %s", self.peer)
                    self.close("internal error handling SENDs")
                    return False
                return not self.close_reason
            heard = True
            if frame is CLOSED:
                self.close("client closed the connection", error=False)
                return False
            command = frame.command
            if type(command) is c.Ping:
                self.send_command(c.Pong())  # §3.2: any frame counts, but PING wants PONG
                continue
            if type(command) is c.Pong:
                continue
            try:
                handler.handle_frame(frame)
            except Exception:
                log.exception("handler failed on %s from %s", type(command).__name__, self.peer)
                self.close(f"internal error handling {type(command).__name__}")
                return False
            if self.close_reason:
                return False

    def _partial_frame(self, held: int) -> None:
        """The incomplete frame now holds ``held`` bytes: count it (over budget, others close)."""
        self._partial = held
        self._guards.partial_frames.update(self, held)

    # ---- keep-alive (spec §3.2) --------------------------------------------------------------

    async def _keepalive_loop(self) -> None:
        pinged = False
        while True:
            await self._clock.sleep(self._keepalive_interval)
            heard, wrote = self._heard, self._wrote
            self._heard = self._wrote = False
            if heard:
                pinged = False
                continue
            if self.connection.state is not State.OPEN:
                # Pulsar's PulsarHandler: no handshake within one interval ends the connection.
                self.close("no CONNECT within the keep-alive interval")
                return
            pauses = self.reading_paused
            if pauses and REPLIES_UNREAD not in pauses:
                continue  # we stopped reading it ourselves: its PONG may be waiting unread
            if REPLIES_UNREAD in pauses and wrote:
                pinged = False  # it reads what we send, we do not read it: alive
                continue
            if pinged:
                # Pulsar's ctx.close(): at once, its unwritten replies dropped rather than
                # flushed to a peer that shows no sign of reading them.
                self.abort("keep-alive timeout: the client did not answer PING")
                return
            self.send_command(c.Ping())
            pinged = True

    # ---- ConsumerSink / ProducerSink ---------------------------------------------------------

    def close_consumer(self, consumer_id: int, assigned: AssignedBroker | None = None) -> None:
        """Tell the client the broker closed a consumer (§9); it reconnects and resubscribes.

        There, without a lookup, when ``assigned`` names the bundle's new owner (a transfer).
        """
        self._handler.consumer_closed_by_broker(consumer_id)
        url, url_tls = _assigned_urls(assigned)
        self.send_command(
            c.CloseConsumer(
                consumer_id=consumer_id,
                request_id=self.connection.next_request_id(),
                assigned_broker_service_url=url,
                assigned_broker_service_url_tls=url_tls,
            )
        )

    def active_consumer_change(self, consumer_id: int, is_active: bool) -> None:
        """Tell a Failover consumer whether it is now the active one (§7.1)."""
        self.send_command(c.ActiveConsumerChange(consumer_id=consumer_id, is_active=is_active))

    def reached_end_of_topic(self, consumer_id: int) -> None:
        """Tell a consumer its terminated topic has nothing more for it."""
        self.send_command(c.ReachedEndOfTopic(consumer_id=consumer_id))

    def close_producer(self, producer_id: int, assigned: AssignedBroker | None = None) -> None:
        """Tell the client the broker closed a producer (§9); it reconnects and re-sends.

        There, without a lookup, when ``assigned`` names the bundle's new owner (a transfer).
        """
        self._handler.producer_closed_by_broker(producer_id)
        url, url_tls = _assigned_urls(assigned)
        self.send_command(
            c.CloseProducer(
                producer_id=producer_id,
                request_id=self.connection.next_request_id(),
                assigned_broker_service_url=url,
                assigned_broker_service_url_tls=url_tls,
            )
        )

    def hold_producer(self, producer_id: int) -> None:
        """The producer is closed, its CLOSE_PRODUCER comes later: drop its SENDs meanwhile."""
        self._handler.producer_closed_by_broker(producer_id)


def _assigned_urls(assigned: AssignedBroker | None) -> tuple[str | None, str | None]:
    """The CLOSE_* fields for ``assigned``: both absent without one, no empty TLS URL."""
    if assigned is None:
        return None, None
    return assigned.service_url, assigned.service_url_tls or None


HandlerFactory = Callable[[Session], FrameHandler]
"""Builds the handler of a new session (the app binds the broker's services into it)."""


def _peer_name(stream: ByteStream) -> str:
    address = stream.extra(SocketAttribute.remote_address, None)
    if isinstance(address, tuple):
        return f"{address[0]}:{address[1]}"
    return str(address) if address is not None else "memory"
