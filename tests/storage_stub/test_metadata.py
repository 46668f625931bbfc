"""Tests for ``storage_stub.metadata``: the pure tree's sessions, expiry and watch lists.

Node semantics (versions, children, sequential names) are also covered end to end by the
metadata conformance suite through the stub's service (``tests/emubroker/metadata``).
"""

from __future__ import annotations

import pytest

from storage_stub.metadata import (
    BadVersionError,
    InvalidArgumentError,
    InvalidPathError,
    MetadataTree,
    NodeNotFoundError,
    NodeStat,
    Notification,
    SessionExpiredError,
    WatchDrain,
)


@pytest.fixture
def tree() -> MetadataTree:
    return MetadataTree()


def notes(*pairs: tuple[str, str]) -> list[Notification]:
    return [Notification(path, kind) for path, kind in pairs]


# ---- sessions and expiry (time comes in as `now`) -------------------------------------------


def test_session_expires_timeout_after_its_last_heartbeat(tree: MetadataTree) -> None:
    session = tree.create_session(now=0.0, timeout=10.0)
    tree.put(session, "/lock", b"me", ephemeral=True)
    assert tree.next_expiry() == 10.0
    tree.heartbeat(session, now=8.0)
    assert tree.next_expiry() == 18.0
    assert tree.expire_sessions(now=17.9) == []
    assert tree.exists("/lock")
    assert tree.expire_sessions(now=18.0) == [session]
    assert not tree.exists("/lock")
    assert tree.session_ids() == []
    assert tree.next_expiry() is None


def test_expiry_ends_only_the_late_sessions(tree: MetadataTree) -> None:
    early = tree.create_session(0.0, 5.0)
    late = tree.create_session(0.0, 50.0)
    tree.put(early, "/a", b"", ephemeral=True)
    tree.put(late, "/b", b"", ephemeral=True)
    tree.put(0, "/persistent", b"")
    assert tree.expire_sessions(6.0) == [early]
    assert tree.children("/") == ["b", "persistent"]
    assert tree.next_expiry() == 50.0


def test_heartbeat_of_an_ended_session_fails(tree: MetadataTree) -> None:
    session = tree.create_session(0.0, 1.0)
    tree.expire_sessions(1.0)
    with pytest.raises(SessionExpiredError, match=f"session {session}"):
        tree.heartbeat(session, 1.5)
    with pytest.raises(SessionExpiredError):
        tree.put(session, "/e", b"", ephemeral=True)
    assert not tree.exists("/e")


def test_session_ids_are_never_reused(tree: MetadataTree) -> None:
    first = tree.create_session(0.0, 1.0)
    assert tree.close_session(first)
    assert not tree.close_session(first)  # idempotent
    assert tree.create_session(0.0, 1.0) == first + 1


def test_session_timeout_must_be_positive(tree: MetadataTree) -> None:
    with pytest.raises(InvalidArgumentError, match="timeout"):
        tree.create_session(0.0, 0.0)


def test_created_by_self_depends_on_the_reading_session(tree: MetadataTree) -> None:
    owner = tree.create_session(0.0, 10.0)
    other = tree.create_session(0.0, 10.0)
    tree.put(owner, "/e", b"v", ephemeral=True)
    assert tree.get("/e", owner) == NodeStat(b"v", 0, ephemeral=True, created_by_self=True)
    assert tree.get("/e", other) == NodeStat(b"v", 0, ephemeral=True, created_by_self=False)
    assert tree.get("/e") == NodeStat(b"v", 0, ephemeral=True, created_by_self=False)


# ---- watches: pending lists per watcher -----------------------------------------------------


def test_watchers_collect_notifications_in_write_order(tree: MetadataTree) -> None:
    a = tree.watch("/a")
    root = tree.watch("/")
    tree.put(0, "/a/x", b"1")
    tree.put(0, "/b", b"1")
    tree.put(0, "/a/x", b"2")
    tree.delete("/a/x")
    assert tree.drain() == [
        WatchDrain(a, notes(("/a/x", "created"), ("/a/x", "modified"), ("/a/x", "deleted")), False),
        WatchDrain(
            root,
            notes(
                ("/a/x", "created"), ("/b", "created"), ("/a/x", "modified"), ("/a/x", "deleted")
            ),
            False,
        ),
    ]
    assert tree.drain() == []


