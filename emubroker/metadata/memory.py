"""In-process metadata store: one shared tree, one ``MemoryMetadataStore`` per session.

Several brokers in one process share a :class:`MemoryMetadataTree` and each opens its own session
with :meth:`MemoryMetadataTree.open_session`, exactly as brokers of a real cluster share one
ZooKeeper with a session each. ``MemoryMetadataStore()`` with no tree gets a private one.

Invariants kept by the tree:

1. ``_nodes`` holds exactly the nodes that have a value. ``_kids[parent][name]`` counts the nodes
   with a value at or below ``parent/name``, so implicit parents list their children and vanish
   when their last descendant is deleted.
2. ``_ephemerals[session]`` is exactly the set of live nodes owned by that session.
3. Every write emits one notification, synchronously, to every matching watcher, so all watchers
   see writes in the order they happened.

Watch buffering policy: writers never wait for watchers. Each watch has a bounded buffer
(``watch_buffer_size``). When a notification does not fit, the watch is *broken*: nothing more
is queued, the watcher receives what was buffered and then :class:`WatchOverflowError`, and must
re-read and watch again. Dropping notifications silently (oldest or newest) would leave the
watcher's view of the tree wrong without telling it.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final, Self

import anyio
import anyio.lowlevel
import msgspec
from anyio.abc import ObjectReceiveStream

from emubroker.metadata.store import (
    SEQUENTIAL_DIGITS,
    BadVersionError,
    NotFoundError,
    Notification,
    NotificationKind,
    PutResult,
    StoreClosedError,
    VersionedValue,
    WatchOverflowError,
    validate_path,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from types import TracebackType

    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from emubroker.metadata.store import MetadataStore

__all__ = [
    "WATCH_BUFFER_SIZE",
    "MemoryMetadataStore",
    "MemoryMetadataTree",
    "MemoryMetadataTreeStatistics",
]

# Metadata writes are rare (policies, ownership, a load report per broker every few seconds), so
# a watcher 1024 notifications behind is stuck rather than slow; a notification is ~100 bytes.
WATCH_BUFFER_SIZE: Final = 1024


class _Node:
    __slots__ = ("owner", "value", "version")

    def __init__(self, value: bytes, owner: int | None) -> None:
        self.value = value
        self.version = 0
        self.owner = owner  # session id for ephemeral nodes, None for persistent ones


class _Watcher:
    __slots__ = ("overflowed", "prefix", "send", "session", "under")

    def __init__(self, prefix: str, send: MemoryObjectSendStream[Notification]) -> None:
        self.prefix = prefix
        self.under = "/" if prefix == "/" else prefix + "/"
        self.send = send
        self.overflowed = False

    def matches(self, path: str) -> bool:
        return path == self.prefix or path.startswith(self.under)


class _WatchStream(ObjectReceiveStream[Notification]):
    """The receiving end of a watch; raises WatchOverflowError once the buffer is drained."""

    def __init__(self, receive: MemoryObjectReceiveStream[Notification], watcher: _Watcher) -> None:
        self._receive = receive
        self._watcher = watcher

    async def receive(self) -> Notification:
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            if self._watcher.overflowed:
                raise WatchOverflowError(
                    f"watch on {self._watcher.prefix!r} overflowed; notifications were lost"
                ) from None
            raise

    async def aclose(self) -> None:
        self.close()
        await anyio.lowlevel.checkpoint()

    def close(self) -> None:
        """Close the stream without waiting (safe in ``finally`` under cancellation)."""
        self._receive.close()


class MemoryMetadataTreeStatistics(msgspec.Struct, frozen=True):
    """Snapshot of a tree, for debugging.

    Attributes:
        nodes: Nodes holding a value.
        ephemeral_nodes: How many of them are ephemeral.
        sessions: Open sessions.
        watchers: Active watches across all sessions.
    """

    nodes: int
    ephemeral_nodes: int
    sessions: int
    watchers: int


class MemoryMetadataTree:
    """The data shared by all sessions of an in-process metadata store.

    Args:
        watch_buffer_size: Notifications a watch may buffer before it is broken (see the
            module docstring).
    """

    def __init__(self, *, watch_buffer_size: int = WATCH_BUFFER_SIZE) -> None:
        if watch_buffer_size < 1:
            raise ValueError(f"watch_buffer_size must be >= 1, got {watch_buffer_size}")
        self._watch_buffer_size = watch_buffer_size
        self._nodes: dict[str, _Node] = {}
        self._kids: dict[str, dict[str, int]] = {}
        self._sequence: dict[str, int] = {}
        self._ephemerals: dict[int, set[str]] = {}
        self._watchers: set[_Watcher] = set()
        self._next_session = 1

    def open_session(self) -> MemoryMetadataStore:
        """Open a new session on this tree; close it with ``aclose()`` or ``async with``."""
        return MemoryMetadataStore(self)

    def statistics(self) -> MemoryMetadataTreeStatistics:
        """Return a frozen snapshot of the tree's counters."""
        return MemoryMetadataTreeStatistics(
            nodes=len(self._nodes),
            ephemeral_nodes=sum(len(paths) for paths in self._ephemerals.values()),
            sessions=len(self._ephemerals),
            watchers=len(self._watchers),
        )

    # ---- used by MemoryMetadataStore; all synchronous, so every write is atomic -------------

    def _new_session(self) -> int:
        session = self._next_session
        self._next_session += 1
        self._ephemerals[session] = set()
        return session

    def _end_session(self, session: int) -> None:
        # Sorted, so that watchers see a deterministic order of deletions.
        for path in sorted(self._ephemerals.pop(session, ())):
            self._remove(path)

    def _get(self, path: str, session: int) -> VersionedValue | None:
        node = self._nodes.get(validate_path(path))
        if node is None:
            return None
        ephemeral = node.owner is not None
        return VersionedValue(
            node.value, node.version, ephemeral, ephemeral and node.owner == session
        )

    def _put(
        self,
        session: int,
        path: str,
        value: bytes,
        expected_version: int | None,
        *,
        ephemeral: bool,
        sequential: bool,
    ) -> PutResult:
        if expected_version is not None and expected_version < -1:
            raise ValueError(f"expected_version must be None, -1 or >= 0, got {expected_version}")
        if sequential:
            if expected_version not in (None, -1):
                raise ValueError(
                    "a sequential put always creates: expected_version must be None or -1"
                )
            parent = _parent(validate_path(path + "0" * SEQUENTIAL_DIGITS))
            counter = self._sequence.get(parent, 0)
            self._sequence[parent] = counter + 1
            path = f"{path}{counter:0{SEQUENTIAL_DIGITS}d}"
            expected_version = -1  # ZooKeeper's sequential create fails if the name is taken
        validate_path(path)
        value = bytes(value)  # the tree must never hold a buffer the caller can still mutate
        node = self._nodes.get(path)
        if expected_version is not None and (
            (node.version if node is not None else -1) != expected_version
        ):
            raise BadVersionError(
                f"put {path!r}: expected version {expected_version}, "
                f"found {'none' if node is None else node.version}"
            )
        if node is not None:
            node.value = value
            node.version += 1
            self._notify(path, NotificationKind.MODIFIED)
            return PutResult(path, node.version)
        self._nodes[path] = _Node(value, session if ephemeral else None)
        if ephemeral:
            self._ephemerals[session].add(path)
        self._link(path)
        self._notify(path, NotificationKind.CREATED)
        return PutResult(path, 0)

    def _delete(self, path: str, expected_version: int | None) -> None:
        if expected_version is not None and expected_version < 0:
            raise ValueError(f"expected_version must be None or >= 0, got {expected_version}")
        node = self._nodes.get(validate_path(path))
        if node is None:
            raise NotFoundError(f"delete {path!r}: no such node")
        if expected_version is not None and node.version != expected_version:
            raise BadVersionError(
                f"delete {path!r}: expected version {expected_version}, found {node.version}"
            )
        if node.owner is not None:
            self._ephemerals[node.owner].discard(path)
        self._remove(path)

    def _children(self, path: str) -> list[str]:
        return sorted(self._kids.get(validate_path(path, allow_root=True), ()))

    def _exists(self, path: str) -> bool:
        return validate_path(path) in self._nodes

    def _remove(self, path: str) -> None:
        del self._nodes[path]
        self._unlink(path)
        self._notify(path, NotificationKind.DELETED)

    def _link(self, path: str) -> None:
        while path != "/":
            parent = _parent(path)
            counts = self._kids.setdefault(parent, {})
            name = path.rpartition("/")[2]
            counts[name] = counts.get(name, 0) + 1
            path = parent

    def _unlink(self, path: str) -> None:
        while path != "/":
            parent = _parent(path)
            counts = self._kids[parent]
            name = path.rpartition("/")[2]
            if counts[name] == 1:
                del counts[name]
                if not counts:
                    del self._kids[parent]
            else:
                counts[name] -= 1
            path = parent

    def _notify(self, path: str, kind: NotificationKind) -> None:
        notification = Notification(path, kind)
        for watcher in [w for w in self._watchers if w.matches(path)]:
            try:
                watcher.send.send_nowait(notification)
            except anyio.WouldBlock:
                watcher.overflowed = True
                self._unwatch(watcher)
            except anyio.BrokenResourceError:
                self._unwatch(watcher)  # the watcher closed its end and is not listening

    def _watch(self, prefix: str) -> tuple[_Watcher, _WatchStream]:
        validate_path(prefix, allow_root=True)
        send, receive = anyio.create_memory_object_stream[Notification](self._watch_buffer_size)
        watcher = _Watcher(prefix, send)
        self._watchers.add(watcher)
        return watcher, _WatchStream(receive, watcher)

    def _unwatch(self, watcher: _Watcher) -> None:
        self._watchers.discard(watcher)
        watcher.send.close()  # ends the receiver's iteration once it drains the buffer


