"""The stub as a service: connections, the TCP server, and hosting it in-process.

Per connection, a thin pump around the sans-IO pieces (STYLE.md §1.2): read bytes, feed the
``RpcDecoder``, execute each request in arrival order (``StubService.execute``), and queue the
replies; one writer task sends everything queued in one write. A batch of requests read
together that mutated a journaled store is handed to a task that waits for durability, so the
reader keeps reading (pipelining) while the journal syncs; replies held back by injected
latency wait in a task too, in ``ready_at`` order.

:func:`open_stub_server` builds the stores (recovering them from ``data_dir`` if given) and runs
the background tasks; :func:`serve_stub` adds a TCP listener. For clients in the same process,
:meth:`StubServer.connect` gives an in-memory connection (the RPC path, byte for byte) and
:meth:`StubServer.open_local_client` a ``StubClient`` without RPC (``storage_stub.local``).
"""

from __future__ import annotations

import fcntl
import logging
import os
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final

import anyio
import msgspec
from anyio.abc import ByteStream, SocketAttribute, TaskStatus

from protocol.clock import AnyioClock, Clock
from protocol.errors import RemoteProtocolError
from protocol.rpc import RpcDecoder, encode_into
from storage_stub import messages as m
from storage_stub.client import DEFAULT_REQUEST_TIMEOUT, StubClient
from storage_stub.durable import DurableLedgerStore
from storage_stub.durable_metadata import DurableMetadataTree
from storage_stub.faults import FaultConfig, FaultInjector
from storage_stub.journal import FsyncPolicy, Journal
from storage_stub.ledger import StorageError
from storage_stub.local import LocalChannel
from storage_stub.metadata import DEFAULT_WATCH_BUFFER, MetadataTree
from storage_stub.service import StubService
from storage_stub.transport import memory_stream_pair

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = [
    "DEFAULT_PORT",
    "StubAddress",
    "StubServer",
    "open_stub_server",
    "serve_stub",
]

logger = logging.getLogger(__name__)

DEFAULT_PORT: Final = 3181  # BookKeeper's bookie port
RECEIVE_SIZE: Final = 256 * 1024
# Replies a connection may owe (waiting for durability or injected latency) before we stop
# reading its requests: bounds the memory a client that pipelines without limit can pin.
MAX_IN_FLIGHT: Final = 8192
# Queued outgoing bytes beyond which a connection is dropped. Replies are bounded by
# MAX_IN_FLIGHT; this catches a client that stopped reading while watch events pile up.
MAX_OUTBOX_BYTES: Final = 256 * 1024 * 1024
LEDGER_JOURNAL: Final = "ledgers.journal"
METADATA_JOURNAL: Final = "metadata.journal"


class StubAddress(msgspec.Struct, frozen=True):
    """Where a stub listens; ``url`` is what ``open_stub_client`` takes."""

    host: str
    port: int

    @property
    def url(self) -> str:
        return f"stub://{self.host}:{self.port}"


