"""Broker-wide bounds on what connections may cost: the state sessions share, and its rules.

One :class:`NetGuards` is built per broker and handed to every session (docs/reliability.md):

* :class:`ConnectionCounter`: ``brokerMaxConnections`` and ``brokerMaxConnectionsPerIp``, as
  Pulsar's ``ConnectionController`` counts them (a connection over either gets ERROR
  ``NotAllowedError`` and is closed);
* :class:`PublishBuffer`: bytes of SENDs waiting for storage over all connections
  (``maxMessagePublishBufferSizeInMB``); above it every connection stops reading until it is back
  to half, Pulsar's ``PendingBytesPerThreadTracker`` (one event loop: one IO thread);
* :class:`ReadGate`: fairness. A connection whose last read filled a large part of the read
  buffer is *busy* and takes one of a few turns before it reads again; busy connections queue
  for the turns in order, quiet ones never wait. The event loop runs every ready reader once per
  pass, so without it 200 busy connections put 200 reads (50 MiB) between two turns of a quiet
  client; with it, a pass holds at most ``BUSY_READ_SLOTS`` busy reads (unless their holders
  went quiet, ``TURNS_STUCK_SECONDS``);
* :class:`PartialFrames`: bytes held in incomplete frames over all connections. A frame may be
  up to ``maxMessageSize`` + 10 KiB, and a peer that sends all but its last byte holds that much
  until keep-alive ends it; past the budget connections are closed, first those whose partial
  frame moved least recently while they wait for bytes (stalled senders), then, if that is not
  enough, those whose frame moved least recently at all.

Everything here is synchronous but :meth:`PublishBuffer.wait_resumed` and :meth:`ReadGate.take`.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Final, Protocol

import anyio
import msgspec

if TYPE_CHECKING:
    from emubroker.config import BrokerConfig

__all__ = [
    "BUSY_READ_BYTES",
    "BUSY_READ_SLOTS",
    "PARTIAL_FRAMES_BUDGET",
    "TURNS_STUCK_SECONDS",
    "ConnectionCounter",
    "NetGuards",
    "PartialFrames",
    "PartialHolder",
    "PublishBuffer",
    "ReadGate",
]

BUSY_READ_BYTES: Final = 64 * 1024
"""A read at least this big marks its connection busy for the next read (see ``ReadGate``). A
quiet client's reads (a few frames of requests, acks or small messages) stay far below it; a
producer streaming at full speed, or a peer sending multi-megabyte frames, fills the 256 KiB
read buffer."""

BUSY_READ_SLOTS: Final = 2
"""Busy connections that may read at once. One pass of the event loop then holds at most two
256 KiB reads of busy connections (about a millisecond of work, bench/abuse.py ``flood``), and
two keep the loop busy while the next connection in line waits for its socket."""

TURNS_STUCK_SECONDS: Final = 0.05
"""How long no read turn may change hands before a connection waiting for one reads without
it: the holders are then waiting for bytes (their peers went quiet after a large read), not
working. A guard, not behaviour (STYLE.md §3): real time. Busy reads take well under a
millisecond, so turns that work change hands hundreds of times in that span."""

PARTIAL_FRAMES_BUDGET: Final = 128 * 1024 * 1024
"""Bytes all connections together may hold in frames that have not fully arrived: about 25
connections each midway through a ``maxMessageSize`` frame (chunked messages send frames of that
size), which a busy broker meets, while 50 peers that each hold back the last byte of a 5 MiB
frame (250 MiB until keep-alive ends them, bench/abuse.py ``partial``) do not fit."""


class PartialHolder(Protocol):
    """A connection as the partial-frame budget sees it."""

    @property
    def stalled(self) -> bool:
        """Whether it waits for bytes from its peer (rather than for its turn to read)."""
        ...

    def abort(self, reason: str) -> None:
        """Close it at once."""
        ...


class ConnectionCounter:
    """Pulsar's ``ConnectionController``: connections in total and per client address.

    Args:
        max_total: ``brokerMaxConnections``; 0 for no limit.
        max_per_ip: ``brokerMaxConnectionsPerIp``; 0 for no limit.
    """

    def __init__(self, max_total: int = 0, max_per_ip: int = 0) -> None:
        self.max_total = max_total
        self.max_per_ip = max_per_ip
        self.total = 0
        self._per_ip: dict[str, int] = {}

    def admit(self, ip: str) -> str | None:
        """Count a new connection from ``ip``; or refuse it.

        Returns:
            None when admitted (call :meth:`release` when it ends), else Pulsar's ERROR message
            for the refusal (nothing was counted).
        """
        if self.max_total and self.total >= self.max_total:
            return "Reached the maximum number of connections"
        count = self._per_ip.get(ip, 0)
        if self.max_per_ip and count >= self.max_per_ip:
            return f"Reached the maximum number of connections on address {ip}"
        self.total += 1
        self._per_ip[ip] = count + 1
        return None

    def release(self, ip: str) -> None:
        """An admitted connection from ``ip`` ended."""
        self.total -= 1
        count = self._per_ip[ip] - 1
        if count:
            self._per_ip[ip] = count
        else:
            del self._per_ip[ip]

    def connections(self, ip: str) -> int:
        """Admitted connections from ``ip`` now."""
        return self._per_ip.get(ip, 0)


class PublishBuffer:
    """Bytes of SENDs read and not yet stored, over all connections.

    Past ``max_bytes`` the buffer is *limited* (every session stops reading) until it is back to
    half of it, as Pulsar's per-IO-thread tracker does (``resumeThresholdPendingBytesPerThread``).

    Args:
        max_bytes: The limit; 0 for none.
    """

    def __init__(self, max_bytes: int = 0) -> None:
        self.max_bytes = max_bytes
        self.pending = 0
        self.limited = False
        self.times_limited = 0
        self._resumed: anyio.Event | None = None

    def add(self, size: int) -> None:
        """``size`` more bytes wait for storage (or, negative, fewer)."""
        self.pending += size
        self._check()

    def resize(self, max_bytes: int) -> None:
        """A new limit (``maxMessagePublishBufferSizeInMB`` is dynamic in Pulsar)."""
        self.max_bytes = max_bytes
        self._check()

    def _check(self) -> None:
        limit = self.max_bytes
        if not self.limited:
            if limit and self.pending > limit:
                self.limited = True
                self.times_limited += 1
        elif not limit or self.pending <= limit // 2:
            self.limited = False
            if self._resumed is not None:
                self._resumed.set()
                self._resumed = None

    async def wait_resumed(self) -> None:
        """Return once the buffer is no longer limited."""
        while self.limited:
            if self._resumed is None:
                self._resumed = anyio.Event()
            await self._resumed.wait()


class ReadGate:
    """Turns for busy connections' reads, handed out in the order they were asked for.

    A turn is held from before a read until its frames are handled. A holder whose peer went
    quiet holds its turn while it waits for bytes; rather than put a timer on every read (the
    busy producer's hot path), a connection waiting in line watches the turns: if none changed
    hands for ``stuck_after`` seconds, their holders are waiting for bytes, not working, and it
    reads without a turn.

    Args:
        slots: Busy reads that may be under way at once.
        stuck_after: Seconds without a turn changing hands after which a waiter goes ahead.
    """

    def __init__(
        self, slots: int = BUSY_READ_SLOTS, *, stuck_after: float = TURNS_STUCK_SECONDS
    ) -> None:
        self._semaphore = anyio.Semaphore(slots)
        self._stuck_after = stuck_after
        self.handovers = 0  # turns given back
        self.waits = 0  # turns that had to be waited for (statistics)
        self.overdrawn = 0  # reads that went ahead without a turn (statistics)

    async def take(self) -> bool:
        """Take a turn: at once when one is free and nobody waits, else in line.

        Returns:
            True with a turn (give it back); False when the turns were stuck and the caller
            should read without one.
        """
        try:
            self._semaphore.acquire_nowait()  # no checkpoint: the busy producer's hot path
            return True
        except anyio.WouldBlock:
            self.waits += 1
        while True:
            handovers = self.handovers
            with anyio.move_on_after(self._stuck_after):
                await self._semaphore.acquire()
                return True
            if self.handovers == handovers:
                self.overdrawn += 1
                return False

    def give_back(self) -> None:
        """Hand the turn to the next connection in line (or free it)."""
        self.handovers += 1
        self._semaphore.release()


class PartialFrames:
    """Bytes held in incomplete frames, per holder, kept within a broker-wide budget.

    Holders are ordered by when their partial frame last grew. Over the budget, holders are
    closed (``abort``) and forgotten: stalled ones first, least recently grown first, then any
    but the one that just grew.

    Args:
        budget: Bytes all holders together may keep.
    """

    def __init__(self, budget: int = PARTIAL_FRAMES_BUDGET) -> None:
        self.budget = budget
        self.total = 0
        self.evicted = 0
        self._held: OrderedDict[PartialHolder, int] = OrderedDict()

    def update(self, holder: PartialHolder, held: int) -> None:
        """``holder`` now keeps ``held`` bytes of an incomplete frame (0: none)."""
        held_before = self._held.pop(holder, 0)
        self.total += held - held_before
        if held:
            self._held[holder] = held  # now the most recent
        if self.total > self.budget:
            self._evict(holder)

    def _evict(self, keep: PartialHolder) -> None:
        for stalled_only in (True, False):
            for victim in list(self._held):
                if self.total <= self.budget:
                    return
                if victim is keep or (stalled_only and not victim.stalled):
                    continue
                self.total -= self._held.pop(victim)
                self.evicted += 1
                victim.abort(
                    "partial frames over the broker's budget: this connection's moved least"
                    " recently"
                )

    def forget(self, holder: PartialHolder) -> None:
        """``holder`` is gone (its connection closed)."""
        self.total -= self._held.pop(holder, 0)


class NetGuards(msgspec.Struct):
    """The broker-wide state every session of one broker shares (see the module docstring).

    Attributes:
        connections: Connection counts against ``brokerMaxConnections``/``...PerIp``.
        publish_buffer: Pending publish bytes against ``maxMessagePublishBufferSizeInMB``.
        read_gate: Turns for busy connections' reads.
        partial_frames: Bytes in incomplete frames against ``PARTIAL_FRAMES_BUDGET``.
        max_pending_publishes: ``maxPendingPublishRequestsPerConnection`` (0: no limit).
    """

    connections: ConnectionCounter = msgspec.field(default_factory=ConnectionCounter)
    publish_buffer: PublishBuffer = msgspec.field(default_factory=PublishBuffer)
    read_gate: ReadGate = msgspec.field(default_factory=ReadGate)
    partial_frames: PartialFrames = msgspec.field(default_factory=PartialFrames)
    max_pending_publishes: int = 1000

    @classmethod
    def from_config(cls, config: BrokerConfig) -> NetGuards:
        """The guards of a broker with this configuration."""
        return cls(
            connections=ConnectionCounter(
                config.brokerMaxConnections, config.brokerMaxConnectionsPerIp
            ),
            publish_buffer=PublishBuffer(config.publish_buffer_bytes()),
            partial_frames=PartialFrames(
                max(PARTIAL_FRAMES_BUDGET, 4 * (config.maxMessageSize + 10 * 1024))
            ),
            max_pending_publishes=config.maxPendingPublishRequestsPerConnection,
        )
