"""The metadata store interface every backend implements (memory, stub service, etcd).

The model is ZooKeeper's as Pulsar's ``MetadataStoreExtended`` exposes it
(spec/pulsar-behaviour.md §6.1):

- Paths are absolute and ``/``-separated (``/admin/policies/public/default``). Parents are
  implicit: writing ``/a/b/c`` makes ``b`` a child of ``/a`` without creating a value at ``/a/b``.
  ``get`` and ``exists`` see only nodes that hold a value; ``children`` sees implicit parents too.
- Every node has a version: ``0`` when created, ``+1`` on every modification. Writes may be
  conditional on the version (``expected_version``); ``-1`` means "must not exist yet".
- A store instance is one *session*. Ephemeral nodes belong to the session that created them
  and are deleted, with notifications, when it ends (``aclose``) or expires (``expire_session``,
  or the service ending it because its heartbeats stopped); they are how brokers hold locks
  (bundle ownership, leadership). A store whose session the service ended carries on with a
  new session on its next operation; its own watchers saw its nodes deleted.
- ``watch(prefix)`` streams notifications for the prefix and everything below it, in the order
  the writes happened.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, NamedTuple, Protocol, Self

import msgspec

from storage_stub import client as model

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType

    from anyio.abc import ObjectReceiveStream

__all__ = [
    "SEQUENTIAL_DIGITS",
    "BadVersionError",
    "InvalidPathError",
    "MetadataStore",
    "MetadataStoreError",
    "NotFoundError",
    "Notification",
    "NotificationKind",
    "PutResult",
    "StoreClosedError",
    "VersionedValue",
    "WatchOverflowError",
    "validate_path",
]

# Sequential nodes get ZooKeeper's 10-digit zero-padded counter: "/x/item-" -> "/x/item-0000000007".
# The tree's rules (this one, paths) are the metadata model's, which both backends run on.
SEQUENTIAL_DIGITS = model.SEQUENTIAL_DIGITS


class MetadataStoreError(Exception):
    """Base class of every error a metadata store raises."""


class NotFoundError(MetadataStoreError):
    """The node does not exist."""


class BadVersionError(MetadataStoreError):
    """A conditional write found a different version (or a node that should not exist)."""


class InvalidPathError(MetadataStoreError, ValueError):
    """The path is not absolute, has empty segments, or names the root where a node is needed."""


class StoreClosedError(MetadataStoreError):
    """The store (this session) was closed with ``aclose()`` and can no longer be used."""


class WatchOverflowError(MetadataStoreError):
    """A watcher fell so far behind that notifications were lost; the watch is broken.

    The watcher should re-read the state it cares about and open a new watch.
    """


class NotificationKind(enum.StrEnum):
    """What happened to the node a notification names."""

    CREATED = "created"
    MODIFIED = "modified"
    DELETED = "deleted"


class Notification(msgspec.Struct, frozen=True):
    """One change to one node.

    Attributes:
        path: The node's full path.
        kind: Created, modified or deleted.
    """

    path: str
    kind: NotificationKind


class VersionedValue(msgspec.Struct, frozen=True):
    """A node's value with its version and ownership.

    Attributes:
        value: The stored bytes.
        version: ``0`` at creation, ``+1`` per modification.
        ephemeral: Whether the node dies with its session.
        created_by_self: Whether an ephemeral node belongs to the reading store's own current
            session (Pulsar's ``Stat.createdBySelf``, used by leader election, §6.2).
    """

    value: bytes
    version: int
    ephemeral: bool = False
    created_by_self: bool = False


class PutResult(NamedTuple):
    """Where a ``put`` landed and the node's new version.

    Attributes:
        path: The node's path; for sequential puts, with the counter appended.
        version: The node's version after the write.
    """

    path: str
    version: int


def validate_path(path: str, *, allow_root: bool = False) -> str:
    """Check that ``path`` is an absolute, normalised metadata path.

    Args:
        path: The path to check.
        allow_root: Whether ``/`` itself is acceptable (reads of children, watches).

    Returns:
        ``path`` unchanged.

    Raises:
        InvalidPathError: The path is relative, has empty segments or a trailing ``/``, or is
            the root while ``allow_root`` is false.
    """
    try:
        return model.validate_path(path, allow_root=allow_root)
    except model.InvalidPathError as exc:
        raise InvalidPathError(str(exc)) from exc


class MetadataStore(Protocol):
    """One session on a metadata store; an async context manager that closes the session."""

    async def get(self, path: str) -> VersionedValue | None:
        """Read a node.

        Returns:
            The node's value and version, or ``None`` if it holds no value.

        Raises:
            InvalidPathError: The path is malformed.
            StoreClosedError: The store was closed.
        """
        ...

    async def put(
        self,
        path: str,
        value: bytes,
        expected_version: int | None = None,
        *,
        ephemeral: bool = False,
        sequential: bool = False,
    ) -> PutResult:
        """Create or replace a node.

        Args:
            path: The node's path; with ``sequential``, the prefix to which a
                :data:`SEQUENTIAL_DIGITS`-digit counter is appended.
            value: The new value.
            expected_version: ``None`` writes unconditionally; ``-1`` requires that the node
                does not exist; ``n >= 0`` requires that it exists at version ``n``.
            ephemeral: Create the node owned by this session. Only applies when the put creates
                the node; an existing node keeps its ownership.
            sequential: Create a new node at ``path`` plus the parent's next counter value,
                which increases with every sequential create under that parent.

        Returns:
            The node's path and its new version.

        Raises:
            BadVersionError: ``expected_version`` did not match.
            InvalidPathError: The path is malformed.
            StoreClosedError: The store was closed.
            ValueError: ``expected_version`` is below ``-1``, or ``sequential`` was combined
                with an ``expected_version`` other than ``None`` / ``-1``.
        """
        ...

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        """Delete a node's value (its children, if any, stay).

        Args:
            path: The node to delete.
            expected_version: If not ``None``, the version the node must have.

        Raises:
            NotFoundError: The node holds no value.
            BadVersionError: ``expected_version`` did not match.
            InvalidPathError: The path is malformed.
            StoreClosedError: The store was closed.
            ValueError: ``expected_version`` is negative.
        """
        ...

    async def children(self, path: str) -> list[str]:
        """List the names (not paths) of a node's children, sorted; ``[]`` if there are none.

        Raises:
            InvalidPathError: The path is malformed.
            StoreClosedError: The store was closed.
        """
        ...

    async def exists(self, path: str) -> bool:
        """Whether the node holds a value.

        Raises:
            InvalidPathError: The path is malformed.
            StoreClosedError: The store was closed.
        """
        ...

    def watch(
        self, path_prefix: str
    ) -> AbstractAsyncContextManager[ObjectReceiveStream[Notification]]:
        """Watch ``path_prefix`` and every node below it (by whole segments).

        Notifications for writes made after the ``async with`` is entered arrive in order. A
        watcher that falls too far behind gets :class:`WatchOverflowError` after the
        notifications that were buffered; the stream ends when the store is closed.

        Raises:
            InvalidPathError: The prefix is malformed (``/`` watches everything).
            StoreClosedError: The store was closed (raised on entering).
        """
        ...

    async def expire_session(self) -> None:
        """End the current session as if it had timed out, and carry on with a new one.

        The session's ephemeral nodes are deleted with notifications, which this store's own
        watchers also receive, so a broker watching its locks learns it lost them. For fault
        injection in tests.

        Raises:
            StoreClosedError: The store was closed.
        """
        ...

    async def wait_session_lost(self) -> str:
        """Wait until the session is lost for good; returns why.

        Lost means the store stayed unreachable for the session's whole timeout, so nothing
        can prove the session (its locks, its leadership) still lives: ZooKeeper's
        ``SessionLost``, on which a Pulsar broker shuts down (``zookeeperSessionExpiredPolicy``,
        ``shutdown`` by default). A session the store expired while it was reachable is not
        lost this way: the store carries on with a new one (see :meth:`expire_session`).
        Stores that cannot lose theirs (in memory) never return.
        """
        ...

    async def aclose(self) -> None:
        """End the session: delete its ephemeral nodes and end its watches. Idempotent."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
