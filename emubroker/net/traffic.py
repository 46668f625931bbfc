"""What a broker's client connections carried: its own network traffic, for its load report.

A Pulsar broker measures bandwidth from its host's network interfaces (``LinuxBrokerHostUsage
Impl``: the NICs' rx/tx byte counters). Several emulated brokers share one host, so each counts
its own instead (DESIGN.md decision 11): every binary-protocol session adds the bytes it reads and
writes to the broker's :class:`TrafficCounter`. One addition per socket read or write (not per
frame), so the cost does not grow with the message rate.

The counter also knows the live sessions, to sum the bytes they have queued for their clients on
demand: those outbound buffers are what stands in for Netty's direct memory in the report.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

__all__ = ["BufferedSession", "TrafficCounter", "TrafficSnapshot"]


class BufferedSession(Protocol):
    """A session as the counter sees it: bytes it has queued and not yet written."""

    @property
    def queued_bytes(self) -> int: ...


class TrafficSnapshot(NamedTuple):
    """The counter's totals at one moment.

    Attributes:
        bytes_in: Bytes read from clients since the broker started.
        bytes_out: Bytes written to clients since the broker started.
        buffered: Bytes queued for clients right now, over all sessions.
    """

    bytes_in: int
    bytes_out: int
    buffered: int


class TrafficCounter:
    """Running byte totals of all of one broker's binary-protocol sessions."""

    __slots__ = ("_sessions", "bytes_in", "bytes_out")

    def __init__(self) -> None:
        self.bytes_in = 0
        self.bytes_out = 0
        self._sessions: set[BufferedSession] = set()

    def opened(self, session: BufferedSession) -> None:
        """A session started: its queued bytes count until :meth:`closed`."""
        self._sessions.add(session)

    def closed(self, session: BufferedSession) -> None:
        """A session ended."""
        self._sessions.discard(session)

    def snapshot(self) -> TrafficSnapshot:
        """The totals now (sums the live sessions' queues)."""
        buffered = sum(session.queued_bytes for session in self._sessions)
        return TrafficSnapshot(self.bytes_in, self.bytes_out, buffered)
