"""A ``MetadataStore`` on etcd v3: ``--metadata-url etcd://host:2379[,host:2379...][/chroot]``.

The multi-machine deployment (DESIGN.md, "Processes and deployments") keeps the metadata in a
real etcd cluster. Each store is one session, as with the other backends.

**Client, chosen by measurement** (``bench/etcd_clients.py``; numbers in docs/performance.md).
We talk to etcd's JSON gateway (``POST /v3/kv/txn`` ...) with our own small HTTP/1.1 client on
anyio streams (``etcd_gateway`` over the sans-IO ``http11``). Against one local etcd, one call
at a time, it matched aiohttp on the same gateway (within a few percent) and was 9-16 % slower
at the median than ``aetcd``, the maintained asyncio gRPC client; with 16 calls in flight aetcd
did ~1.45x the puts per second (gRPC multiplexes one HTTP/2 connection, and skips the gateway's
JSON and its internal hop inside etcd, which is where the remaining gap is: our client's own
cost is ~50 us of a ~400 us call). That gap is tens of microseconds on calls a broker makes a
few times per second (ownership, load reports, policies), while aetcd would make this backend
asyncio-only (it runs on grpc.aio and spawns its own asyncio tasks, against STYLE.md §1.14 and
§1.16) and add grpcio to the runtime dependencies; aiohttp would be asyncio-only too. Our
client is anyio code like the rest of the core, so this backend runs on trio as well, and its
tests run against a real etcd server on both anyio backends. h11 was tried first and dropped:
its per-request cost made the client the slowest of the four.

**Mapping** (Pulsar's ``EtcdMetadataStore`` makes the same choices where it has them):

- Keys: see ``etcd_keys``: one key per node, one link key per ancestor for ``children``, one
  counter key per parent of sequential nodes.
- Versions: our ``version`` is etcd's per-key ``version`` minus one. etcd counts the writes to
  a key since it was created, from 1, and forgets them on delete, which is exactly ZooKeeper's
  ``Stat.version`` (0 at creation, +1 per write, again 0 when re-created) shifted by one.
  ``mod_revision`` would not do: it is the cluster-wide revision of the last write, which grows
  with every write to *any* key. Revisions serve watches instead (where a resumed watch starts).
- Conditional writes are transactions: ``expected_version=n`` compares ``version == n + 1``,
  ``-1`` compares ``create_revision == 0`` (the key does not exist); a create also writes the
  node's links in the same transaction, so a failed write changes nothing.
- Sessions are leases and ephemeral nodes are keys attached to the lease (``etcd_session``).
  Modifying a node keeps its lease (``ignore_lease``): an ephemeral node stays its creator's.
- ``created_by_self``: the key's lease is this store's current lease.
- Sequential nodes: the counter key is written first (its new version is the counter), then the
  node is created if absent, like ZooKeeper, whose sequential create fails if the name is taken.
- Watches: ``etcd_watch``.

Timeouts are deadlines on the injected clock: ``request_timeout`` per call (Pulsar's
``metadataStoreOperationTimeoutSeconds``, 30 s), the session's TTL for the lease.
"""

from __future__ import annotations

import itertools
import logging
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Final, Self

import anyio
import anyio.lowlevel

from emubroker.metadata.deadlines import DeadlineWatchdog
from emubroker.metadata.etcd_gateway import EtcdGateway, GatewayCallError, GatewayError
from emubroker.metadata.etcd_keys import KeyLayout
from emubroker.metadata.etcd_messages import (
    KeyValue,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    TxnRequest,
    TxnResponse,
)
from emubroker.metadata.etcd_session import EtcdSession, EtcdSessionStatistics
from emubroker.metadata.etcd_txns import (
    check_put_arguments,
    confirm_children,
    delete_txn,
    drop_links_txn,
    join,
    put_txn,
    put_version,
    raise_unless_succeeded,
    versioned_value,
)
from emubroker.metadata.etcd_url import EtcdAddress, parse_etcd_url
from emubroker.metadata.etcd_watch import EtcdWatch
from emubroker.metadata.memory import WATCH_BUFFER_SIZE
from emubroker.metadata.store import (
    SEQUENTIAL_DIGITS,
    MetadataStoreError,
    PutResult,
    StoreClosedError,
    validate_path,
)
from emubroker.metadata.stub_mapping import TranslatedWatchStream
from protocol.clock import AnyioClock
from storage_stub.client import StubWatch

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from types import TracebackType

    from anyio.abc import ObjectReceiveStream, TaskGroup, TaskStatus

    from emubroker.metadata.store import MetadataStore, Notification, VersionedValue
    from protocol.clock import Clock

