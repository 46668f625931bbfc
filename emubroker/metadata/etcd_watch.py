"""One metadata watch on etcd: a watch stream over a node's subtree, fed into a bounded buffer.

The watch covers the node range ``KeyLayout.subtree(prefix)`` (see ``etcd_keys``), so etcd sends
exactly the events of the prefix node and the nodes below it, in revision order. Each event
becomes a notification: a ``DELETE`` is *deleted*; a ``PUT`` is *created* when the key's
``version`` is 1 (its first write since it was created) and *modified* otherwise.

Delivery goes through ``storage_stub.client_watch.StubWatch``, the buffer the other backends use,
so overflow behaves the same: a watcher ``buffer_size`` notifications behind gets what was
buffered, then ``WatchOverflowError``.

If the connection breaks, the watch resumes from the revision after the last one it delivered,
on whichever endpoint answers, after a pause on the clock; nothing is lost or repeated. If etcd
has compacted those revisions away, or ends the watch, notifications were lost and the watch
ends as overflowed, so the watcher re-reads.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

import anyio

from emubroker.metadata.etcd_gateway import GatewayCallError, GatewayUnavailableError
from emubroker.metadata.etcd_messages import (
    DELETE,
    WatchCreateRequest,
    WatchRequest,
    WatchResponse,
)
from storage_stub.client import CREATED, DELETED, MODIFIED, StubWatch

if TYPE_CHECKING:
    from anyio.abc import TaskStatus

    from emubroker.metadata.etcd_gateway import EtcdGateway
    from emubroker.metadata.etcd_keys import KeyLayout
    from protocol.clock import Clock

__all__ = ["EtcdWatch"]

logger = logging.getLogger(__name__)

# Pauses before resuming a broken watch: doubling from the first to the last.
RESUME_PAUSE_FIRST: Final = 0.1
RESUME_PAUSE_MAX: Final = 5.0


class EtcdWatch:
    """The reader of one watch; start :meth:`run` with ``task_group.start``.

    Args:
        gateway: Where etcd is.
        layout: The tree's key layout.
        prefix: The watched path.
        buffer: Where notifications go (its ``on_close`` should call :meth:`stop`).
        clock: Time for the pauses between resumes.
    """

    def __init__(
        self,
        gateway: EtcdGateway,
        layout: KeyLayout,
        prefix: str,
        buffer: StubWatch,
        clock: Clock,
    ) -> None:
        self.prefix = prefix
        self.buffer = buffer
        self._gateway = gateway
        self._layout = layout
        self._clock = clock
        self._scope = anyio.CancelScope()
        self.delivered_revision = 0  # the last revision whose events the buffer has
        self.awaited_revision = 0  # the last write of our own store in the range
        self._progress = anyio.Event()

    def covers(self, path: str) -> bool:
        """Whether a write to ``path`` is in this watch's range."""
        return self.prefix == "/" or path == self.prefix or path.startswith(self.prefix + "/")

    def stop(self) -> None:
        """Stop reading (safe to call more than once, and before :meth:`run` starts)."""
        self._scope.cancel()
        self._progress.set()  # wait_delivered: nothing more will come

    async def wait_delivered(self) -> None:
        """Wait until the buffer has the events of this store's own writes in the range."""
        while self.delivered_revision < self.awaited_revision and not self._scope.cancel_called:
            await self._progress.wait()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Read the stream until stopped; ``task_status.started()`` once etcd created the watch.

        Raises:
            GatewayError: etcd could not be reached or refused, before the watch was created.
        """
        key, end = self._layout.subtree(self.prefix)
        pause = RESUME_PAUSE_FIRST
        with self._scope:
            while True:
                request = WatchRequest(WatchCreateRequest(key, end, self._resume_from()))
                try:
                    async with self._gateway.open_stream(
                        "/v3/watch", request, WatchResponse
                    ) as replies:
                        async for reply in replies:
                            if reply.created:
                                if not self.delivered_revision:
                                    self.delivered_revision = reply.header.revision
                                    task_status.started()
                                pause = RESUME_PAUSE_FIRST
                            if reply.canceled:
                                self._lost(f"etcd ended it: {reply.cancel_reason or 'compacted'}")
                                return
                            self._deliver(reply)
                except GatewayCallError as exc:
                    if not self.delivered_revision:
                        raise
                    self._lost(f"etcd refused to resume it: {exc}")
                    return
                except GatewayUnavailableError as exc:
                    if not self.delivered_revision:
                        raise
                    logger.warning("watch on %r broke (resuming): %s", self.prefix, exc)
                await self._clock.sleep(pause)
                pause = min(pause * 2, RESUME_PAUSE_MAX)

    def _resume_from(self) -> int:
        # 0 (now) for the first stream; then the revision after the last delivered one.
        return self.delivered_revision + 1 if self.delivered_revision else 0

    def _deliver(self, reply: WatchResponse) -> None:
        for event in reply.events:
            path = self._layout.path_of(event.kv.key)
            if event.type == DELETE:
                self.buffer.deliver(path, DELETED)
            else:
                self.buffer.deliver(path, CREATED if event.kv.version == 1 else MODIFIED)
            self.delivered_revision = max(self.delivered_revision, event.kv.mod_revision)
        if reply.events:
            self._progress.set()
            self._progress = anyio.Event()

    def _lost(self, reason: str) -> None:
        logger.warning("watch on %r lost notifications: %s", self.prefix, reason)
        self.buffer.end(overflowed=True)
        self._scope.cancel()