def _parent(path: str) -> str:
    return path.rpartition("/")[0] or "/"


class MemoryMetadataStore:
    """One session on a :class:`MemoryMetadataTree`; implements ``MetadataStore``.

    Args:
        tree: The tree to open a session on; ``None`` creates a private tree.
    """

    def __init__(self, tree: MemoryMetadataTree | None = None) -> None:
        self._tree = tree if tree is not None else MemoryMetadataTree()
        self._session = self._tree._new_session()
        self._watchers: set[_Watcher] = set()
        self._closed = False

    @property
    def tree(self) -> MemoryMetadataTree:
        """The tree this session works on."""
        return self._tree

    @property
    def session_id(self) -> int:
        """The current session's id; it changes when the session expires."""
        return self._session

    async def _enter(self) -> None:
        # Every operation is a checkpoint, as a remote store's would be.
        await anyio.lowlevel.checkpoint()
        if self._closed:
            raise StoreClosedError("the metadata store session is closed")

    async def get(self, path: str) -> VersionedValue | None:
        """See ``MetadataStore.get``."""
        await self._enter()
        return self._tree._get(path, self._session)

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
        await self._enter()
        return self._tree._put(
            self._session,
            path,
            value,
            expected_version,
            ephemeral=ephemeral,
            sequential=sequential,
        )

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        """See ``MetadataStore.delete``."""
        await self._enter()
        self._tree._delete(path, expected_version)

    async def children(self, path: str) -> list[str]:
        """See ``MetadataStore.children``."""
        await self._enter()
        return self._tree._children(path)

    async def exists(self, path: str) -> bool:
        """See ``MetadataStore.exists``."""
        await self._enter()
        return self._tree._exists(path)

    @asynccontextmanager
    async def watch(self, path_prefix: str) -> AsyncIterator[ObjectReceiveStream[Notification]]:
        """See ``MetadataStore.watch``."""
        await self._enter()
        watcher, stream = self._tree._watch(path_prefix)
        self._watchers.add(watcher)
        try:
            yield stream
        finally:
            self._watchers.discard(watcher)
            self._tree._unwatch(watcher)
            stream.close()

    async def expire_session(self) -> None:
        """See ``MetadataStore.expire_session``."""
        await self._enter()
        old, self._session = self._session, self._tree._new_session()
        self._tree._end_session(old)

    async def aclose(self) -> None:
        """See ``MetadataStore.aclose``."""
        if not self._closed:
            self._closed = True
            # End our own watches first: a closing session is told nothing more.
            for watcher in list(self._watchers):
                self._tree._unwatch(watcher)
            self._watchers.clear()
            self._tree._end_session(self._session)
        await anyio.lowlevel.checkpoint()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


if TYPE_CHECKING:

    def _conforms(store: MemoryMetadataStore) -> MetadataStore:
        # mypy proves here that MemoryMetadataStore satisfies the MetadataStore protocol.
        return store
