"""The metadata service's pure model: a versioned key/value tree with sessions and watches.

ZooKeeper's model as Pulsar's metadata store uses it (spec/pulsar-behaviour.md §6.1), with the
same rules as ``emubroker.metadata.store.MetadataStore`` so that a backend talking to this
service passes the shared conformance suite:

1. Paths are absolute and ``/``-separated; parents are implicit (``/a/b/c`` makes ``b`` a child
   of ``/a``). Only nodes holding a value are read by ``get`` / ``exists``; ``children`` sees
   implicit parents too, which vanish with their last descendant.
2. A node's version is ``0`` at creation and ``+1`` per modification; writes may require a
   version (``-1`` = must not exist).
3. Sequential puts append a 10-digit counter kept per parent, which only grows.
4. Sessions expire ``timeout`` seconds after their last heartbeat. Ending a session (close or
   expiry) deletes its ephemeral nodes. Session ids start at 1 and are never reused; ``0`` means
   "no session" (persistent writes only).
5. Every successful write appends one notification to each matching watcher's pending list, in
   write order. A watcher whose list exceeds ``watch_buffer_size`` is *overflowed*: it gets no
   more notifications and its owner must tell the client that some were lost.
6. A failed operation changes nothing.

Pure: no I/O, no clock. Time enters as the ``now`` argument (STYLE.md §3, layer 1).
"""

from __future__ import annotations

from typing import ClassVar, Final

import msgspec

__all__ = [
    "SEQUENTIAL_DIGITS",
    "BadVersionError",
    "InvalidArgumentError",
    "InvalidPathError",
    "MetadataError",
    "MetadataTree",
    "MetadataTreeStatistics",
    "NodeNotFoundError",
    "NodeStat",
    "Notification",
    "SessionExpiredError",
    "WatchDrain",
    "WatchOverflowError",
]

SEQUENTIAL_DIGITS: Final = 10
NO_SESSION: Final = 0
CREATED, MODIFIED, DELETED = "created", "modified", "deleted"
# Pending notifications one watcher may hold before it is overflowed (rule 5). The server
# drains after every request, so this only fills if a drain is skipped; it bounds memory anyway.
DEFAULT_WATCH_BUFFER: Final = 4096
_BAD_SEGMENTS: Final = frozenset({"", ".", ".."})


class MetadataError(Exception):
    """Base of the metadata model's errors; ``code`` names the error on the wire."""

    code: ClassVar[str] = "MetadataError"


class NodeNotFoundError(MetadataError):
    """The node holds no value."""

    code = "NotFound"


class BadVersionError(MetadataError):
    """A conditional write found another version (or a node that should not exist)."""

    code = "BadVersion"


class InvalidPathError(MetadataError, ValueError):
    """The path is not absolute and normalised, or is the root where a node is needed."""

    code = "InvalidPath"


class InvalidArgumentError(MetadataError, ValueError):
    """An argument other than the path is invalid (a bad expected version, say)."""

    code = "InvalidArgument"


class SessionExpiredError(MetadataError):
    """The session is unknown or has ended."""

    code = "SessionExpired"


class WatchOverflowError(MetadataError):
    """Notifications for a watch were lost (it fell behind, or the connection broke).

    The watcher should re-read what it cares about and watch again.
    """

    code = "WatchOverflow"


class NodeStat(msgspec.Struct, frozen=True):
    """A node as one session reads it."""

    value: bytes
    version: int
    ephemeral: bool
    created_by_self: bool


class Notification(msgspec.Struct, frozen=True):
    """``kind`` (created / modified / deleted) happened to the node at ``path``."""

    path: str
    kind: str


class WatchDrain(msgspec.Struct, frozen=True):
    """What one watcher has pending: its notifications, and whether it overflowed."""

    watch_id: int
    notifications: list[Notification]
    overflowed: bool


class MetadataTreeStatistics(msgspec.Struct, frozen=True):
    nodes: int
    ephemeral_nodes: int
    sessions: int
    watchers: int