def test_a_change_reaches_the_watchers_of_its_ancestors_in_the_order_they_were_made(
    tree: MetadataTree,
) -> None:
    sibling = tree.watch("/ab")  # a prefix of the name, not an ancestor
    deep = tree.watch("/a/x")
    root = tree.watch("/")
    parent = tree.watch("/a")
    also_deep = tree.watch("/a/x")
    tree.put(0, "/a/x/y", b"1")
    change = notes(("/a/x/y", "created"))
    assert tree.drain() == [
        WatchDrain(deep, change, False),
        WatchDrain(root, change, False),
        WatchDrain(parent, change, False),
        WatchDrain(also_deep, change, False),
    ]
    tree.unwatch(deep)
    tree.put(0, "/a/x", b"2")  # the watched node itself
    tree.put(0, "/ab", b"3")
    assert [(d.watch_id, [n.path for n in d.notifications]) for d in tree.drain()] == [
        (root, ["/a/x", "/ab"]),
        (parent, ["/a/x"]),
        (also_deep, ["/a/x"]),
        (sibling, ["/ab"]),
    ]


def test_session_end_notifies_deletions_in_path_order(tree: MetadataTree) -> None:
    session = tree.create_session(0.0, 1.0)
    tree.put(session, "/l/b", b"", ephemeral=True)
    tree.put(session, "/l/a", b"", ephemeral=True)
    watch = tree.watch("/l")
    tree.expire_sessions(2.0)
    assert tree.drain() == [
        WatchDrain(watch, notes(("/l/a", "deleted"), ("/l/b", "deleted")), False)
    ]


def test_watcher_that_overflows_is_reported_and_removed() -> None:
    tree = MetadataTree(watch_buffer_size=2)
    watch = tree.watch("/")
    for name in ("a", "b", "c", "d"):
        tree.put(0, f"/{name}", b"")
    assert tree.drain() == [
        WatchDrain(watch, notes(("/a", "created"), ("/b", "created")), overflowed=True)
    ]
    tree.put(0, "/e", b"")
    assert tree.drain() == []
    assert tree.statistics().watchers == 0


def test_unwatch_forgets_pending_notifications(tree: MetadataTree) -> None:
    watch = tree.watch("/")
    tree.put(0, "/a", b"")
    tree.unwatch(watch)
    tree.unwatch(watch)  # idempotent
    assert tree.drain() == []


def test_failed_writes_change_and_notify_nothing(tree: MetadataTree) -> None:
    tree.put(0, "/a", b"1")
    watch = tree.watch("/")
    with pytest.raises(BadVersionError):
        tree.put(0, "/a", b"2", expected_version=3)
    with pytest.raises(NodeNotFoundError):
        tree.delete("/missing")
    with pytest.raises(InvalidPathError):
        tree.put(0, "/bad/", b"")
    with pytest.raises(InvalidArgumentError, match="sequential"):
        tree.put(0, "/q/n-", b"", expected_version=0, sequential=True)
    assert tree.get("/a") == NodeStat(b"1", 0, False, False)
    assert tree.drain() == []
    assert tree.put(0, "/q/n-", b"", sequential=True) == ("/q/n-0000000000", 0)
    assert watch > 0


# ---- dump and load (journal compaction) -----------------------------------------------------


def test_dump_and_load_rebuild_the_same_tree(tree: MetadataTree) -> None:
    session = tree.create_session(0.0, 10.0)
    tree.put(0, "/a/b", b"1")
    tree.put(0, "/a/b", b"2")
    tree.put(session, "/e", b"", ephemeral=True)
    tree.put(0, "/q/n-", b"", sequential=True)
    next_session, sessions, sequence, nodes = tree.dump()

    copy = MetadataTree()
    copy.load_header(next_session, sessions, sequence)
    for node in nodes:
        copy.load_node(*node)
    assert copy.dump() == tree.dump()
    assert copy.children("/a") == ["b"]
    assert copy.get("/a/b") == NodeStat(b"2", 1, False, False)
    assert copy.close_session(session)  # its ephemeral node goes with it
    assert not copy.exists("/e")
    assert copy.put(0, "/q/n-", b"", sequential=True)[0] == "/q/n-0000000001"