__all__ = [
    "DEFAULT_REQUEST_TIMEOUT",
    "DEFAULT_SESSION_TIMEOUT",
    "EtcdMetadataStore",
    "open_etcd_metadata_store",
]

logger = logging.getLogger(__name__)

# Pulsar's metadataStoreSessionTimeoutMillis and metadataStoreOperationTimeoutSeconds defaults.
DEFAULT_SESSION_TIMEOUT: Final = 30.0
DEFAULT_REQUEST_TIMEOUT: Final = 30.0
# Seconds one connection attempt may take before the next endpoint is tried.
DEFAULT_CONNECT_TIMEOUT: Final = 5.0
# How long closing waits for watches to receive this store's own last writes (a guard only:
# etcd sends them within milliseconds).
WATCH_DRAIN_GUARD: Final = 5.0
# What etcd says when a write names a lease it does not know (ErrGRPCLeaseNotFound).
_LEASE_NOT_FOUND: Final = "requested lease not found"


@contextmanager
def _translated() -> Iterator[None]:
    # Foreign errors become the protocol's at this boundary (STYLE.md §1.11).
    try:
        yield
    except GatewayError as exc:
        raise MetadataStoreError(f"etcd: {exc}") from exc


class EtcdMetadataStore:
    """One session on an etcd cluster; implements ``MetadataStore``.

    Open it with :meth:`open` (its background tasks run in a task group you own) or
    :func:`open_etcd_metadata_store`.
    """

    def __init__(
        self,
        address: EtcdAddress,
        *,
        clock: Clock,
        session_timeout: float,
        request_timeout: float,
        connect_timeout: float,
        watch_buffer_size: int,
    ) -> None:
        if watch_buffer_size < 1:
            raise ValueError(f"watch_buffer_size must be >= 1, got {watch_buffer_size}")
        self._watchdog = DeadlineWatchdog(clock)
        self._gateway = EtcdGateway(
            address.endpoints,
            watchdog=self._watchdog,
            request_timeout=request_timeout,
            connect_timeout=connect_timeout,
        )
        self._layout = KeyLayout(address.root)
        self._clock = clock
        self._session = EtcdSession(self._gateway, clock, session_timeout)
        self._watch_buffer_size = watch_buffer_size
        self._scope = anyio.CancelScope()
        self._tasks: TaskGroup | None = None
        self._watches: set[EtcdWatch] = set()
        self._watch_ids = itertools.count(1)
        self._closed = False

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        task_group: TaskGroup,
        clock: Clock | None = None,
        session_timeout: float = DEFAULT_SESSION_TIMEOUT,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        watch_buffer_size: int = WATCH_BUFFER_SIZE,
    ) -> EtcdMetadataStore:
        """Open a session on the etcd cluster at ``url`` (see ``etcd_url``).

        Args:
            url: ``etcd://host:port[,host:port...][/chroot]``.
            task_group: Runs the store's background tasks (timeouts, keep-alive, watches)
                until :meth:`aclose`.
            clock: Time for timeouts and keep-alives; defaults to the event loop's.
            session_timeout: Seconds without keep-alive before etcd ends the session.
            request_timeout: Seconds one etcd call may take.
            connect_timeout: Seconds one connection attempt may take before the next endpoint.
            watch_buffer_size: Notifications a watch buffers before it overflows.

        Raises:
            ValueError: The URL is malformed.
            MetadataStoreError: etcd could not be reached or refused.
        """
        store = cls(
            parse_etcd_url(url),
            clock=clock if clock is not None else AnyioClock(),
            session_timeout=session_timeout,
            request_timeout=request_timeout,
            connect_timeout=connect_timeout,
            watch_buffer_size=watch_buffer_size,
        )
        await task_group.start(store._run)
        try:
            with _translated():
                await store._session.current()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await store.aclose()
            raise
        return store

    async def _run(self, *, task_status: TaskStatus[None]) -> None:
        with self._scope:
            async with anyio.create_task_group() as tasks:
                self._tasks = tasks
                tasks.start_soon(self._watchdog.run)
                tasks.start_soon(self._session.run_keepalive)
                task_status.started()

    @property
    def session_id(self) -> int:
        """The current lease id; it changes when the session expires (0 while it has none)."""
        return self._session.lease_id

    def session_statistics(self) -> EtcdSessionStatistics:
        """A snapshot of the session's counters."""
        return self._session.statistics()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("the metadata store session is closed")

    async def _txn(self, request: TxnRequest) -> TxnResponse:
        with _translated():
            return await self._gateway.call("/v3/kv/txn", request, TxnResponse)

    async def _read(
        self, key: bytes, end: bytes = b"", *, keys_only: bool = False, limit: int = 0
    ) -> list[KeyValue]:
        self._check_open()
        request = RangeRequest(key, end, limit=limit, keys_only=keys_only)
        with _translated():
            return (await self._gateway.call("/v3/kv/range", request, RangeResponse)).kvs

    def _wrote(self, path: str, revision: int) -> None:
        # Watches covering the path must deliver this write before the store closes them.
        for watch in self._watches:
            if watch.covers(path):
                watch.awaited_revision = max(watch.awaited_revision, revision)

    # ---- reads ---------------------------------------------------------------------------------

    async def get(self, path: str) -> VersionedValue | None:
        """See ``MetadataStore.get``."""
        kvs = await self._read(self._layout.node(validate_path(path)))
        return versioned_value(kvs[0], self._session.lease_id) if kvs else None

    async def exists(self, path: str) -> bool:
        """See ``MetadataStore.exists``."""
        return bool(await self._read(self._layout.node(validate_path(path)), keys_only=True))

    async def children(self, path: str) -> list[str]:
        """See ``MetadataStore.children``.

        The names come from the links (one range); each is then confirmed by a range over its
        subtree, in read-only transactions, since links can outlive what they point to (see
        ``etcd_keys``). Stale links found on the way are deleted.
        """
        validate_path(path, allow_root=True)
        links = await self._read(*self._layout.links_of(path), keys_only=True)
        names = sorted({self._layout.parse_link(kv.key, path).child for kv in links})
        replies = [await self._txn(txn) for txn in confirm_children(self._layout, path, names)]
        ops = [op for reply in replies for op in reply.responses]
        found: list[str] = []
        for name, op in zip(names, ops, strict=True):
            if op.response_range is not None and op.response_range.kvs:
                found.append(name)
            else:
                await self._drop_stale_links(path, name)
        return found

    async def _drop_stale_links(self, path: str, name: str) -> None:
        # Guarded by "nothing there", so a node created meanwhile keeps its link. Best effort:
        # the next listing tries again.
        try:
            await self._txn(drop_links_txn(self._layout, path, name))
        except MetadataStoreError as exc:
            logger.info("could not drop stale links of %s: %s", join(path, name), exc)

    # ---- writes --------------------------------------------------------------------------------

    async def put(
        self,
        path: str,
        value: bytes,
        expected_version: int | None = None,
        *,
        ephemeral: bool = False,
        sequential: bool = False,
    ) -> PutResult:
        """See ``MetadataStore.put``."""
        self._check_open()
        check_put_arguments(expected_version, sequential)
        validate_path(path + "0" * SEQUENTIAL_DIGITS if sequential else path)
        if sequential:
            path = f"{path}{await self._next_in_sequence(path):0{SEQUENTIAL_DIGITS}d}"
            expected_version = -1
        value = bytes(value)
        if not ephemeral:
            return await self._put(path, value, expected_version, 0)
        with _translated():
            lease = await self._session.current()
        try:
            return await self._put(path, value, expected_version, lease)
        except MetadataStoreError as exc:
            cause = exc.__cause__
            if not (isinstance(cause, GatewayCallError) and _LEASE_NOT_FOUND in cause.message):
                raise
        # etcd ended the session before our keep-alive noticed: carry on with a new one, as
        # the other backends do (nothing was written: the transaction failed as a whole).
        self._session.lost(lease, "etcd no longer knows the lease")
        with _translated():
            lease = await self._session.current()
        return await self._put(path, value, expected_version, lease)

    async def _next_in_sequence(self, prefix: str) -> int:
        # The counter's etcd version after our put, minus one: 0 for the first node.
        parent = prefix.rpartition("/")[0] or "/"
        with _translated():
            reply = await self._gateway.call(
                "/v3/kv/put", PutRequest(self._layout.counter(parent), prev_kv=True), PutResponse
            )
        return reply.prev_kv.version if reply.prev_kv is not None else 0

    async def _put(
        self, path: str, value: bytes, expected_version: int | None, lease: int
    ) -> PutResult:
        reply = await self._txn(put_txn(self._layout, path, value, expected_version, lease))
        version = put_version(reply, path, expected_version)
        self._wrote(path, reply.header.revision)
        return PutResult(path, version)

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        """See ``MetadataStore.delete``."""
        self._check_open()
        if expected_version is not None and expected_version < 0:
            raise ValueError(f"expected_version must be None or >= 0, got {expected_version}")
        validate_path(path)
        reply = await self._txn(delete_txn(self._layout, path, expected_version))
        raise_unless_succeeded(reply, "delete", path, expected_version)
        self._wrote(path, reply.header.revision)

    # ---- watches -------------------------------------------------------------------------------

    @asynccontextmanager
    async def watch(self, path_prefix: str) -> AsyncIterator[ObjectReceiveStream[Notification]]:
        """See ``MetadataStore.watch``."""
        self._check_open()
        validate_path(path_prefix, allow_root=True)
        watch: EtcdWatch | None = None

        def stopped(_: StubWatch) -> None:
            if watch is not None:
                watch.stop()

        buffer = StubWatch(
            next(self._watch_ids), path_prefix, self._watch_buffer_size, on_close=stopped
        )
        watch = EtcdWatch(self._gateway, self._layout, path_prefix, buffer, self._clock)
        assert self._tasks is not None  # set before open() returns
        with _translated():
            await self._tasks.start(watch.run)
        self._watches.add(watch)
        try:
            yield TranslatedWatchStream(buffer)
        finally:
            self._watches.discard(watch)
            buffer.close()

    # ---- sessions ------------------------------------------------------------------------------

    async def expire_session(self) -> None:
        """See ``MetadataStore.expire_session``."""
        self._check_open()
        with _translated():
            await self._session.expire()

    async def wait_session_lost(self) -> str:
        """See ``MetadataStore.wait_session_lost``.

        Never, for now: the lease is renewed by ``EtcdSession``, which carries on with a new
        lease when etcd lets one lapse, and an unreachable etcd is not yet told apart.
        """
        await anyio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        """See ``MetadataStore.aclose``."""
        if self._closed:
            await anyio.lowlevel.checkpoint()
            return
        self._closed = True
        # End our own watches first (a closing session is told nothing more), once they hold
        # our own writes, as the other backends' watches do.
        with anyio.move_on_after(WATCH_DRAIN_GUARD):
            for watch in list(self._watches):
                await watch.wait_delivered()
        for watch in list(self._watches):
            watch.buffer.finish()
        self._watches.clear()
        await self._session.end()
        await self._gateway.aclose()
        self._scope.cancel()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


