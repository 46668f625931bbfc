"""The anyio client of the bookie stub and its metadata service (``storage_stub.client``).

:class:`StubClient` mirrors the stub's operations (ledgers, metadata, fault control) as async
methods; the connection underneath (pipelining with request ids, clock-driven timeouts,
reconnection with backoff, session heartbeats) is ``storage_stub.channel.StubChannel``. Open one
with :func:`open_stub_client`.

Errors (STYLE.md §1.11-13): error replies become the stub's exception classes by code
(``storage_stub.errors``); anyio and OS errors never leave the client. Every method may also
raise :class:`~storage_stub.errors.StubTimeoutError` (no reply within ``request_timeout``),
:class:`~storage_stub.errors.StubConnectionError` (the connection broke with the request in
flight: its outcome is unknown), :class:`~storage_stub.errors.StubClosedError` (the client was
closed) and :class:`~storage_stub.errors.StubUnavailableError` (an injected fault).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Final, Protocol, TypeVar

import anyio

from protocol.clock import AnyioClock, Clock
from storage_stub import messages as m
from storage_stub.channel import STUB_BACKOFF, Backoff, StubChannel, parse_stub_url
from storage_stub.client_watch import StubWatch
from storage_stub.ledger import LedgerInfo, StorageError
from storage_stub.metadata import NodeStat

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from anyio.abc import ByteStream

    from storage_stub.faults import FaultConfig

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_REQUEST_TIMEOUT",
    "Channel",
    "StubClient",
    "open_stub_client",
]

DEFAULT_REQUEST_TIMEOUT: Final = 30.0
DEFAULT_CONNECT_TIMEOUT: Final = 10.0

R = TypeVar("R", bound=m.Reply)


class Channel(Protocol):
    """What :class:`StubClient` runs on: ``StubChannel`` (RPC) or ``LocalChannel`` (in-process)."""

    watches: dict[int, StubWatch]

    @property
    def connected(self) -> bool: ...

    @property
    def reconnects(self) -> int: ...

    async def call(
        self, build: Callable[[int], m.Request], request_timeout: float | None
    ) -> m.Reply: ...

    def send_nowait(self, build: Callable[[int], m.Request]) -> None: ...

    def keep_alive(self, session: int, session_timeout: float) -> None: ...

    def forget_session(self, session: int) -> None: ...

    def session_alive(self, session: int) -> bool: ...

    async def wait_unreachable(self) -> str: ...

    async def wait_connected(self) -> None: ...


class StubClient:
    """The stub's operations as async methods; use :func:`open_stub_client`.

    Every method takes ``request_timeout``: seconds on the client's clock (default: the
    client's), after which it raises ``StubTimeoutError``.
    """

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._next_watch = 1

    async def _expect(
        self, kind: type[R], build: Callable[[int], m.Request], request_timeout: float | None
    ) -> R:
        reply = await self._channel.call(build, request_timeout)
        if not isinstance(reply, kind):
            raise StorageError(
                f"stub answered {type(reply).__name__}, expected {kind.__name__}", ledger_id=-1
            )
        return reply

    # ---- ledger operations -------------------------------------------------------------------

    async def create_ledger(self, *, request_timeout: float | None = None) -> int:
        """Create a ledger; returns its id."""
        return (await self._expect(m.IntReply, m.CreateLedger, request_timeout)).value

    async def add_entry(
        self, ledger_id: int, data: bytes, *, request_timeout: float | None = None
    ) -> int:
        """Append an entry; returns its id once the stub holds it durably.

        Raises:
            NoSuchLedgerError, LedgerClosedError, LedgerFencedError: See ``LedgerStore``.
        """
        build = partial(m.AddEntry, ledger_id=ledger_id, data=data)
        return (await self._expect(m.IntReply, build, request_timeout)).value

    async def read(
        self, ledger_id: int, first: int, last: int, *, request_timeout: float | None = None
    ) -> list[bytes]:
        """Read entries ``first..last`` inclusive.

        Raises:
            NoSuchLedgerError, EntryOutOfRangeError: See ``LedgerStore.read``.
            ReadTooLargeError: The entries would not fit in one reply.
        """
        build = partial(m.ReadEntries, ledger_id=ledger_id, first=first, last=last)
        return (await self._expect(m.EntriesReply, build, request_timeout)).entries

    async def last_add_confirmed(
        self, ledger_id: int, *, request_timeout: float | None = None
    ) -> int:
        build = partial(m.GetLastAddConfirmed, ledger_id=ledger_id)
        return (await self._expect(m.IntReply, build, request_timeout)).value

    async def close_ledger(self, ledger_id: int, *, request_timeout: float | None = None) -> int:
        """Close a ledger as its writer; returns its final last-add-confirmed."""
        build = partial(m.CloseLedger, ledger_id=ledger_id)
        return (await self._expect(m.IntReply, build, request_timeout)).value

    async def fence(self, ledger_id: int, *, request_timeout: float | None = None) -> int:
        """Fence a ledger (a new owner recovering it); returns its last-add-confirmed."""
        build = partial(m.FenceLedger, ledger_id=ledger_id)
        return (await self._expect(m.IntReply, build, request_timeout)).value

    async def delete_ledger(self, ledger_id: int, *, request_timeout: float | None = None) -> None:
        await self._expect(m.Ok, partial(m.DeleteLedger, ledger_id=ledger_id), request_timeout)

    async def info(self, ledger_id: int, *, request_timeout: float | None = None) -> LedgerInfo:
        build = partial(m.GetLedgerInfo, ledger_id=ledger_id)
        return (await self._expect(m.LedgerInfoReply, build, request_timeout)).info

    async def ledger_ids(self, *, request_timeout: float | None = None) -> list[int]:
        return (await self._expect(m.IdsReply, m.ListLedgers, request_timeout)).ids

    # ---- metadata operations -----------------------------------------------------------------

    async def session_create(
        self,
        session_timeout: float,
        *,
        keepalive: bool = True,
        request_timeout: float | None = None,
    ) -> int:
        """Open a metadata session; with ``keepalive`` the client heartbeats it."""
        build = partial(m.SessionCreate, timeout_ms=max(1, round(session_timeout * 1000)))
        session = (await self._expect(m.IntReply, build, request_timeout)).value
        if keepalive:
            self._channel.keep_alive(session, session_timeout)
        return session

    async def session_heartbeat(
        self, session: int, *, request_timeout: float | None = None
    ) -> None:
        """Raises: SessionExpiredError: The session already ended."""
        await self._expect(m.Ok, partial(m.SessionHeartbeat, session_id=session), request_timeout)

    async def session_close(self, session: int, *, request_timeout: float | None = None) -> None:
        """End a session now (its ephemeral nodes go); idempotent."""
        self._channel.forget_session(session)
        await self._expect(m.Ok, partial(m.SessionClose, session_id=session), request_timeout)

    def session_alive(self, session: int) -> bool:
        """False once the session is known to have ended (expired, closed, stub restarted)."""
        return self._channel.session_alive(session)

    async def wait_unreachable(self) -> str:
        """Wait until a session kept alive here is lost to the stub's silence; returns why.

        Lost: no heartbeat answered for the session's whole timeout (``storage_stub.channel``).
        """
        return await self._channel.wait_unreachable()

    async def get(
        self, session: int, path: str, *, request_timeout: float | None = None
    ) -> NodeStat | None:
        build = partial(m.MetaGet, session_id=session, path=path)
        reply = await self._expect(m.NodeReply, build, request_timeout)
        if reply.value is None:
            return None
        return NodeStat(reply.value, reply.version, reply.ephemeral, reply.created_by_self)

    async def put(
        self,
        session: int,
        path: str,
        value: bytes,
        expected_version: int | None = None,
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        request_timeout: float | None = None,
    ) -> tuple[str, int]:
        """Create or replace a node; returns its path and new version."""
        build = partial(
            m.MetaPut,
            session_id=session,
            path=path,
            value=value,
            expected_version=expected_version,
            ephemeral=ephemeral,
            sequential=sequential,
        )
        reply = await self._expect(m.PutReply, build, request_timeout)
        return reply.path, reply.version

    async def delete(
        self,
        path: str,
        expected_version: int | None = None,
        *,
        request_timeout: float | None = None,
    ) -> None:
        build = partial(m.MetaDelete, path=path, expected_version=expected_version)
        await self._expect(m.Ok, build, request_timeout)

    async def children(self, path: str, *, request_timeout: float | None = None) -> list[str]:
        return (
            await self._expect(m.NamesReply, partial(m.MetaChildren, path=path), request_timeout)
        ).names

    async def exists(self, path: str, *, request_timeout: float | None = None) -> bool:
        return (
            await self._expect(m.BoolReply, partial(m.MetaExists, path=path), request_timeout)
        ).value

    async def watch(
        self, prefix: str, *, buffer_size: int = 1024, request_timeout: float | None = None
    ) -> StubWatch:
        """Watch ``prefix`` and below; close the returned stream to stop.

        Raises:
            InvalidPathError: The prefix is malformed.
        """
        watch_id = self._next_watch
        self._next_watch += 1
        watch = StubWatch(watch_id, prefix, buffer_size, on_close=self._unwatch)
        self._channel.watches[watch_id] = watch  # before the request: pushes may beat the reply
        try:
            build = partial(m.WatchCreate, watch_id=watch_id, prefix=prefix)
            await self._expect(m.Ok, build, request_timeout)
        except BaseException:
            watch.close()  # also tells the stub, in case it created the watch before we gave up
            raise
        return watch

    def _unwatch(self, watch: StubWatch) -> None:
        if self._channel.watches.pop(watch.watch_id, None) is not None:
            self._channel.send_nowait(partial(m.WatchClose, watch_id=watch.watch_id))

    # ---- control -------------------------------------------------------------------------------

    async def configure_faults(
        self, config: FaultConfig, *, request_timeout: float | None = None
    ) -> None:
        await self._expect(m.Ok, partial(m.ConfigureFaults, config=config), request_timeout)

    async def fail_next(
        self,
        count: int,
        ops: list[str] | None = None,
        code: str = "Unavailable",
        *,
        request_timeout: float | None = None,
    ) -> None:
        """Make the stub fail its next ``count`` requests of kinds ``ops`` (all if ``None``)."""
        build = partial(m.FailNext, count=count, ops=ops, code=code)
        await self._expect(m.Ok, build, request_timeout)

    async def stall(self, seconds: float, *, request_timeout: float | None = None) -> None:
        """Make the stub hold every reply for ``seconds`` of its clock."""
        await self._expect(m.Ok, partial(m.Stall, seconds=seconds), request_timeout)

    async def clear_faults(self, *, request_timeout: float | None = None) -> None:
        await self._expect(m.Ok, m.ClearFaults, request_timeout)

    async def statistics(self, *, request_timeout: float | None = None) -> m.StatsReply:
        return await self._expect(m.StatsReply, m.GetStatistics, request_timeout)

    async def ping(self, *, request_timeout: float | None = None) -> None:
        await self._expect(m.Ok, m.Ping, request_timeout)

    @property
    def connected(self) -> bool:
        """Whether the client has a live connection right now."""
        return self._channel.connected

    @property
    def reconnects(self) -> int:
        """How many times the client reconnected."""
        return self._channel.reconnects

    async def wait_connected(self) -> None:
        """Wait until the client has a live connection."""
        await self._channel.wait_connected()

    def forget_session(self, session: int) -> None:
        """Stop heartbeating ``session`` and count it as ended (the stub says it expired)."""
        self._channel.forget_session(session)


@asynccontextmanager
async def open_stub_client(
    url: str | None = None,
    *,
    connect: Callable[[], Awaitable[ByteStream]] | None = None,
    clock: Clock | None = None,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    backoff: Backoff | None = None,
) -> AsyncIterator[StubClient]:
    """Connect to a stub; the client reconnects by itself until the ``async with`` ends.

    Args:
        url: ``stub://host:port``; ignored when ``connect`` is given.
        connect: Opens a byte stream to the stub (e.g. ``StubServer.connect`` in-process).
        clock: Time for timeouts, backoff and heartbeats; defaults to the event loop's.
        request_timeout: Default per-request timeout in seconds.
        connect_timeout: Seconds allowed for one connection attempt and its handshake.
        backoff: Reconnection delays (default ``STUB_BACKOFF``: 50 ms doubling up to 2 s).

    Raises:
        StubConnectionError: The first connection attempt failed.
        ValueError: ``url`` is malformed, or neither ``url`` nor ``connect`` was given.
    """
    if connect is None:
        if url is None:
            raise ValueError("give a stub URL or a connect function")
        host, port = parse_stub_url(url)
        connect = partial(anyio.connect_tcp, host, port)
    channel = StubChannel(
        connect,
        clock=clock if clock is not None else AnyioClock(),
        request_timeout=request_timeout,
        connect_timeout=connect_timeout,
        backoff=backoff if backoff is not None else STUB_BACKOFF,
    )
    first = await channel.open_stream()
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(channel.run, first)
        try:
            await channel.wait_connected()
            yield StubClient(channel)
        except Exception as exc:  # re-raised below, unwrapped by the task group
            failure = exc
        finally:
            channel.shutdown()
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
