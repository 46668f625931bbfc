"""The plumbing under ``StubClient``: one pipelined, reconnecting RPC connection.

Every request gets a request id (``rid``), is queued for the writer task (which sends whatever
is queued in one write) and waits for the reply with that id. Around that:

- **Timeouts** are deadlines on the injected clock (STYLE.md §3): one timer task sleeps until
  the earliest deadline among the requests in flight and fails the due ones with
  :class:`~storage_stub.errors.StubTimeoutError`. A new request only wakes the timer if its
  deadline is the earliest, so with one default timeout the timer wakes about once a timeout.
- **Reconnection**: when the connection breaks, requests in flight fail with
  :class:`~storage_stub.errors.StubConnectionError` (their outcome is unknown); the channel
  reconnects with exponential backoff on the clock; requests made meanwhile wait (within their
  deadlines) and go out on the new connection. Watches end as overflowed (their notifications
  may be lost); sessions survive unless the stub restarted.
- **Handshake**: the first request on a connection is ``Hello``. A changed ``incarnation``
  means the stub restarted, so every session kept alive here is lost (the new stub may even
  hand the same ids to others).
- **Sessions** registered with :meth:`StubChannel.keep_alive` get a heartbeat every third of
  their timeout. One lost to the stub's silence (``storage_stub.sessions`` says when) makes
  :meth:`StubChannel.wait_unreachable` return.
"""

from __future__ import annotations

import logging
import math
from functools import partial
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

import anyio

from protocol.backoff import Backoff
from protocol.errors import RemoteProtocolError
from protocol.rpc import RpcDecoder, encode_into
from storage_stub import messages as m
from storage_stub.errors import (
    StubClosedError,
    StubConnectionError,
    StubTimeoutError,
    error_from_reply,
)
from storage_stub.ledger import StorageError
from storage_stub.metadata import SessionExpiredError
from storage_stub.sessions import SessionBook

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from anyio.abc import ByteStream

    from protocol.clock import Clock
    from storage_stub.client_watch import StubWatch

__all__ = ["STUB_BACKOFF", "Backoff", "StubChannel", "parse_stub_url"]

logger = logging.getLogger(__name__)

RECEIVE_SIZE: Final = 256 * 1024


STUB_BACKOFF: Final = Backoff(initial=0.05, maximum=2.0)
"""Reconnection delays to the stub unless the caller gives others: a local process, retried fast."""


def parse_stub_url(url: str) -> tuple[str, int]:
    """Split ``stub://host:port`` (or ``host:port``) into host and port.

    Raises:
        ValueError: The URL has another scheme or no port.
    """
    parts = urlsplit(url if "://" in url else f"stub://{url}")
    if parts.scheme not in ("stub", "tcp") or parts.hostname is None or parts.port is None:
        raise ValueError(f"not a stub URL (stub://host:port): {url!r}")
    return parts.hostname, parts.port


class _Pending:
    __slots__ = ("deadline", "error", "event", "reply", "sent")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.event = anyio.Event()
        self.reply: m.Reply | None = None
        self.error: StorageError | None = None
        self.sent = False


class _Link:
    """One live connection: its stream and the bytes queued for it."""

    __slots__ = ("outbox", "ready", "stream")

    def __init__(self, stream: ByteStream) -> None:
        self.stream = stream
        self.outbox = bytearray()
        self.ready = anyio.Event()

    def send(self, request: m.Request) -> None:
        encode_into(request, self.outbox)
        self.ready.set()


