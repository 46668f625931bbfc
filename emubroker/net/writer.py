"""The write side of a session: the outbox, its writability, its cap, and the writer task.

Everything the broker sends a client is queued in the outbox without blocking (topics and
handlers never wait for a socket); the writer task drains it. Three rules bound what a peer that
reads slowly, or not at all, can make the broker hold:

1. **Writability** (Netty's): more than ``WRITE_BUFFER_HIGH_WATER_MARK`` queued makes the
   connection *unwritable* until the queue is below ``WRITE_BUFFER_LOW_WATER_MARK``. Dispatchers
   send nothing to an unwritable consumer (non-persistent ones drop, persistent ones wait), and
   the session stops reading an unwritable connection, so a peer that does not read its replies
   (receipts, lookups) stops being served rather than piling them up.
2. **Cap**: a connection with more than ``OUTBOUND_CAP`` queued is closed at once, its queue
   dropped. With rule 1 only a burst within one read (e.g. many large replies to small
   requests) can get there; it bounds what one connection costs whatever the peer does.
3. **Slices**: the writer joins at most ``WRITE_SLICE`` bytes into one write, so a large queue
   is never copied whole into one buffer (queued MESSAGE sections are the stored bytes, shared
   with the ledger; a join is the only copy).

:class:`SessionWriter` is a base of ``Session`` (not a member) so that the hot sink methods add
to the outbox without another attribute hop.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

import anyio

if TYPE_CHECKING:
    from anyio.abc import ByteStream

__all__ = [
    "OUTBOUND_CAP",
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

OUTBOUND_CAP: Final = 64 * 1024 * 1024
"""Queued outbound bytes past which the connection is closed. Pulsar has no such cap (Netty's
buffer grows until the JVM runs out of direct memory). Writability (rule 1) keeps a connection
near the high water mark: dispatch stops for it and reading stops, so what can still arrive is
one message (``maxMessageSize``, 5 MiB) or the replies to one read's requests. bench/abuse.py
measures a consumer with a 1,000-message receiver queue of 1 MiB messages at 4-9 MiB queued;
16 high water marks leave room for that and for a large topic listing, and still bound a
connection to a fixed share of memory."""

WRITE_SLICE: Final = 1024 * 1024
"""Most bytes joined into one write. Below it (nearly always) the whole outbox goes in one
``send``, one syscall for a burst of frames; a bigger queue is written in slices of about this
size, so the writer never copies more than this at once."""

FLUSH_GUARD_SECONDS: Final = 5.0
"""How long a closing session may spend writing its last replies before it gives up. A guard
against a peer that stopped reading, not behaviour (STYLE.md §3), so it is real time."""


class SessionWriter:
    """The outbox of one connection and the task that writes it (see the module docstring)."""

    def __init__(self, stream: ByteStream, peer: str) -> None:
        self._stream = stream
        self.peer = peer
        self._outbox: list[bytes] = []
        self._queued = 0  # bytes in the outbox and in the write under way
        self.writable = True  # rule 1
        self._wakeup = anyio.Event()
        self._woken = False  # _wakeup was set since the writer last emptied the outbox
        self._writer_done = anyio.Event()
        self._closing = False
        self._aborted = False
        self._wrote = False  # a write completed since the keep-alive last looked
        self.close_reason = ""

    # ---- hooks for the session ----------------------------------------------------------------

    def _unwritable(self) -> None:
        """The queue went over the high water mark (the session stops reading)."""

    def _writable_again(self) -> None:
        """The queue went under the low water mark (the session reads again)."""

    def abort(self, reason: str) -> None:
        """Hang up at once, dropping what is queued (the session's ``close`` without the flush)."""
        raise NotImplementedError

    # ---- queueing -----------------------------------------------------------------------------

    def _count(self, size: int) -> None:
        """``size`` more bytes are queued: rules 1 and 2."""
        self._queued += size
        if self._queued > WRITE_BUFFER_HIGH_WATER_MARK:
            if self.writable:
                self.writable = False
                self._unwritable()
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

    # ---- the writer task ----------------------------------------------------------------------

    def _next_write(self) -> bytes:
        """Take the next write from the outbox (rule 3)."""
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
                # The socket took it all (anyio's send returns only then).
                self._wrote = True
                if self._aborted:
                    return
                self._queued -= len(data)
                if not self.writable and self._queued < WRITE_BUFFER_LOW_WATER_MARK:
                    self.writable = True
                    self._writable_again()
        finally:
            self._writer_done.set()

    def _write_failed(self, exc: Exception) -> None:
        """A write failed: the connection is broken."""
        raise NotImplementedError