class _Connection:
    """One client connection; also the ``WatchSink`` for the watches it opened."""

    def __init__(self, service: StubService, stream: ByteStream) -> None:
        self._service = service
        self._stream = stream
        self._outbox = bytearray()
        self._outbox_ready = anyio.Event()
        self._in_flight = 0
        self._drained = anyio.Event()
        self.watches: dict[int, int] = {}
        self._scope = anyio.CancelScope()

    def push(self, message: m.WatchEvent | m.WatchEnded) -> None:
        self._send(message)
        if len(self._outbox) > MAX_OUTBOX_BYTES:
            logger.warning("dropping a stub connection that stopped reading")
            self._scope.cancel()

    def _send(self, message: m.Reply | m.WatchEvent | m.WatchEnded) -> None:
        encode_into(message, self._outbox)
        self._outbox_ready.set()

    async def run(self) -> None:
        self._service.connection_opened()
        try:
            with self._scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._write_loop)
                    await self._read_loop(tg)
                    tg.cancel_scope.cancel()
        finally:
            self._service.connection_closed(self)
            with anyio.CancelScope(shield=True):
                await self._stream.aclose()

    async def _read_loop(self, tg: anyio.abc.TaskGroup) -> None:
        service, decoder = self._service, RpcDecoder[m.Request](m.Request)
        ledgers, metadata = service.ledgers, service.metadata
        while True:
            try:
                data = await self._stream.receive(RECEIVE_SIZE)
            except (
                anyio.EndOfStream,
                anyio.BrokenResourceError,
                anyio.ClosedResourceError,
                OSError,
            ):
                return
            decoder.feed(data)
            tickets = ledgers.ticket, metadata.ticket
            now_replies: list[m.Reply] = []
            later: list[tuple[float, m.Reply]] = []
            try:
                while (request := decoder.next_message()) is not None:
                    reply, ready_at = service.execute(request, self)
                    if ready_at is None or ready_at <= service.clock.now():
                        now_replies.append(reply)
                    else:
                        later.append((ready_at, reply))
            except RemoteProtocolError as exc:
                logger.warning("closing a stub connection: %s", exc)
                return
            after = ledgers.ticket, metadata.ticket
            if after != tickets:  # this batch mutated a journaled store: rule 1
                # Wait only for the journal(s) this batch wrote to.
                need = tuple(a if a != b else 0 for a, b in zip(after, tickets, strict=True))
                self._in_flight += len(now_replies) + len(later)
                tg.start_soon(self._finish_durable, need, now_replies, later)
            else:
                service.publish()
                for reply in now_replies:
                    self._send(reply)
                if later:
                    self._in_flight += len(later)
                    tg.start_soon(self._finish_later, later)
            while self._in_flight > MAX_IN_FLIGHT:
                self._drained = anyio.Event()
                await self._drained.wait()

    async def _finish_durable(
        self,
        tickets: tuple[int, ...],
        now_replies: list[m.Reply],
        later: list[tuple[float, m.Reply]],
    ) -> None:
        try:
            await self._service.wait_durable(*tickets)
        except StorageError as exc:
            # The journal failed: nothing in this batch may be acknowledged as written.
            every = [*now_replies, *(reply for _, reply in later)]
            self._settle([m.ErrorReply(r.rid, exc.code, str(exc)) for r in every])
            return
        self._settle(now_replies)
        await self._finish_later(later)

    async def _finish_later(self, later: list[tuple[float, m.Reply]]) -> None:
        # Sorted by ready_at; ties keep arrival order (the sort is stable).
        later.sort(key=lambda item: item[0])
        for ready_at, reply in later:
            await self._service.clock.sleep_until(ready_at)
            self._settle([reply])

    def _settle(self, replies: list[m.Reply]) -> None:
        for reply in replies:
            self._send(reply)
        self._in_flight -= len(replies)
        if self._in_flight <= MAX_IN_FLIGHT:
            self._drained.set()

    async def _write_loop(self) -> None:
        while True:
            await self._outbox_ready.wait()
            self._outbox_ready = anyio.Event()
            if not self._outbox:
                continue
            data, self._outbox = self._outbox, bytearray()
            try:
                await self._stream.send(bytes(data))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                self._scope.cancel()
                return


class StubServer:
    """A running stub: the service plus the task group its connections run in."""

    def __init__(self, service: StubService, tg: anyio.abc.TaskGroup) -> None:
        self.service = service
        self._tg = tg

    async def handle_connection(self, stream: ByteStream) -> None:
        """Serve one connection until the peer goes away (for a listener's ``serve``)."""
        await _Connection(self.service, stream).run()

    def connect(self) -> ByteStream:
        """Open an in-memory connection to this stub; the client end is returned."""
        client_end, server_end = memory_stream_pair()
        self._tg.start_soon(self.handle_connection, server_end)
        return client_end

    @asynccontextmanager
    async def open_local_client(
        self, *, request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    ) -> AsyncIterator[StubClient]:
        """A client that calls this stub directly, without RPC (``storage_stub.local``)."""
        channel = LocalChannel(self.service, request_timeout=request_timeout)
        self._tg.start_soon(channel.run_heartbeats)
        try:
            yield StubClient(channel)
        finally:
            channel.shutdown()