class StubChannel:
    """Requests in, replies out, over whatever connection is current.

    Args:
        connect: Opens a byte stream to the stub.
        clock: Time for timeouts, backoff and heartbeats.
        request_timeout: Default per-request timeout, seconds.
        connect_timeout: Seconds for one connection attempt, and for its handshake.
        backoff: Reconnection delays.
    """

    def __init__(
        self,
        connect: Callable[[], Awaitable[ByteStream]],
        *,
        clock: Clock,
        request_timeout: float,
        connect_timeout: float,
        backoff: Backoff,
    ) -> None:
        self._connect = connect
        self.clock = clock
        self._timeout = request_timeout
        self._connect_timeout = connect_timeout
        self._backoff = backoff
        self._pending: dict[int, _Pending] = {}
        self._backlog: list[tuple[int, m.Request]] = []
        self._next_rid = 1
        self._link: _Link | None = None
        self._connected = anyio.Event()
        self._closed = False
        self._timer_scope: anyio.CancelScope | None = None
        self._timer_target = math.inf
        self._incarnation: int | None = None
        self._sessions = SessionBook()
        self._unreachable = anyio.Event()
        self._unreachable_reason = ""
        self._heartbeat_scope: anyio.CancelScope | None = None
        self.watches: dict[int, StubWatch] = {}
        self.reconnects = 0

    # ---- requests ---------------------------------------------------------------------------

    async def call(
        self, build: Callable[[int], m.Request], request_timeout: float | None
    ) -> m.Reply:
        """Send ``build(rid)`` and return its reply.

        Raises:
            StorageError, MetadataError: The stub answered with an error (by its code).
            StubTimeoutError, StubConnectionError, StubClosedError: See the module docstring.
        """
        if self._closed:
            raise StubClosedError("the stub client is closed", ledger_id=-1)
        rid = self._next_rid
        self._next_rid = rid + 1
        request = build(rid)
        pending = self._register(rid, self._timeout if request_timeout is None else request_timeout)
        link = self._link
        if link is not None:
            link.send(request)
            pending.sent = True
        else:
            self._backlog.append((rid, request))
        try:
            await pending.event.wait()
        finally:
            self._pending.pop(rid, None)  # gone already unless we were cancelled
        reply = pending.reply
        if reply is None:
            assert pending.error is not None
            raise pending.error
        if isinstance(reply, m.ErrorReply):
            raise error_from_reply(reply.code, reply.message, reply.ledger_id)
        return reply

    def send_nowait(self, build: Callable[[int], m.Request]) -> None:
        """Send without waiting for the reply (ignored); dropped while disconnected."""
        if self._link is not None and not self._closed:
            rid = self._next_rid
            self._next_rid = rid + 1
            self._link.send(build(rid))

    def _register(self, rid: int, timeout: float) -> _Pending:
        pending = _Pending(self.clock.now() + timeout)
        self._pending[rid] = pending
        if pending.deadline < self._timer_target and self._timer_scope is not None:
            self._timer_scope.cancel()  # the timer sleeps past this deadline: recompute
        return pending

    @staticmethod
    def _fail(pending: _Pending, error: StorageError) -> None:
        pending.error = error
        pending.event.set()

    # ---- sessions ---------------------------------------------------------------------------

    def keep_alive(self, session: int, session_timeout: float) -> None:
        """Heartbeat ``session`` every third of its timeout from now on."""
        self._sessions.keep(session, session_timeout, self.clock.now())
        if self._heartbeat_scope is not None:
            self._heartbeat_scope.cancel()

    def forget_session(self, session: int) -> None:
        """Stop heartbeating a session and count it as ended."""
        self._sessions.end(session)

    def session_alive(self, session: int) -> bool:
        return self._sessions.alive(session)

    async def wait_unreachable(self) -> str:
        """Wait until a session kept alive here was lost to the stub's silence; says why."""
        await self._unreachable.wait()
        return self._unreachable_reason

    # ---- connection state -------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._link is not None

    @property
    def in_flight(self) -> int:
        """Requests waiting for a reply (sent, or queued until the next connection)."""
        return len(self._pending)

    async def wait_connected(self) -> None:
        """Wait until there is a live, greeted connection."""
        while self._link is None:
            await self._connected.wait()

    def shutdown(self) -> None:
        """Fail everything in flight with ``StubClosedError`` and refuse new requests."""
        self._closed = True
        for pending in self._pending.values():
            self._fail(pending, StubClosedError("the stub client was closed", ledger_id=-1))
        self._pending.clear()
        for watch in self.watches.values():
            watch.end(overflowed=False)
        self.watches.clear()

    # ---- background tasks -------------------------------------------------------------------

    async def run(self, first: ByteStream) -> None:
        """Run the timer, the heartbeats and the connection (from ``first`` on); never returns."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._run_timer)
            tg.start_soon(self._run_heartbeats)
            tg.start_soon(self._maintain, first)

    async def _run_timer(self) -> None:
        while True:
            deadline = min((p.deadline for p in self._pending.values()), default=math.inf)
            with anyio.CancelScope() as scope:
                self._timer_scope, self._timer_target = scope, deadline
                if math.isinf(deadline):
                    await anyio.sleep_forever()
                await self.clock.sleep_until(deadline)
            self._timer_scope, self._timer_target = None, math.inf
            now = self.clock.now()
            for rid, pending in list(self._pending.items()):
                if pending.deadline <= now:
                    del self._pending[rid]
                    error = StubTimeoutError("no reply from the stub in time", ledger_id=-1)
                    self._fail(pending, error)

    async def _run_heartbeats(self) -> None:
        while True:
            due = self._sessions.next_heartbeat()
            with anyio.CancelScope() as scope:
                self._heartbeat_scope = scope
                if math.isinf(due):
                    await anyio.sleep_forever()
                await self.clock.sleep_until(due)
            self._heartbeat_scope = None
            async with anyio.create_task_group() as tg:
                for session, session_timeout in self._sessions.due(self.clock.now()):
                    tg.start_soon(self._heartbeat, session, session_timeout)

    async def _heartbeat(self, session: int, session_timeout: float) -> None:
        try:
            await self.call(partial(m.SessionHeartbeat, session_id=session), session_timeout / 3)
        except SessionExpiredError:
            logger.warning("metadata session %s expired", session)
            self.forget_session(session)
        except (StubTimeoutError, StubConnectionError) as exc:
            if not self._sessions.unanswered(session, self.clock.now()):
                logger.info("heartbeat of session %s failed (will retry): %s", session, exc)
                return
            reason = (
                f"the stub answered no heartbeat of metadata session {session} for its "
                f"{session_timeout:g} s timeout ({exc})"
            )
            logger.info("metadata session %s lost: %s", session, reason)
            if not self._unreachable.is_set():
                self._unreachable_reason = reason
                self._unreachable.set()
            return
        except StorageError as exc:
            logger.info("heartbeat of session %s failed (will retry): %s", session, exc)
            return
        self._sessions.answered(session, self.clock.now())

    async def _maintain(self, first: ByteStream) -> None:
        stream: ByteStream | None = first
        delays = self._backoff.delays()
        while True:
            if stream is None:
                try:
                    stream = await self.open_stream()
                except StubConnectionError as exc:
                    delay = next(delays)
                    logger.info("stub unreachable, retrying in %.3fs: %s", delay, exc)
                    await self.clock.sleep(delay)
                    continue
                self.reconnects += 1
            if await self._serve_link(stream):
                delays = self._backoff.delays()
            stream = None

    async def open_stream(self) -> ByteStream:
        """Connect once, within the connect timeout.

        Raises:
            StubConnectionError: The attempt failed or timed out.
        """
        opened: list[ByteStream] = []
        failure: list[OSError] = []
        async with anyio.create_task_group() as tg:

            async def watchdog() -> None:
                await self.clock.sleep(self._connect_timeout)
                tg.cancel_scope.cancel()

            tg.start_soon(watchdog)
            try:  # nothing may escape the task group body, or anyio wraps it in a group
                opened.append(await self._connect())
            except OSError as exc:
                failure.append(exc)
            tg.cancel_scope.cancel()
        if failure:
            raise StubConnectionError(f"cannot connect: {failure[0]}", ledger_id=-1) from failure[0]
        if not opened:
            raise StubConnectionError("connecting timed out", ledger_id=-1)
        return opened[0]

    async def _serve_link(self, stream: ByteStream) -> bool:
        """Run one connection until it breaks; returns whether the handshake succeeded."""
        link = _Link(stream)
        greeted = False
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._write_loop, link, tg.cancel_scope)
                tg.start_soon(self._read_loop, link, tg.cancel_scope)
                greeted = await self._handshake(link)
                if not greeted:
                    tg.cancel_scope.cancel()
                    return False
                self._link = link
                for rid, request in self._backlog:
                    pending = self._pending.get(rid)
                    if pending is not None:  # else it timed out while we were away
                        link.send(request)
                        pending.sent = True
                self._backlog.clear()
                self._connected.set()
                await anyio.sleep_forever()
        finally:
            self._link_lost(link)
            with anyio.CancelScope(shield=True):
                await stream.aclose()
        return greeted

    async def _handshake(self, link: _Link) -> bool:
        rid = self._next_rid
        self._next_rid = rid + 1
        pending = self._register(rid, self._connect_timeout)
        pending.sent = True
        link.send(m.Hello(rid))
        try:
            await pending.event.wait()
        finally:
            self._pending.pop(rid, None)
        if not isinstance(pending.reply, m.HelloReply):
            logger.warning("stub handshake failed: %s", pending.error or pending.reply)
            return False
        incarnation = pending.reply.incarnation
        if self._incarnation is not None and incarnation != self._incarnation:
            lost = self._sessions.end_all()
            logger.warning("the stub restarted: %d metadata sessions lost", lost)
        self._incarnation = incarnation
        return True

    def _link_lost(self, link: _Link) -> None:
        if self._link is link:
            self._link = None
            self._connected = anyio.Event()
        for rid, pending in list(self._pending.items()):
            if pending.sent:
                del self._pending[rid]
                error = StubConnectionError("connection to the stub lost", ledger_id=-1)
                self._fail(pending, error)
        for watch in list(self.watches.values()):
            watch.end(overflowed=True)  # notifications may have been lost with the connection
        self.watches.clear()

    async def _write_loop(self, link: _Link, scope: anyio.CancelScope) -> None:
        try:
            while True:
                await link.ready.wait()
                link.ready = anyio.Event()
                if link.outbox:
                    data, link.outbox = link.outbox, bytearray()
                    await link.stream.send(bytes(data))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            logger.info("stub connection broke while sending: %r", exc)
            scope.cancel()

    async def _read_loop(self, link: _Link, scope: anyio.CancelScope) -> None:
        decoder = RpcDecoder[m.ServerMessage](m.ServerMessage)
        pending, watches = self._pending, self.watches
        try:
            while True:
                decoder.feed(await link.stream.receive(RECEIVE_SIZE))
                while (message := decoder.next_message()) is not None:
                    if isinstance(message, m.WatchEvent):
                        watch = watches.get(message.watch_id)
                        if watch is not None:
                            watch.deliver(message.path, message.kind)
                    elif isinstance(message, m.WatchEnded):
                        watch = watches.pop(message.watch_id, None)
                        if watch is not None:
                            watch.end(overflowed=message.overflowed)
                    else:
                        waiter = pending.pop(message.rid, None)
                        if waiter is not None:  # else it timed out or was cancelled
                            waiter.reply = message
                            waiter.event.set()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            logger.info("stub connection closed")
        except RemoteProtocolError as exc:
            logger.warning("stub sent garbage, reconnecting: %s", exc)
        scope.cancel()
