"""Why a connection is not read now: Pulsar's ``ServerCnxThrottleTracker``, for one session.

Pulsar turns a channel's auto-read off while any of several reasons holds (too many pending
SENDs on the connection, the publish buffer over its limit, rate limiters) and on again once none
does. Here each reason is a name; the connection's own reasons are kept here and the broker-wide
one (``guards.PublishBuffer``) is read from the buffer, so that a change there reaches every
session without visiting each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import anyio

if TYPE_CHECKING:
    from emubroker.net.guards import PublishBuffer

__all__ = ["PENDING_PUBLISHES", "PUBLISH_BUFFER", "REPLIES_UNREAD", "ReadPauses"]

PENDING_PUBLISHES: Final = "pending publishes"
"""``maxPendingPublishRequestsPerConnection`` SENDs of the connection wait for storage."""

REPLIES_UNREAD: Final = "replies unread"
"""The peer leaves twice the high water mark of replies unread (``writer`` rule 2)."""

PUBLISH_BUFFER: Final = "publish buffer"
"""The broker's pending publish bytes are over ``maxMessagePublishBufferSizeInMB``."""


class ReadPauses:
    """The reasons a session does not read its connection now.

    Args:
        buffer: The broker's publish buffer (its limit pauses every connection).
    """

    def __init__(self, buffer: PublishBuffer) -> None:
        self.own: set[str] = set()
        """The connection's own reasons (empty: none); read on every pass of the reader."""
        self.buffer = buffer
        self._resumed = anyio.Event()

    def set(self, reason: str, paused: bool = True) -> None:
        """Add ``reason`` (or, with ``paused`` False, remove it)."""
        own = self.own
        if paused:
            own.add(reason)
        elif reason in own:
            own.discard(reason)
            if not own:
                self._resumed.set()
                self._resumed = anyio.Event()

    def reasons(self) -> frozenset[str]:
        """Every reason that holds now, the broker-wide one included."""
        return frozenset(self.own | ({PUBLISH_BUFFER} if self.buffer.limited else set()))

    async def wait(self) -> None:
        """Return once no reason holds."""
        buffer = self.buffer
        while True:
            if self.own:
                await self._resumed.wait()
            elif buffer.limited:
                await buffer.wait_resumed()
            else:
                return
