"""The write side of a session: the outbox, its writability, its caps, and the writer task.

Everything the broker sends a client is queued in the outbox without blocking (topics and
handlers never wait for a socket); the writer task drains it. Four rules bound what a peer that
reads slowly, or not at all, can make the broker hold:

1. **Writability** (Netty's): more than ``WRITE_BUFFER_HIGH_WATER_MARK`` queued makes the
   connection *unwritable* until the queue is below ``WRITE_BUFFER_LOW_WATER_MARK``. Dispatchers
   send nothing to an unwritable consumer: non-persistent ones drop, persistent ones wait (the
   entries stay in the ledger) until ``writable_again``.
2. **Reading stops** past ``READ_PAUSE_MARK``, twice the high water mark, until the queue is
   below the low one. Dispatch alone stops at the high water mark (plus one entry), so only
   replies the peer does not read get there: receipts of a producer that never reads them, the
   answers to a flood of lookups. Not reading its requests stops the replies.
3. **Cap**: a connection with more than ``OUTBOUND_CAP`` queued is closed at once and its queue
   dropped. With rules 1 and 2 only a burst within one read (many large replies to small
   requests) can get there; it bounds what one connection costs whatever the peer does.
4. **Slices**: the writer joins at most ``WRITE_SLICE`` bytes into one write, so a large queue
   is never copied whole into one buffer (queued MESSAGE sections are the stored bytes, shared
   with the ledger; a join is their only copy).

**Written at once** when nothing is queued or being written and the stream takes bytes without
waiting: an in-memory pipe (``protocol.client.transport.MemoryByteStream``, the simulator's and
the broker's own client's) has ``send_nowait``, which answers True when it took them whole and
False when it has no room; a socket has no such method and always goes through the writer, so
a burst of replies to one read still costs one syscall. In a simulation this saves waking the
writer task per frame, a round of the event loop each. Order holds: a frame is written at once
only when no byte is queued ahead of it.

:class:`SessionWriter` is a base of ``Session`` (not a member) so that the sink methods that
topics call per message add to the outbox without another attribute hop.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

import anyio

from protocol.errors import LocalProtocolError
from protocol.framing import encode_message_head, encode_message_heads

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from anyio.abc import ByteStream

    from emubroker.net.traffic import TrafficCounter
    from protocol import commands as c
    from protocol.connection import Connection

__all__ = [
    "OUTBOUND_CAP",
    "READ_PAUSE_MARK",
    "WRITE_BUFFER_HIGH_WATER_MARK",
    "WRITE_BUFFER_LOW_WATER_MARK",
    "WRITE_SLICE",
    "SessionWriter",
]

log = logging.getLogger(__name__)

WRITE_BUFFER_HIGH_WATER_MARK: Final = 4 * 1024 * 1024
"""Outbound bytes queued (in the outbox or in a write the socket has not taken) above which the
connection is not *writable*, as a Netty channel turns unwritable above its write buffer's high
water mark (Pulsar's ``cnx.isWritable()``). Pulsar keeps Netty's 64 KiB, but Netty hands every
flush to the kernel at once, so its buffer only fills once the socket does. Ours fills by whole
reads: one producer read (256 KiB of SENDs) queues as many bytes of MESSAGEs for a subscriber
before its writer runs, even one that reads at full speed. 16 such reads fit under the mark, so
a subscriber that keeps up never looks unwritable."""

WRITE_BUFFER_LOW_WATER_MARK: Final = WRITE_BUFFER_HIGH_WATER_MARK // 2
"""An unwritable connection is writable again once its queued bytes fall below this (Netty's
low water mark is half its high one too), so writability does not flip with every write."""

READ_PAUSE_MARK: Final = 2 * WRITE_BUFFER_HIGH_WATER_MARK
"""Queued bytes past which the session stops reading the connection (rule 2). Not at the high
water mark itself: a client whose consumer has MESSAGEs queued up to it (a fast subscriber of a
busy topic, with its producer on the same connection, as the official client shares one per
broker) must not have its SENDs left unread meanwhile."""

OUTBOUND_CAP: Final = 64 * 1024 * 1024
"""Queued outbound bytes past which the connection is closed. Pulsar has no such cap (Netty's
buffer grows until the JVM runs out of direct memory). Rules 1 and 2 keep a connection near the
marks: dispatch stops at the high water mark, reading at twice it, so what can still arrive is
one message (``maxMessageSize``, 5 MiB) or the replies to one read's requests (a 256 KiB read of
requests whose answers are large, a topic listing). 16 high water marks leave room for those and
still bound a connection to a fixed share of memory; bench/abuse.py shows the official client's
consumers of 1 MiB messages stay under 10 MiB."""

WRITE_SLICE: Final = 1024 * 1024
"""Most bytes joined into one write. Below it (nearly always) the whole outbox goes in one
``send``, one syscall for a burst of frames; a bigger queue is written in slices of about this
size, so the writer never copies more than this at once."""

FLUSH_GUARD_SECONDS: Final = 5.0
"""How long a closing session may spend writing its last replies before it gives up. A guard
against a peer that stopped reading, not behaviour (STYLE.md §3), so it is real time."""


class SessionWriter:
    """The outbox of one connection, its sinks and the task that writes it (module docstring).

    Args:
        stream: The connection's byte stream.
        peer: The client's address, for logs.
        connection: The sans-IO connection whose commands are queued.
        traffic: Counts the bytes written (the broker's own bandwidth); None: not counted.
    """

    def __init__(
        self,
        stream: ByteStream,
        peer: str,
        connection: Connection,
        traffic: TrafficCounter | None = None,
    ) -> None:
        self._stream = stream
        # An in-memory pipe's ``send_nowait`` (module docstring); None for a socket.
        self._send_nowait: Callable[[bytes], bool] | None = getattr(stream, "send_nowait", None)
        self._traffic = traffic
        self.peer = peer
        self.connection = connection
        self._outbox: list[bytes] = []
        self._queued = 0  # bytes in the outbox and in the write under way
        self.writable = True  # rule 1
        self._reading_stopped = False  # rule 2
        self._wakeup = anyio.Event()
        self._woken = False  # _wakeup was set since the writer last emptied the outbox
        self._writer_done = anyio.Event()
        self._closing = False
        self._aborted = False
        self._wrote = False  # a write completed since the keep-alive last looked
        self.close_reason = ""

    # ---- what the session does about it -------------------------------------------------------

    def _not_reading_replies(self) -> None:
        """Rule 2: the queue went past the read pause mark (the session stops reading)."""

    def _writable_again(self) -> None:
        """The queue went under the low water mark (reading and deliveries resume)."""

    def _write_failed(self, exc: Exception) -> None:
        """A write failed: the connection is broken."""

    def abort(self, reason: str) -> None:
        """Hang up at once, dropping what is queued."""
        raise NotImplementedError

    # ---- queueing -----------------------------------------------------------------------------

    def _count(self, size: int) -> None:
        """``size`` more bytes are queued: rules 1 to 3."""
        self._queued += size
        if self._queued > WRITE_BUFFER_HIGH_WATER_MARK:
            self.writable = False
            if self._queued > READ_PAUSE_MARK and not self._reading_stopped:
                self._reading_stopped = True
                self._not_reading_replies()
            if self._queued > OUTBOUND_CAP:
                self.abort(
                    f"the client does not read: {self._queued} bytes queued for it,"
                    f" over the cap of {OUTBOUND_CAP}"
                )

    def _drop_outbox(self) -> None:
        self._closing = True
        self._aborted = True
        self._outbox = []
        self._queued = 0

    def _wake(self) -> None:
        if not self._woken:
            self._woken = True
            self._wakeup.set()

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
        if not self._queued and self._send_nowait is not None and self._write_now(data):
            return
        self._outbox.append(data)
        self._count(len(data))
        self._wake()

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
        if (
            not self._queued
            and self._send_nowait is not None
            and self._write_now(b"".join((head, section)))
        ):
            return
        self._outbox += (head, section)
        self._queued += len(head) + len(section)
        if self._queued > WRITE_BUFFER_HIGH_WATER_MARK:  # _count's rules, past its common case
            self._count(0)
        if not self._woken:
            self._wake()

    def send_messages(
        self, consumer_id: int, ledger_id: int, entry_id: int, partition: int, sections: list[bytes]
    ) -> int:
        """Queue first deliveries of consecutive entries, as ``send_message`` of each in turn.

        The dispatch hot path (``ConsumerSink.send_messages``): the heads are written in one
        call, and a run that leaves the connection writable is queued with one list operation.

        Returns:
            How many were queued: all, or up to the one that made the connection unwritable.
        """
        if self._closing:
            return len(sections)
        heads = encode_message_heads(
            consumer_id, ledger_id, entry_id, partition, map(len, sections)
        )
        size = sum(map(len, heads)) + sum(map(len, sections))
        if self._queued + size <= WRITE_BUFFER_HIGH_WATER_MARK:
            frames: list[bytes] = [b""] * (2 * len(heads))
            frames[::2] = heads
            frames[1::2] = sections
            if (
                not self._queued
                and self._send_nowait is not None
                and self._write_now(b"".join(frames))
            ):
                return len(sections)
            self._outbox += frames
            self._queued += size
            if not self._woken:
                self._wake()
            return len(sections)
        sent = 0
        for head, section in zip(heads, sections, strict=True):
            if not self.writable:
                break  # as the dispatcher stops before an entry for an unwritable consumer
            self._outbox += (head, section)
            self._queued += len(head) + len(section)
            if self._queued > WRITE_BUFFER_HIGH_WATER_MARK:
                self._count(0)
            sent += 1
        self._wake()
        return sent

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
        if not self._queued and self._send_nowait is not None and self._write_now(data):
            return
        self._outbox.append(data)
        self._count(len(data))
        if not self._woken:
            self._wake()

    def _write_now(self, data: bytes) -> bool:
        """Write ``data`` straight to an in-memory pipe (nothing may be queued ahead of it).

        Returns:
            True when it is dealt with: written whole, or the pipe broke (the session closes,
            as when the writer's send fails); False when the pipe has no room (queue it).
        """
        assert self._send_nowait is not None
        try:
            if not self._send_nowait(data):
                return False
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            self._drop_outbox()
            self._write_failed(exc)
            self._wake()  # the writer task ends (the session is closing)
            return True
        self._wrote = True
        if self._traffic is not None:
            self._traffic.bytes_out += len(data)
        return True

    # ---- the writer task ----------------------------------------------------------------------

    @property
    def queued_bytes(self) -> int:
        """Bytes queued for the client and not yet taken by the socket."""
        return self._queued

    def _next_write(self) -> bytes:
        """Take the next write from the outbox (rule 4)."""
        out = self._outbox
        if self._queued <= WRITE_SLICE:  # nothing is being written: _queued is the outbox
            self._outbox = []
            return out[0] if len(out) == 1 else b"".join(out)
        size = 0
        taken = 0
        for part in out:
            size += len(part)
            taken += 1
            if size >= WRITE_SLICE:
                break
        self._outbox = out[taken:]
        return out[0] if taken == 1 else b"".join(out[:taken])

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
                data = self._next_write()
                try:
                    await stream.send(data)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    self._drop_outbox()
                    self._write_failed(exc)
                    return
                # Taken: anyio's send returns once the transport holds at most its high-water
                # mark (64 KiB on asyncio), bytes the kernel takes as the peer reads; they are
                # not counted against the marks above, which are megabytes.
                self._wrote = True
                if self._aborted:
                    return
                self._queued -= len(data)
                if self._traffic is not None:
                    self._traffic.bytes_out += len(data)
                if not self.writable and self._queued < WRITE_BUFFER_LOW_WATER_MARK:
                    self.writable = True
                    self._reading_stopped = False
                    self._writable_again()
        finally:
            self._writer_done.set()