@asynccontextmanager
async def open_etcd_metadata_store(
    url: str,
    *,
    clock: Clock | None = None,
    session_timeout: float = DEFAULT_SESSION_TIMEOUT,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    watch_buffer_size: int = WATCH_BUFFER_SIZE,
) -> AsyncIterator[EtcdMetadataStore]:
    """Open a session on the etcd cluster at ``url`` for the block (see :meth:`open`).

    Raises:
        ValueError: The URL is malformed.
        MetadataStoreError: etcd could not be reached.
    """
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:
        store: EtcdMetadataStore | None = None
        try:
            store = await EtcdMetadataStore.open(
                url,
                task_group=tg,
                clock=clock,
                session_timeout=session_timeout,
                request_timeout=request_timeout,
                connect_timeout=connect_timeout,
                watch_buffer_size=watch_buffer_size,
            )
            yield store
        except Exception as exc:  # re-raised below, unwrapped by the task group
            failure = exc
        finally:
            if store is not None:
                with anyio.CancelScope(shield=True):
                    await store.aclose()
    if failure is not None:
        raise failure


if TYPE_CHECKING:

    def _conforms(store: EtcdMetadataStore) -> MetadataStore:
        # mypy proves here that EtcdMetadataStore satisfies the MetadataStore protocol.
        return store