def validate_path(path: str, *, allow_root: bool = False) -> str:
    """Return ``path`` if it is absolute and normalised, else raise :class:`InvalidPathError`."""
    if path == "/":
        if allow_root:
            return path
        raise InvalidPathError("the root '/' cannot hold a value")
    # ZooKeeper's PathUtils rejects the same shapes, so a path valid here is valid on ZK/etcd.
    if not path.startswith("/") or any(
        s in _BAD_SEGMENTS or "\x00" in s for s in path[1:].split("/")
    ):
        raise InvalidPathError(
            f"invalid metadata path {path!r}: must be absolute, with no empty, '.' or '..' "
            "segments and no trailing '/'"
        )
    return path


def _parent(path: str) -> str:
    return path.rpartition("/")[0] or "/"


class _Node:
    __slots__ = ("owner", "value", "version")

    def __init__(self, value: bytes, owner: int, version: int = 0) -> None:
        self.value = value
        self.version = version
        self.owner = owner  # session id of an ephemeral node, NO_SESSION for persistent ones


class _Watcher:
    __slots__ = ("overflowed", "pending", "prefix")

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.pending: list[Notification] = []
        self.overflowed = False


class MetadataTree:
    """The whole tree of one metadata service.

    Args:
        watch_buffer_size: Pending notifications per watcher before it overflows (rule 5).
    """

    def __init__(self, *, watch_buffer_size: int = DEFAULT_WATCH_BUFFER) -> None:
        if watch_buffer_size < 1:
            raise ValueError(f"watch_buffer_size must be >= 1, got {watch_buffer_size}")
        self._watch_buffer = watch_buffer_size
        self._nodes: dict[str, _Node] = {}
        self._kids: dict[str, dict[str, int]] = {}  # parent -> name -> nodes at/below it
        self._sequence: dict[str, int] = {}
        self._ephemerals: dict[int, set[str]] = {}  # live session -> its ephemeral paths
        self._deadlines: dict[int, tuple[float, float]] = {}  # session -> (deadline, timeout)
        self._next_session = 1
        self._watchers: dict[int, _Watcher] = {}
        # Watch ids by prefix: a change looks up its path's ancestors (a handful) rather than
        # testing every watcher (a large cluster's brokers hold over a hundred).
        self._by_prefix: dict[str, list[int]] = {}
        self._dirty: dict[int, None] = {}  # watchers with pending notifications, ordered
        self._next_watch = 1

    # ---- sessions (rule 4) --------------------------------------------------------------------

    def create_session(self, now: float, timeout: float) -> int:
        """Open a session that expires ``timeout`` seconds after its last heartbeat."""
        if not timeout > 0:
            raise InvalidArgumentError(f"session timeout must be > 0, got {timeout}")
        session = self._next_session
        self._next_session += 1
        self._ephemerals[session] = set()
        self._deadlines[session] = (now + timeout, timeout)
        return session

    def heartbeat(self, session: int, now: float) -> None:
        """Push a session's expiry to ``now + timeout``.

        Raises:
            SessionExpiredError: The session is unknown or already ended.
        """
        entry = self._deadlines.get(session)
        if entry is None:
            raise SessionExpiredError(f"session {session} has expired or never existed")
        self._deadlines[session] = (now + entry[1], entry[1])

    def close_session(self, session: int) -> bool:
        """End a session, deleting its ephemeral nodes; returns whether it was live."""
        paths = self._ephemerals.pop(session, None)
        self._deadlines.pop(session, None)
        if paths is None:
            return False
        for path in sorted(paths):  # sorted: watchers see a deterministic order of deletions
            self._remove(path)
        return True

    def expire_sessions(self, now: float) -> list[int]:
        """End every session whose deadline is ``<= now``; returns their ids, ascending."""
        expired = sorted(s for s, (deadline, _) in self._deadlines.items() if deadline <= now)
        for session in expired:
            self.close_session(session)
        return expired

    def next_expiry(self) -> float | None:
        """The earliest session deadline, or ``None`` without sessions."""
        return min((d for d, _ in self._deadlines.values()), default=None)

    def session_ids(self) -> list[int]:
        """Ids of the live sessions, ascending."""
        return sorted(self._ephemerals)

    def is_live(self, session: int) -> bool:
        return session in self._ephemerals

    # ---- nodes (rules 1-3) -------------------------------------------------------------------

    def get(self, path: str, session: int = NO_SESSION) -> NodeStat | None:
        """Read a node as ``session`` sees it; ``None`` if it holds no value."""
        node = self._nodes.get(validate_path(path))
        if node is None:
            return None
        ephemeral = node.owner != NO_SESSION
        return NodeStat(node.value, node.version, ephemeral, ephemeral and node.owner == session)

    def put(
        self,
        session: int,
        path: str,
        value: bytes,
        expected_version: int | None = None,
        *,
        ephemeral: bool = False,
        sequential: bool = False,
    ) -> tuple[str, int]:
        """Create or replace a node (see ``MetadataStore.put``).

        Returns:
            The node's path (with the counter for sequential puts) and its new version.

        Raises:
            BadVersionError: ``expected_version`` did not match.
            InvalidPathError: The path is malformed.
            InvalidArgumentError: A bad ``expected_version``, or ``sequential`` with a version.
            SessionExpiredError: ``ephemeral`` with a session that is not live.
        """
        if expected_version is not None and expected_version < -1:
            raise InvalidArgumentError(
                f"expected_version must be None, -1 or >= 0, got {expected_version}"
            )
        if ephemeral and session not in self._ephemerals:
            raise SessionExpiredError(f"session {session} has expired or never existed")
        if sequential:
            if expected_version not in (None, -1):
                raise InvalidArgumentError(
                    "a sequential put always creates: expected_version must be None or -1"
                )
            parent = _parent(validate_path(path + "0" * SEQUENTIAL_DIGITS))
            counter = self._sequence.get(parent, 0)
            resolved = f"{path}{counter:0{SEQUENTIAL_DIGITS}d}"
            if resolved in self._nodes:  # ZooKeeper's sequential create fails if the name is taken
                raise BadVersionError(f"put {resolved!r}: sequential node already exists")
            self._sequence[parent] = counter + 1
            path, expected_version = resolved, -1
        validate_path(path)
        node = self._nodes.get(path)
        if expected_version is not None and (
            (node.version if node is not None else -1) != expected_version
        ):
            raise BadVersionError(
                f"put {path!r}: expected version {expected_version}, "
                f"found {'none' if node is None else node.version}"
            )
        value = bytes(value)
        if node is not None:
            node.value = value
            node.version += 1
            self._notify(path, MODIFIED)
            return path, node.version
        owner = session if ephemeral else NO_SESSION
        self._nodes[path] = _Node(value, owner)
        if ephemeral:
            self._ephemerals[session].add(path)
        self._link(path)
        self._notify(path, CREATED)
        return path, 0

    def delete(self, path: str, expected_version: int | None = None) -> None:
        """Delete a node's value; its children stay.

        Raises:
            NodeNotFoundError: The node holds no value.
            BadVersionError: ``expected_version`` did not match.
            InvalidPathError: The path is malformed.
            InvalidArgumentError: ``expected_version`` is negative.
        """
        if expected_version is not None and expected_version < 0:
            raise InvalidArgumentError(
                f"expected_version must be None or >= 0, got {expected_version}"
            )
        node = self._nodes.get(validate_path(path))
        if node is None:
            raise NodeNotFoundError(f"delete {path!r}: no such node")
        if expected_version is not None and node.version != expected_version:
            raise BadVersionError(
                f"delete {path!r}: expected version {expected_version}, found {node.version}"
            )
        if node.owner != NO_SESSION:
            self._ephemerals[node.owner].discard(path)
        self._remove(path)

    def children(self, path: str) -> list[str]:
        """Sorted names of the node's children, implicit parents included."""
        return sorted(self._kids.get(validate_path(path, allow_root=True), ()))

    def exists(self, path: str) -> bool:
        return validate_path(path) in self._nodes

    # ---- watches (rule 5) --------------------------------------------------------------------

    def watch(self, prefix: str) -> int:
        """Start watching ``prefix`` and everything below it; returns the watch id."""
        validate_path(prefix, allow_root=True)
        watch_id = self._next_watch
        self._next_watch += 1
        self._watchers[watch_id] = _Watcher(prefix)
        self._by_prefix.setdefault(prefix, []).append(watch_id)
        return watch_id

    def unwatch(self, watch_id: int) -> None:
        """Stop a watch and forget what it had pending; unknown ids are ignored."""
        watcher = self._watchers.pop(watch_id, None)
        self._dirty.pop(watch_id, None)
        if watcher is not None:
            self._unindex(watch_id, watcher)

    def _unindex(self, watch_id: int, watcher: _Watcher) -> None:
        ids = self._by_prefix[watcher.prefix]
        ids.remove(watch_id)
        if not ids:
            del self._by_prefix[watcher.prefix]

    def drain(self) -> list[WatchDrain]:
        """Take every pending notification, per watcher; overflowed watchers are removed."""
        drained: list[WatchDrain] = []
        for watch_id in self._dirty:
            watcher = self._watchers[watch_id]
            drained.append(WatchDrain(watch_id, watcher.pending, watcher.overflowed))
            watcher.pending = []
            if watcher.overflowed:
                del self._watchers[watch_id]
                self._unindex(watch_id, watcher)
        self._dirty.clear()
        return drained

    # ---- snapshots, for journal compaction ---------------------------------------------------

    def dump(self) -> tuple[int, list[int], dict[str, int], list[tuple[str, bytes, int, int]]]:
        """Return ``(next_session, sessions, sequence counters, nodes)`` for :meth:`load`."""
        nodes = [(p, n.value, n.version, n.owner) for p, n in sorted(self._nodes.items())]
        return self._next_session, self.session_ids(), dict(self._sequence), nodes

    def load_header(self, next_session: int, sessions: list[int], sequence: dict[str, int]) -> None:
        """Start restoring a dump into this (empty) tree; sessions get no deadline."""
        self._next_session = next_session
        self._sequence = dict(sequence)
        self._ephemerals = {s: set() for s in sessions}

    def load_node(self, path: str, value: bytes, version: int, owner: int) -> None:
        """Restore one node of a dump."""
        self._nodes[path] = _Node(value, owner, version)
        if owner != NO_SESSION:
            self._ephemerals.setdefault(owner, set()).add(path)
        self._link(path)

    def statistics(self) -> MetadataTreeStatistics:
        return MetadataTreeStatistics(
            nodes=len(self._nodes),
            ephemeral_nodes=sum(len(p) for p in self._ephemerals.values()),
            sessions=len(self._ephemerals),
            watchers=len(self._watchers),
        )

    # ---- internals ---------------------------------------------------------------------------

    def _remove(self, path: str) -> None:
        del self._nodes[path]
        self._unlink(path)
        self._notify(path, DELETED)

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

    def _notify(self, path: str, kind: str) -> None:
        if not self._watchers:
            return
        # The watchers of the path and of each of its ancestors, in the order they were
        # created (ids ascend), as a walk through every watcher would meet them.
        matched: list[int] = []
        prefix = path
        while True:
            ids = self._by_prefix.get(prefix)
            if ids is not None:
                matched += ids
            if prefix == "/":
                break
            prefix = _parent(prefix)
        if len(matched) > 1:
            matched.sort()
        notification = Notification(path, kind)
        for watch_id in matched:
            w = self._watchers[watch_id]
            if w.overflowed:
                continue
            if len(w.pending) >= self._watch_buffer:
                w.overflowed = True
            else:
                w.pending.append(notification)
            self._dirty[watch_id] = None
