"""In-process metadata store: one shared tree, one ``MemoryMetadataStore`` per session.

Several brokers in one process share a :class:`MemoryMetadataTree` and each opens its own session
with :meth:`MemoryMetadataTree.open_session`, exactly as brokers of a real cluster share one
ZooKeeper with a session each. ``MemoryMetadataStore()`` with no tree gets a private one.

The tree's rules (versions, implicit parents, sessions and their ephemeral nodes, sequential
counters, which watcher a write notifies) are ``storage_stub.metadata.MetadataTree``'s, the
model the stub's metadata service runs, so both backends keep one set of rules. This module
only adapts it: each operation is a checkpoint and then one synchronous call on the model (so
every write is atomic), its answers and errors are translated by ``stub_mapping`` as the remote
backend's are, and after every write the model's pending notifications are handed to the
watches at once, so all watchers see writes in the order they happened. In-process sessions
have no heartbeat to miss: they end only when closed, expired with ``expire_session``, or ended
from the tree's side with :meth:`MemoryMetadataTree.end_session` (fault injection standing in
for a timeout); a store whose session was ended that way opens a new one on its next
operation, as the remote and etcd backends do.

Watch buffering policy: writers never wait for watchers. Each watch has a bounded buffer
(``watch_buffer_size``). When a notification does not fit, the watch is *broken*: nothing more
is queued, the watcher receives what was buffered and then :class:`WatchOverflowError`, and must
re-read and watch again. Dropping notifications silently (oldest or newest) would leave the
watcher's view of the tree wrong without telling it. (``storage_stub.client_watch.StubWatch``
implements this for both backends.)
"""

from __future__ import annotations

import logging
import math
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final, Self

import anyio.lowlevel
import msgspec

from emubroker.metadata.store import PutResult, StoreClosedError
from emubroker.metadata.stub_mapping import TranslatedWatchStream, translated, versioned_value
from storage_stub.client import StubWatch
from storage_stub.metadata import MetadataTree

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from types import TracebackType

    from anyio.abc import ObjectReceiveStream

    from emubroker.metadata.store import MetadataStore, Notification, VersionedValue

__all__ = [
    "WATCH_BUFFER_SIZE",
    "MemoryMetadataStore",
    "MemoryMetadataTree",
    "MemoryMetadataTreeStatistics",
]

logger = logging.getLogger(__name__)

# Metadata writes are rare (policies, ownership, a load report per broker every few seconds), so
# a watcher 1024 notifications behind is stuck rather than slow; a notification is ~100 bytes.
WATCH_BUFFER_SIZE: Final = 1024

# In-process sessions never time out (see the module docstring); the model wants a timeout.
_NO_TIMEOUT: Final = math.inf


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
        # The model rejects a size below 1 with the ValueError callers expect. Its own pending
        # list is drained after every write, so with the same bound it overflows exactly when
        # a watch's buffer would.
        self._model = MetadataTree(watch_buffer_size=watch_buffer_size)
        self._watch_buffer_size = watch_buffer_size
        self._watches: dict[int, StubWatch] = {}

    def open_session(self) -> MemoryMetadataStore:
        """Open a new session on this tree; close it with ``aclose()`` or ``async with``."""
        return MemoryMetadataStore(self)

    def statistics(self) -> MemoryMetadataTreeStatistics:
        """Return a frozen snapshot of the tree's counters."""
        stats = self._model.statistics()
        return MemoryMetadataTreeStatistics(
            nodes=stats.nodes,
            ephemeral_nodes=stats.ephemeral_nodes,
            sessions=stats.sessions,
            watchers=stats.watchers,
        )

    def end_session(self, session_id: int) -> None:
        """End a session as a timeout would: its ephemeral nodes go, its store is not told.

        In-process sessions never time out by themselves; this stands in for a broker that
        stopped heartbeating. Unknown or ended sessions are ignored.
        """
        self._end_session(session_id)

    # ---- used by MemoryMetadataStore; all synchronous, so every write is atomic -------------

    def _is_live(self, session: int) -> bool:
        return self._model.is_live(session)

    def _new_session(self) -> int:
        return self._model.create_session(0.0, _NO_TIMEOUT)

    def _end_session(self, session: int) -> None:
        self._model.close_session(session)
        self._deliver()

    def _get(self, path: str, session: int) -> VersionedValue | None:
        with translated():
            return versioned_value(self._model.get(path, session))

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
        with translated():
            put_path, version = self._model.put(
                session, path, value, expected_version, ephemeral=ephemeral, sequential=sequential
            )
        self._deliver()
        return PutResult(put_path, version)

    def _delete(self, path: str, expected_version: int | None) -> None:
        with translated():
            self._model.delete(path, expected_version)
        self._deliver()

    def _children(self, path: str) -> list[str]:
        with translated():
            return self._model.children(path)

    def _exists(self, path: str) -> bool:
        with translated():
            return self._model.exists(path)

    def _watch(self, prefix: str) -> StubWatch:
        with translated():
            watch_id = self._model.watch(prefix)
        watch = StubWatch(watch_id, prefix, self._watch_buffer_size, on_close=self._unwatch)
        self._watches[watch_id] = watch
        return watch

    def _unwatch(self, watch: StubWatch) -> None:
        self._watches.pop(watch.watch_id, None)
        self._model.unwatch(watch.watch_id)

    def _deliver(self) -> None:
        # After every successful write (a failed one changes nothing and notifies nobody).
        for drained in self._model.drain():
            watch = self._watches.get(drained.watch_id)
            if watch is None:
                continue
            for note in drained.notifications:
                watch.deliver(note.path, note.kind)  # breaks (and forgets) the watch when full
            if drained.overflowed:
                watch.end(overflowed=True)
                self._unwatch(watch)


class MemoryMetadataStore:
    """One session on a :class:`MemoryMetadataTree`; implements ``MetadataStore``.

    Args:
        tree: The tree to open a session on; ``None`` creates a private tree.
    """

    def __init__(self, tree: MemoryMetadataTree | None = None) -> None:
        self._tree = tree if tree is not None else MemoryMetadataTree()
        self._session = self._tree._new_session()
        self._watches: set[StubWatch] = set()
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
        if not self._tree._is_live(self._session):
            logger.warning("metadata session %s ended; opening a new one", self._session)
            self._session = self._tree._new_session()

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
        watch = self._tree._watch(path_prefix)
        self._watches.add(watch)
        try:
            yield TranslatedWatchStream(watch)
        finally:
            self._watches.discard(watch)
            watch.close()

    async def expire_session(self) -> None:
        """See ``MetadataStore.expire_session``."""
        await self._enter()
        old, self._session = self._session, self._tree._new_session()
        self._tree._end_session(old)

    async def wait_session_lost(self) -> str:
        """See ``MetadataStore.wait_session_lost``: never, the tree is in this process."""
        await anyio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    def abandon(self) -> int:
        """The process holding this session died: nothing more goes through this store.

        Every further operation fails as on a closed store, but the session (its ephemeral
        nodes: locks, ownerships) lives on until ``tree.end_session(id)`` ends it, as a crashed
        broker's session lives until it times out. Returns the session's id.
        """
        self._closed = True
        for watch in list(self._watches):
            watch.finish()
        self._watches.clear()
        return self._session

    async def aclose(self) -> None:
        """See ``MetadataStore.aclose``."""
        if not self._closed:
            self._closed = True
            # End our own watches first: a closing session is told nothing more.
            for watch in list(self._watches):
                watch.finish()
            self._watches.clear()
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
