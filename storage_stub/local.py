"""A ``StubClient`` for a stub in the same process, without RPC.

The embedded deployment (DESIGN.md: standalone, in-process bookie stub) wants the stub's exact
semantics (durability before acknowledgement, faults, sessions, watches) without paying for
encoding, a byte stream and three task hand-offs per request. :class:`LocalChannel` implements
the channel interface ``StubClient`` uses by handing each request Struct straight to
``StubService.execute`` and then doing what the connection would: wait for the journals, wait
for an injected ``ready_at`` (bounded by the request's deadline), turn error replies into
exceptions. Watches are delivered by direct calls. Sessions kept alive are heartbeated by a
task in the stub's task group.

Open one with ``StubServer.open_local_client()``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel

from storage_stub import messages as m
from storage_stub.errors import StubClosedError, StubTimeoutError, error_from_reply
from storage_stub.metadata import SessionExpiredError

if TYPE_CHECKING:
    from collections.abc import Callable

    from storage_stub.client_watch import StubWatch
    from storage_stub.service import StubService

__all__ = ["LocalChannel"]


class LocalChannel:
    """Requests executed in-process against a :class:`StubService` (a ``WatchSink`` too).

    Args:
        service: The stub to talk to.
        request_timeout: Default per-request timeout, seconds on the service's clock.
    """

    connected = True
    reconnects = 0

    def __init__(self, service: StubService, *, request_timeout: float) -> None:
        self._service = service
        self._timeout = request_timeout
        self._next_rid = 1
        self._closed = False
        self._sessions: dict[int, tuple[float, float]] = {}  # id -> (timeout, next heartbeat)
        self._lost_sessions: set[int] = set()
        self._heartbeat_scope: anyio.CancelScope | None = None
        self.watches: dict[int, StubWatch] = {}
        self._sink = _Sink(self)
        service.connection_opened()

    # ---- the channel interface of StubClient ---------------------------------------------------

    async def call(
        self, build: Callable[[int], m.Request], request_timeout: float | None
    ) -> m.Reply:
        """Execute ``build(rid)`` and return its reply, as ``StubChannel.call`` does.

        Raises:
            StorageError, MetadataError: The stub answered with an error (by its code).
            StubTimeoutError: An injected delay outlasted the request's deadline.
            StubClosedError: The client was closed.
        """
        if self._closed:
            raise StubClosedError("the stub client is closed", ledger_id=-1)
        rid = self._next_rid
        self._next_rid = rid + 1
        service = self._service
        before = service.ledgers.ticket, service.metadata.ticket
        reply, ready_at = service.execute(build(rid), self._sink)
        after = service.ledgers.ticket, service.metadata.ticket
        if after != before:
            # Wait only for the journal(s) this request wrote to.
            need = (a if a != b else 0 for a, b in zip(after, before, strict=True))
            await service.wait_durable(*need)
        else:
            service.publish()
        if ready_at is not None:
            timeout = self._timeout if request_timeout is None else request_timeout
            deadline = service.clock.now() + timeout
            await service.clock.sleep_until(min(ready_at, deadline))
            if ready_at > deadline:
                raise StubTimeoutError("no reply from the stub in time", ledger_id=-1)
        if isinstance(reply, m.ErrorReply):
            raise error_from_reply(reply.code, reply.message, reply.ledger_id)
        return reply

    def send_nowait(self, build: Callable[[int], m.Request]) -> None:
        if not self._closed:
            rid = self._next_rid
            self._next_rid = rid + 1
            self._service.execute(build(rid), self._sink)

    def keep_alive(self, session: int, session_timeout: float) -> None:
        now = self._service.clock.now()
        self._sessions[session] = (session_timeout, now + session_timeout / 3)
        if self._heartbeat_scope is not None:
            self._heartbeat_scope.cancel()

    def forget_session(self, session: int) -> None:
        self._sessions.pop(session, None)
        self._lost_sessions.add(session)

    def session_alive(self, session: int) -> bool:
        return session not in self._lost_sessions

    async def wait_unreachable(self) -> str:
        """Never: the stub is in this process."""
        await anyio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    async def wait_connected(self) -> None:
        await anyio.lowlevel.checkpoint()

    # ---- lifecycle ---------------------------------------------------------------------------

    async def run_heartbeats(self) -> None:
        """Heartbeat the sessions kept alive until :meth:`shutdown`."""
        clock = self._service.clock
        while not self._closed:
            due = min((t for _, t in self._sessions.values()), default=math.inf)
            with anyio.CancelScope() as scope:
                self._heartbeat_scope = scope
                if math.isinf(due):
                    await anyio.sleep_forever()
                await clock.sleep_until(due)
            self._heartbeat_scope = None
            now = clock.now()
            for session, (timeout, next_due) in list(self._sessions.items()):
                if next_due <= now:
                    self._sessions[session] = (timeout, now + timeout / 3)
                    try:
                        self._service.metadata.heartbeat(session, now)
                    except SessionExpiredError:
                        self.forget_session(session)

    def shutdown(self) -> None:
        """Refuse new requests, end the watches and stop heartbeating."""
        if self._closed:
            return
        self._closed = True
        for watch in self.watches.values():
            watch.end(overflowed=False)
        self.watches.clear()
        self._service.connection_closed(self._sink)
        if self._heartbeat_scope is not None:
            self._heartbeat_scope.cancel()


class _Sink:
    """The ``WatchSink`` face of a :class:`LocalChannel`: pushes go straight to its watches."""

    __slots__ = ("_channel", "watches")

    def __init__(self, channel: LocalChannel) -> None:
        self._channel = channel
        self.watches: dict[int, int] = {}  # our watch id -> the tree's

    def push(self, message: m.WatchEvent | m.WatchEnded) -> None:
        watches = self._channel.watches
        if isinstance(message, m.WatchEvent):
            watch = watches.get(message.watch_id)
            if watch is not None:
                watch.deliver(message.path, message.kind)
        else:
            ended = watches.pop(message.watch_id, None)
            if ended is not None:
                ended.end(overflowed=message.overflowed)
