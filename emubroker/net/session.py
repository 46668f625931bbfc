"""One client connection: a thin pump around the sans-IO ``protocol.connection.Connection``.

STYLE.md §1.2: all protocol decisions live in the core; this module only moves bytes. A session
runs three tasks in one task group:

* the **reader** receives up to ``RECEIVE_SIZE`` bytes, feeds them to the ``Connection``, drains
  every complete frame and hands each to the handler (synchronously: FLOW, ACK and SEND are
  dispatched without a task or an ``await`` per frame), then calls the handler's ``flush`` so
  that it publishes the read's SENDs at once;
* the **writer** drains the outbox: everything queued since its last wake-up is joined and written
  with one ``send``, so a burst of MESSAGE frames or receipts costs one syscall, not one each;
* the **keep-alive** pings a silent client and drops it when it stays silent (spec §3.2).

The session is also the ``ConsumerSink``/``ProducerSink`` the topics write to: MESSAGE frames are
built from the stored payload section without re-encoding the entry (spec §2.2 "practical trick").

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

from protocol import commands as c
from protocol.connection import CLOSED, Connection, Role, State
from protocol.errors import LocalProtocolError, RemoteProtocolError
from protocol.framing import encode_message_head

if TYPE_CHECKING:
    from collections.abc import Sequence

    from anyio.abc import ByteStream, TaskStatus

    from emubroker.net.traffic import TrafficCounter
    from protocol.clock import Clock
    from protocol.framing import Frame

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

WRITE_BUFFER_HIGH_WATER_MARK: Final = 4 * 1024 * 1024
"""Outbound bytes queued (in the outbox or in a write the socket has not taken) above which the
connection is not *writable*, as a Netty channel turns unwritable above its write buffer's high
water mark; non-persistent dispatchers then drop what they would send to it (Pulsar's
``cnx.isWritable()``). Pulsar keeps Netty's 64 KiB, but Netty hands every flush to the kernel at
once, so its buffer only fills once the socket does. Ours fills by whole reads: one producer
read (``RECEIVE_SIZE``, 256 KiB of SENDs) queues as many bytes of MESSAGEs for a subscriber
before its writer runs, even one that reads at full speed. 16 such reads fit under the mark, so
a subscriber that keeps up never looks unwritable, and one that stops reading costs the broker
at most this much (plus the kernel's socket buffers) however fast its topic is published."""

WRITE_BUFFER_LOW_WATER_MARK: Final = WRITE_BUFFER_HIGH_WATER_MARK // 2
"""An unwritable connection is writable again once its queued bytes fall below this (Netty's
low water mark is half its high one too), so writability does not flip with every write."""

FLUSH_GUARD_SECONDS: Final = 5.0
"""How long a closing session may spend writing its last replies before it gives up. A guard
against a peer that stopped reading, not behaviour (STYLE.md §3), so it is real time."""


class FrameHandler(Protocol):
    """What a session drives: the per-connection command handler (``emubroker.handlers``)."""

    async def run(self, *, task_status: TaskStatus[None]) -> None:
        """Own the handler's request tasks; on exit (cancellation) release its resources."""
        ...

    def handle_frame(self, frame: Frame) -> None:
        """Handle one frame from the client; must not block."""
        ...

    def flush(self) -> None:
        """The frames of one read were handled: finish what they queued; must not block."""
        ...

    def consumer_closed_by_broker(self, consumer_id: int) -> None:
        """The topics closed this consumer (unload, seek); forget it before telling the client."""
        ...

    def producer_closed_by_broker(self, producer_id: int) -> None:
        """The topics closed this producer (unload, fencing); forget it, then tell the client."""
        ...


class Session:
    """The broker's side of one TCP connection.

    Args:
        stream: The connection's byte stream; the session closes it when done.
        handler_factory: Builds the command handler for this session.
        clock: Drives the keep-alive.
        max_frame_size: Largest frame accepted (``maxMessageSize`` + ``FRAME_PADDING``, §2.3).
        keepalive_interval: Seconds of silence before a PING, and again before giving up.
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
        traffic: TrafficCounter | None = None,
    ) -> None:
        self._stream = stream
        self._traffic = traffic
        self._clock = clock
        self._keepalive_interval = keepalive_interval
        self.connection = Connection(Role.BROKER, max_frame_size=max_frame_size)
        self.peer = _peer_name(stream)
        self.peer_certificate: bytes | None = stream.extra(
            TLSAttribute.peer_certificate_binary, None
        )
        """The TLS client certificate the handshake verified (DER); None without one."""
        self._outbox: list[bytes] = []
        self._queued = 0  # bytes in the outbox and in the write under way
        self.writable = True  # see WRITE_BUFFER_HIGH_WATER_MARK
        self._wakeup = anyio.Event()
        self._woken = False  # _wakeup was set since the writer last emptied the outbox
        self._writer_done = anyio.Event()
        self._read_scope = anyio.CancelScope()
        self._heard = False  # a frame arrived since the keep-alive last looked
        self._closing = False
        self.close_reason = ""
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
                # Flush the last replies (e.g. an ERROR before a close) before hanging up.
                with anyio.move_on_after(FLUSH_GUARD_SECONDS):
                    await self._writer_done.wait()
                tg.cancel_scope.cancel()
        finally:
            self._closing = True
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

    @property
    def queued_bytes(self) -> int:
        """Bytes queued for the client and not yet taken by the socket."""
        return self._queued

    @property
    def closing(self) -> bool:
        """True once the session stopped reading (nothing more will be handled)."""
        return self._closing or bool(self.close_reason)

    # ---- reading -----------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        conn = self.connection
        handler = self._handler
        stream = self._stream
        traffic = self._traffic
        while True:
            try:
                data = await stream.receive(RECEIVE_SIZE)
            except anyio.EndOfStream:
                data = b""
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                self.close(f"read failed: {exc!r}")
                return
            if traffic is not None:
                traffic.bytes_in += len(data)
            self._heard = True
            conn.receive_data(data)
            while True:
                try:
                    frame = conn.next_frame()
                except RemoteProtocolError as exc:
                    self.close(f"protocol error: {exc}")
                    return
                if frame is None:
                    try:
                        handler.flush()
                    except Exception:
                        log.exception("handler failed finishing a read from %s", self.peer)
                        self.close("internal error handling SENDs")
                        return
                    break
                if frame is CLOSED:
                    self.close("client closed the connection", error=False)
                    return
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
                    return
                if self.close_reason:
                    return

    # ---- writing -----------------------------------------------------------------------------

    def send_command(self, command: c.Command) -> None:
        """Queue a command (no payload) for the client; dropped once the session is closing."""
        if self._closing:
            return
        try:
            data = self.connection.send(command)
        except LocalProtocolError as exc:
            # Only reachable once the core closed the connection (bad input just now).
            log.debug("not sending %s to %s: %s", type(command).__name__, self.peer, exc)
            return
        self._outbox.append(data)
        self._count(len(data))
        self._wake()

    def _count(self, size: int) -> None:
        """``size`` more bytes are queued: past the high water mark the session is unwritable."""
        self._queued += size
        if self._queued > WRITE_BUFFER_HIGH_WATER_MARK:
            self.writable = False

    def _wake(self) -> None:
        if not self._woken:
            self._woken = True
            self._wakeup.set()

    async def _write_loop(self) -> None:
        stream = self._stream
        try:
            while True:
                if not self._outbox:
                    if self._closing:
                        return
                    self._wakeup = anyio.Event()
                    self._woken = False
                    await self._wakeup.wait()
                    continue
                out, self._outbox = self._outbox, []
                data = out[0] if len(out) == 1 else b"".join(out)
                del out
                try:
                    await stream.send(data)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    self._outbox.clear()
                    self._closing = True
                    self.close(f"write failed: {exc!r}")
                    return
                # The socket took it all (anyio's send returns only then).
                self._queued -= len(data)
                if self._traffic is not None:
                    self._traffic.bytes_out += len(data)
                if self._queued < WRITE_BUFFER_LOW_WATER_MARK:
                    self.writable = True
        finally:
            self._writer_done.set()

    # ---- keep-alive (spec §3.2) --------------------------------------------------------------

    async def _keepalive_loop(self) -> None:
        pinged = False
        while True:
            await self._clock.sleep(self._keepalive_interval)
            if self._heard:
                self._heard = False
                pinged = False
                continue
            if self.connection.state is not State.OPEN:
                # Pulsar's PulsarHandler: no handshake within one interval ends the connection.
                self.close("no CONNECT within the keep-alive interval")
                return
            if pinged:
                self.close("keep-alive timeout: the client did not answer PING")
                return
            self.send_command(c.Ping())
            pinged = True

    # ---- ConsumerSink / ProducerSink ---------------------------------------------------------

    def send_message(
        self,
        consumer_id: int,
        ledger_id: int,
        entry_id: int,
        partition: int,
        redelivery_count: int,
        ack_set: tuple[int, ...],
        section: bytes,
    ) -> None:
        """Queue one MESSAGE (spec §7.2): the command plus the stored payload section."""
        if self._closing:
            return
        # Head and section go to the outbox apart: the writer's join is their only copy.
        head = encode_message_head(
            consumer_id, ledger_id, entry_id, partition, redelivery_count, ack_set, len(section)
        )
        self._outbox += (head, section)
        self._count(len(head) + len(section))
        if not self._woken:
            self._wake()

    def send_receipts(
        self, producer_id: int, sequence_ids: Sequence[int], positions: Sequence[tuple[int, int]]
    ) -> None:
        """Queue SEND_RECEIPTs: each sequence id with its ``(ledger, entry)`` (spec §6.2)."""
        if self._closing:
            return
        try:
            data = self.connection.send_receipts(producer_id, sequence_ids, positions)
        except LocalProtocolError as exc:
            log.debug("not sending receipts to %s: %s", self.peer, exc)
            return
        self._outbox.append(data)
        self._count(len(data))
        if not self._woken:
            self._wake()

    def close_consumer(self, consumer_id: int) -> None:
        """Tell the client the broker closed a consumer (§9); it reconnects and resubscribes."""
        self._handler.consumer_closed_by_broker(consumer_id)
        self.send_command(
            c.CloseConsumer(consumer_id=consumer_id, request_id=self.connection.next_request_id())
        )

    def active_consumer_change(self, consumer_id: int, is_active: bool) -> None:
        """Tell a Failover consumer whether it is now the active one (§7.1)."""
        self.send_command(c.ActiveConsumerChange(consumer_id=consumer_id, is_active=is_active))

    def close_producer(self, producer_id: int) -> None:
        """Tell the client the broker closed a producer (§9); it reconnects and re-sends."""
        self._handler.producer_closed_by_broker(producer_id)
        self.send_command(
            c.CloseProducer(producer_id=producer_id, request_id=self.connection.next_request_id())
        )


HandlerFactory = Callable[[Session], FrameHandler]
"""Builds the handler of a new session (the app binds the broker's services into it)."""


def _peer_name(stream: ByteStream) -> str:
    address = stream.extra(SocketAttribute.remote_address, None)
    if isinstance(address, tuple):
        return f"{address[0]}:{address[1]}"
    return str(address) if address is not None else "memory"