def _lock_data_dir(data_dir: Path) -> int:
    # Two stubs appending to one journal would interleave records; an advisory lock held for
    # the process lifetime makes the second one fail at start-up instead.
    fd = os.open(data_dir / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        raise RuntimeError(f"data directory {data_dir} is in use by another stub") from exc
    return fd


def _recover(
    path: Path, clock: Clock, fsync: FsyncPolicy, batch_window: float, tree: MetadataTree
) -> tuple[int, list[Journal], DurableLedgerStore, DurableMetadataTree]:
    path.mkdir(parents=True, exist_ok=True)
    lock_fd = _lock_data_dir(path)
    journals: list[Journal] = []
    try:
        opened = []
        for name in (LEDGER_JOURNAL, METADATA_JOURNAL):
            journal, scanned = Journal.open(
                path / name, clock=clock, policy=fsync, batch_window=batch_window
            )
            journals.append(journal)
            opened.append((journal, scanned))
        ledgers = DurableLedgerStore.recover(*opened[0])
        metadata = DurableMetadataTree.recover(*opened[1], tree=tree)
    except BaseException:
        for journal in journals:
            journal.close_now()
        os.close(lock_fd)
        raise
    logger.info(
        "stub recovered from %s: %s ledgers, %s metadata nodes",
        path,
        len(ledgers.ledger_ids()),
        tree.statistics().nodes,
    )
    return lock_fd, journals, ledgers, metadata


@asynccontextmanager
async def open_stub_server(
    *,
    data_dir: str | os.PathLike[str] | None = None,
    clock: Clock | None = None,
    fsync: FsyncPolicy = FsyncPolicy.BATCH,
    batch_window: float = 0.002,
    faults: FaultConfig | None = None,
    watch_buffer_size: int = DEFAULT_WATCH_BUFFER,
) -> AsyncIterator[StubServer]:
    """Run a stub in this process (no listener); connect to it with :meth:`StubServer.connect`.

    Args:
        data_dir: Directory for the journals (durable mode); ``None`` keeps everything in memory.
        clock: Time source; defaults to the event loop's.
        fsync: The journals' fsync policy.
        batch_window: Seconds a ``batch`` sync waits to gather records.
        faults: Initial fault configuration.
        watch_buffer_size: Pending notifications per watch before it overflows.

    Raises:
        JournalCorruptedError: A journal in ``data_dir`` is damaged (with the offset).
        RuntimeError: ``data_dir`` is locked by another stub.
    """
    clock = clock if clock is not None else AnyioClock()
    tree = MetadataTree(watch_buffer_size=watch_buffer_size)
    journals: list[Journal] = []
    lock_fd = -1
    try:
        if data_dir is None:
            ledgers, metadata = DurableLedgerStore(), DurableMetadataTree(tree)
        else:
            # Blocking file I/O on purpose: recovery happens once, before anything is served.
            lock_fd, journals, ledgers, metadata = _recover(
                Path(data_dir), clock, fsync, batch_window, tree
            )
        service = StubService(ledgers, metadata, clock=clock, faults=FaultInjector(faults))
        failure: Exception | None = None
        async with anyio.create_task_group() as tg:
            for journal in journals:
                tg.start_soon(journal.run)
            tg.start_soon(service.run_background)
            try:
                yield StubServer(service, tg)
            except Exception as exc:  # re-raised below, unwrapped by the task group
                failure = exc
            finally:
                tg.cancel_scope.cancel()
        if failure is not None:
            raise failure
    finally:
        for journal in journals:
            await journal.aclose()
        if lock_fd >= 0:
            os.close(lock_fd)


async def serve_stub(
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    clock: Clock | None = None,
    fsync: FsyncPolicy = FsyncPolicy.BATCH,
    batch_window: float = 0.002,
    faults: FaultConfig | None = None,
    task_status: TaskStatus[StubAddress] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the stub over TCP until cancelled (STYLE.md §1.15).

    Args:
        host: Address to bind.
        port: Port to bind; ``0`` picks a free one (reported through ``task_status``).
        data_dir: See :func:`open_stub_server`.
        clock: See :func:`open_stub_server`.
        fsync: See :func:`open_stub_server`.
        batch_window: See :func:`open_stub_server`.
        faults: See :func:`open_stub_server`.
        task_status: Receives the :class:`StubAddress` once the stub listens.
    """
    async with open_stub_server(
        data_dir=data_dir, clock=clock, fsync=fsync, batch_window=batch_window, faults=faults
    ) as server:
        listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
        async with listener:
            bound = listener.listeners[0].extra(SocketAttribute.local_port)
            task_status.started(StubAddress(host, bound))
            await listener.serve(server.handle_connection)
