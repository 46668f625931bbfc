"""The client end of a metadata watch: a bounded stream of notifications.

The client's reader task delivers pushes with :meth:`StubWatch.deliver`, which never blocks: a
watcher that falls ``buffer_size`` notifications behind is *overflowed* (like the in-memory
backend, ``emubroker/metadata/memory.py``): it receives what was buffered, then
:class:`~storage_stub.metadata.WatchOverflowError`, and must re-read and watch again. Dropping
notifications silently would leave its view of the tree wrong without telling it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
from anyio.abc import ObjectReceiveStream

from storage_stub.metadata import Notification, WatchOverflowError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["StubWatch"]


class StubWatch(ObjectReceiveStream[Notification]):
    """Notifications for one watched prefix, in write order; close it to stop watching.

    Args:
        watch_id: The id the client gave the watch on its connection.
        prefix: The watched prefix.
        buffer_size: Notifications buffered before the watch overflows.
        on_close: Called once when the watch ends on our side (to tell the stub).
    """

    def __init__(
        self,
        watch_id: int,
        prefix: str,
        buffer_size: int,
        *,
        on_close: Callable[[StubWatch], None],
    ) -> None:
        if buffer_size < 1:
            raise ValueError(f"buffer_size must be >= 1, got {buffer_size}")
        self.watch_id = watch_id
        self.prefix = prefix
        self._send, self._receive = anyio.create_memory_object_stream[Notification](buffer_size)
        self._on_close = on_close
        self.overflowed = False

    def deliver(self, path: str, kind: str) -> None:
        """Queue one notification without blocking; overflow the watch if it is full."""
        try:
            self._send.send_nowait(Notification(path, kind))
        except anyio.WouldBlock:
            self.end(overflowed=True)
            self._on_close(self)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._on_close(self)  # the watcher stopped listening

    def end(self, *, overflowed: bool) -> None:
        """End the stream after what is buffered; with ``overflowed``, then raise."""
        self.overflowed = self.overflowed or overflowed
        self._send.close()

    async def receive(self) -> Notification:
        """Return the next notification.

        Raises:
            WatchOverflowError: Notifications were lost (after the buffered ones).
            anyio.EndOfStream: The watch ended (closed, or the client closed).
        """
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            if self.overflowed:
                raise WatchOverflowError(
                    f"watch on {self.prefix!r} lost notifications; re-read and watch again"
                ) from None
            raise

    def finish(self) -> None:
        """Stop watching, but let the reader drain what is buffered, then end."""
        self._send.close()
        self._on_close(self)

    def close(self) -> None:
        """Stop watching now (safe in ``finally`` under cancellation)."""
        self._send.close()
        self._receive.close()
        self._on_close(self)

    async def aclose(self) -> None:
        self.close()
        await anyio.lowlevel.checkpoint()
