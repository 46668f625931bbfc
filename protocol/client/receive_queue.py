"""The receiver queue: messages prefetched from the broker, waiting for the application.

One queue serves a consumer, or all the partition consumers of a partitioned consumer (then
each message remembers the partition consumer it came from, for permits and acks).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

import anyio

from protocol.client.received import Message

__all__ = ["ReceiveQueue"]


class ReceiveQueue:
    """A FIFO of `Message` with async waiting and a terminal error."""

    def __init__(self) -> None:
        self.items: deque[Message] = deque()
        """The FIFO itself, the same object for the queue's life: a consumer pops prefetched
        messages from it directly, its hot path (`get_nowait` when empty)."""
        self._waiter: anyio.Event | None = None
        self._error: Exception | None = None

    def __len__(self) -> int:
        return len(self.items)

    def put(self, message: Message) -> None:
        """Queue one message and wake the waiting receiver."""
        self.items.append(message)
        self._wake()

    def put_many(self, messages: Iterable[Message]) -> None:
        """Queue messages in order and wake the waiting receiver."""
        self.items.extend(messages)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            waiter.set()

    def get_nowait(self) -> Message | None:
        """The next message, or None when empty.

        Raises:
            Exception: the error the queue was closed with, once it is drained.
        """
        if self.items:
            return self.items.popleft()
        if self._error is not None:
            raise self._error
        return None

    async def get(self) -> Message:
        """Wait for the next message.

        Raises:
            Exception: the error the queue was closed with.
        """
        while True:
            message = self.get_nowait()
            if message is not None:
                return message
            if self._waiter is None:
                self._waiter = anyio.Event()
            await self._waiter.wait()

    def peek(self, keep: Callable[[Message], bool]) -> Message | None:
        """The first message for which `keep` is true, left in place."""
        return next((m for m in self.items if keep(m)), None)

    def remove(self, drop: Callable[[Message], bool]) -> int:
        """Remove the messages for which `drop` is true; returns how many."""
        items = self.items
        kept = [m for m in items if not drop(m)]
        removed = len(items) - len(kept)
        items.clear()
        items.extend(kept)
        return removed

    def close(self, error: Exception) -> None:
        """Fail current and future waiters with `error` (after what is queued)."""
        self._error = error
        self._wake()
