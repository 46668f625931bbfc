"""Conformance suite for ``MetadataStore`` backends.

Every test runs against each entry of ``BACKENDS``: memory, the stub's metadata service, and a
real etcd server (integration: see tests/support/etcd.py). A backend is an async context
manager factory, given the test's fixture request, that yields a ``Backend``: something that
opens sessions on one shared tree and can end one from the service's side. To add a backend,
write a factory like ``memory_backend`` and append it to ``BACKENDS``; the tests use only the
``MetadataStore`` protocol.

Tests never sleep. Notifications are awaited with ``receive()`` under a ``fail_after`` guard
(remote backends deliver asynchronously); "nothing else arrived" is checked by making a later
write and asserting that its notification is the next one.
"""

from __future__ import annotations

import re
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Protocol

import anyio
import anyio.abc
import anyio.to_thread
import pytest

from emubroker.metadata import (
    BadVersionError,
    InvalidPathError,
    MemoryMetadataStore,
    MemoryMetadataTree,
    MemoryMetadataTreeStatistics,
    MetadataStore,
    NotFoundError,
    Notification,
    NotificationKind,
    PutResult,
    StoreClosedError,
    VersionedValue,
    WatchOverflowError,
)
from emubroker.metadata.etcd import EtcdMetadataStore
from emubroker.metadata.remote import RemoteMetadataStore
from storage_stub.client import StubClient, open_stub_client
from storage_stub.server import open_stub_server
from tests.support.etcd import EtcdServer, fresh_root, revoke_lease

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from contextlib import AbstractAsyncContextManager

    from anyio.abc import ByteStream, ObjectReceiveStream

pytestmark = pytest.mark.anyio

CREATED, MODIFIED, DELETED = (
    NotificationKind.CREATED,
    NotificationKind.MODIFIED,
    NotificationKind.DELETED,
)

# Small, so the overflow test needs few writes; backends must honour it or skip that test.
WATCH_BUFFER = 8
# A "don't hang forever" guard for awaiting a notification, not a behaviour timeout.
RECEIVE_GUARD = 5.0


class Backend(Protocol):
    """Opens sessions that share one metadata tree."""

    async def open_session(self) -> MetadataStore: ...

    async def end_session(self, store: MetadataStore) -> None:
        """End ``store``'s session from the service's side, as a timeout would when its broker
        stops heartbeating (died, hung, cut off). The store is not told."""


class _MemoryBackend:
    def __init__(self) -> None:
        self.tree = MemoryMetadataTree(watch_buffer_size=WATCH_BUFFER)

    async def open_session(self) -> MetadataStore:
        return self.tree.open_session()

    async def end_session(self, store: MetadataStore) -> None:
        assert isinstance(store, MemoryMetadataStore)
        self.tree.end_session(store.session_id)


@asynccontextmanager
async def memory_backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    yield _MemoryBackend()


class _RemoteBackend:
    """Sessions on the stub's metadata service, alternating between two connections (brokers).

    A third connection ends sessions, as the service's reaper would.
    """

    def __init__(self, clients: list[StubClient], reaper: StubClient) -> None:
        self.clients = clients
        self.reaper = reaper
        self.opened = 0

    async def open_session(self) -> MetadataStore:
        self.opened += 1
        client = self.clients[self.opened % len(self.clients)]
        return await RemoteMetadataStore.open(client, watch_buffer_size=WATCH_BUFFER)

    async def end_session(self, store: MetadataStore) -> None:
        assert isinstance(store, RemoteMetadataStore)
        await self.reaper.session_close(store.session_id)


@asynccontextmanager
async def remote_backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    # In-process stub over memory streams: the same bytes and code paths as over TCP.
    async with open_stub_server() as server:

        async def connect() -> ByteStream:
            return server.connect()

        async with (
            open_stub_client(connect=connect) as a,
            open_stub_client(connect=connect) as b,
            open_stub_client(connect=connect) as reaper,
        ):
            yield _RemoteBackend([a, b], reaper)


class _EtcdBackend:
    """Sessions on a real etcd, each with its own connections, under a chroot of the test's.

    Ending a session revokes its lease from outside, as etcd's expiry would.
    """

    def __init__(self, server: EtcdServer, task_group: anyio.abc.TaskGroup) -> None:
        self.server = server
        self.url = server.url + fresh_root("conformance")
        self.task_group = task_group
        self.stores: list[EtcdMetadataStore] = []

    async def open_session(self) -> MetadataStore:
        store = await EtcdMetadataStore.open(
            self.url, task_group=self.task_group, watch_buffer_size=WATCH_BUFFER
        )
        self.stores.append(store)
        return store

    async def end_session(self, store: MetadataStore) -> None:
        assert isinstance(store, EtcdMetadataStore)
        await anyio.to_thread.run_sync(revoke_lease, self.server, store.session_id)


@asynccontextmanager
async def etcd_backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    server: EtcdServer = request.getfixturevalue("etcd_server")
    async with anyio.create_task_group() as tg:
        backend = _EtcdBackend(server, tg)
        try:
            yield backend
        finally:
            for store in backend.stores:
                await store.aclose()


BACKENDS = [
    pytest.param(memory_backend, id="memory"),
    pytest.param(remote_backend, id="remote"),
    pytest.param(etcd_backend, id="etcd", marks=pytest.mark.integration),
]


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    factory: Callable[[pytest.FixtureRequest], AbstractAsyncContextManager[Backend]]
    factory = request.param
    async with factory(request) as opened:
        yield opened


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[MetadataStore]:
    async with await backend.open_session() as session:
        yield session


@pytest.fixture
async def other(backend: Backend) -> AsyncIterator[MetadataStore]:
    """A second session on the same tree (another broker)."""
    async with await backend.open_session() as session:
        yield session


async def receive(events: ObjectReceiveStream[Notification], n: int = 1) -> list[Notification]:
    with anyio.fail_after(RECEIVE_GUARD):
        return [await events.receive() for _ in range(n)]


def note(path: str, kind: NotificationKind) -> Notification:
    return Notification(path, kind)


# ---- values and versions --------------------------------------------------------------------


async def test_missing_node_reads_as_none(store: MetadataStore) -> None:
    assert await store.get("/a") is None
    assert not await store.exists("/a")


async def test_put_creates_at_version_zero_and_counts_modifications(store: MetadataStore) -> None:
    assert await store.put("/a", b"1") == PutResult("/a", 0)
    assert await store.get("/a") == VersionedValue(b"1", 0)
    assert await store.exists("/a")
    assert await store.put("/a", b"2") == PutResult("/a", 1)
    assert await store.put("/a", b"3") == PutResult("/a", 2)
    assert await store.get("/a") == VersionedValue(b"3", 2)


async def test_writes_are_visible_to_other_sessions(
    store: MetadataStore, other: MetadataStore
) -> None:
    await store.put("/shared", b"v")
    assert await other.get("/shared") == VersionedValue(b"v", 0)


async def test_put_with_minus_one_creates_only_if_absent(store: MetadataStore) -> None:
    assert await store.put("/a", b"1", expected_version=-1) == PutResult("/a", 0)
    with pytest.raises(BadVersionError):
        await store.put("/a", b"2", expected_version=-1)
    assert await store.get("/a") == VersionedValue(b"1", 0)


async def test_put_with_matching_version_succeeds(store: MetadataStore) -> None:
    await store.put("/a", b"1")
    assert await store.put("/a", b"2", expected_version=0) == PutResult("/a", 1)
    assert await store.put("/a", b"3", expected_version=1) == PutResult("/a", 2)


async def test_put_with_stale_version_raises_and_changes_nothing(store: MetadataStore) -> None:
    await store.put("/a", b"1")
    await store.put("/a", b"2")
    with pytest.raises(BadVersionError):
        await store.put("/a", b"lost update", expected_version=0)
    assert await store.get("/a") == VersionedValue(b"2", 1)


async def test_put_with_version_on_missing_node_raises_bad_version(store: MetadataStore) -> None:
    with pytest.raises(BadVersionError):
        await store.put("/a", b"1", expected_version=0)
    assert await store.get("/a") is None


async def test_put_with_version_below_minus_one_is_a_caller_error(store: MetadataStore) -> None:
    with pytest.raises(ValueError, match="expected_version"):
        await store.put("/a", b"1", expected_version=-2)


async def test_delete_missing_node_raises_not_found(store: MetadataStore) -> None:
    with pytest.raises(NotFoundError):
        await store.delete("/a")


async def test_delete_checks_version(store: MetadataStore) -> None:
    await store.put("/a", b"1")
    await store.put("/a", b"2")
    with pytest.raises(BadVersionError):
        await store.delete("/a", expected_version=0)
    assert await store.exists("/a")
    await store.delete("/a", expected_version=1)
    assert not await store.exists("/a")


async def test_recreated_node_starts_again_at_version_zero(store: MetadataStore) -> None:
    await store.put("/a", b"1")
    await store.put("/a", b"2")
    await store.delete("/a")
    assert await store.put("/a", b"3") == PutResult("/a", 0)


# ---- paths and children ---------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["", "a", "a/b", "/a/", "//a", "/a//b", "/a/./b", "/a/../b", "/"])
async def test_invalid_paths_raise(store: MetadataStore, bad: str) -> None:
    with pytest.raises(InvalidPathError):
        await store.put(bad, b"x")
    with pytest.raises(InvalidPathError):
        await store.get(bad)
    with pytest.raises(InvalidPathError):
        await store.delete(bad)
    with pytest.raises(InvalidPathError):
        await store.exists(bad)


@pytest.mark.parametrize("bad", ["", "a", "/a/", "/a//b"])
async def test_invalid_paths_raise_for_children_and_watch(store: MetadataStore, bad: str) -> None:
    with pytest.raises(InvalidPathError):
        await store.children(bad)
    with pytest.raises(InvalidPathError):
        async with store.watch(bad):
            pass


async def test_children_of_implicit_parents_are_sorted_names(store: MetadataStore) -> None:
    for path in ("/admin/policies/public/default", "/admin/policies/acme/b", "/admin/z"):
        await store.put(path, b"{}")
    assert await store.children("/") == ["admin"]
    assert await store.children("/admin") == ["policies", "z"]
    assert await store.children("/admin/policies") == ["acme", "public"]
    assert await store.children("/admin/policies/public") == ["default"]
    assert await store.children("/admin/policies/public/default") == []
    # Implicit parents hold no value.
    assert await store.get("/admin/policies") is None
    assert not await store.exists("/admin")


async def test_children_of_missing_path_is_empty(store: MetadataStore) -> None:
    assert await store.children("/nothing/here") == []


async def test_implicit_parent_vanishes_with_its_last_descendant(store: MetadataStore) -> None:
    await store.put("/a/b/c", b"1")
    await store.put("/a/b/d", b"2")
    await store.delete("/a/b/c")
    assert await store.children("/a") == ["b"]
    await store.delete("/a/b/d")
    assert await store.children("/a") == []
    assert await store.children("/") == []


async def test_node_can_hold_a_value_and_children(store: MetadataStore) -> None:
    await store.put("/a", b"parent")
    await store.put("/a/b", b"child")
    await store.delete("/a")
    assert await store.children("/a") == ["b"]
    assert await store.children("/") == ["a"]
    assert await store.get("/a/b") == VersionedValue(b"child", 0)


async def test_segments_are_not_string_prefixes(store: MetadataStore) -> None:
    await store.put("/a/bc", b"1")
    await store.put("/a/b/c", b"2")
    assert await store.children("/a") == ["b", "bc"]
    assert await store.children("/a/b") == ["c"]


# ---- ephemeral nodes and sessions -----------------------------------------------------------


async def test_ephemeral_node_is_marked_and_owned(
    store: MetadataStore, other: MetadataStore
) -> None:
    await store.put("/lock", b"me", ephemeral=True)
    await store.put("/data", b"d")
    assert await store.get("/lock") == VersionedValue(
        b"me", 0, ephemeral=True, created_by_self=True
    )
    assert await other.get("/lock") == VersionedValue(b"me", 0, ephemeral=True)
    assert await store.get("/data") == VersionedValue(b"d", 0)


async def test_ephemeral_nodes_vanish_when_session_closes(backend: Backend) -> None:
    observer = await backend.open_session()
    owner = await backend.open_session()
    async with observer, observer.watch("/") as events:
        await owner.put("/lock/b", b"x", ephemeral=True)
        await owner.put("/lock/a", b"x", ephemeral=True)
        await owner.put("/persistent", b"p")
        await observer.put("/lock/mine", b"o", ephemeral=True)
        assert [n.kind for n in await receive(events, 4)] == [CREATED] * 4
        await owner.aclose()
        assert await receive(events, 2) == [note("/lock/a", DELETED), note("/lock/b", DELETED)]
        assert await observer.children("/lock") == ["mine"]
        assert await observer.get("/persistent") == VersionedValue(b"p", 0)


async def test_expire_session_drops_ephemerals_and_keeps_the_store_usable(
    store: MetadataStore, other: MetadataStore
) -> None:
    async with store.watch("/lock") as events:
        await store.put("/lock", b"old", ephemeral=True)
        await store.expire_session()
        # The expiring store's own watchers hear about it: that is how a broker learns it lost
        # a lock.
        assert await receive(events, 2) == [note("/lock", CREATED), note("/lock", DELETED)]
    assert await other.get("/lock") is None
    await store.put("/lock", b"new", ephemeral=True)
    assert await store.get("/lock") == VersionedValue(
        b"new", 0, ephemeral=True, created_by_self=True
    )
    # The new ephemeral belongs to the new session, and still dies with it.
    await store.expire_session()
    assert await other.get("/lock") is None


async def test_modifying_someone_elses_ephemeral_keeps_its_owner(backend: Backend) -> None:
    async with await backend.open_session() as keeper:
        owner = await backend.open_session()
        await owner.put("/e", b"1", ephemeral=True)
        assert await keeper.put("/e", b"2") == PutResult("/e", 1)
        assert await keeper.get("/e") == VersionedValue(b"2", 1, ephemeral=True)
        await owner.aclose()
        assert await keeper.get("/e") is None


async def test_deleted_ephemeral_is_not_deleted_again_on_close(backend: Backend) -> None:
    async with await backend.open_session() as keeper, keeper.watch("/") as events:
        owner = await backend.open_session()
        await owner.put("/e", b"1", ephemeral=True)
        await keeper.delete("/e")
        await owner.aclose()
        await keeper.put("/marker", b"")
        assert await receive(events, 3) == [
            note("/e", CREATED),
            note("/e", DELETED),
            note("/marker", CREATED),
        ]


async def test_closed_store_refuses_operations(store: MetadataStore) -> None:
    await store.aclose()
    await store.aclose()  # idempotent
    with pytest.raises(StoreClosedError):
        await store.get("/a")
    with pytest.raises(StoreClosedError):
        await store.put("/a", b"1")
    with pytest.raises(StoreClosedError):
        await store.children("/")
    with pytest.raises(StoreClosedError):
        await store.expire_session()
    with pytest.raises(StoreClosedError):
        async with store.watch("/"):
            pass


# ---- sessions ended by the service (a broker that stopped heartbeating) ---------------------


async def test_session_ended_by_the_service_frees_its_ephemeral_nodes_for_others(
    backend: Backend,
) -> None:
    # Leader election (spec §6.2): the leader's node goes with its session, the watcher of the
    # node hears it, and the next create-if-absent wins.
    async with (
        await backend.open_session() as leader,
        await backend.open_session() as follower,
        follower.watch("/loadbalance/leader") as events,
    ):
        await leader.put("/loadbalance/leader", b"broker-1", expected_version=-1, ephemeral=True)
        await leader.put("/loadbalance/brokers/broker-1", b"{}", ephemeral=True)
        await leader.put("/admin/clusters/c", b"{}")
        assert await receive(events) == [note("/loadbalance/leader", CREATED)]
        with pytest.raises(BadVersionError):
            await follower.put("/loadbalance/leader", b"broker-2", -1, ephemeral=True)
        await backend.end_session(leader)
        assert await receive(events) == [note("/loadbalance/leader", DELETED)]
        assert await follower.get("/loadbalance/leader") is None
        assert await follower.children("/loadbalance/brokers") == []
        assert await follower.children("/loadbalance") == []
        assert await follower.get("/admin/clusters/c") == VersionedValue(b"{}", 0)
        put = await follower.put("/loadbalance/leader", b"broker-2", -1, ephemeral=True)
        assert put == PutResult("/loadbalance/leader", 0)
        assert await receive(events) == [note("/loadbalance/leader", CREATED)]
        assert await leader.get("/loadbalance/leader") == VersionedValue(
            b"broker-2", 0, ephemeral=True
        )


async def test_store_whose_session_the_service_ended_learns_it_and_carries_on(
    backend: Backend,
) -> None:
    async with (
        await backend.open_session() as store,
        await backend.open_session() as other,
        store.watch("/namespace") as mine,
    ):
        await store.put("/namespace/public/default/0x00000000_0xffffffff", b"me", ephemeral=True)
        assert [n.kind for n in await receive(mine)] == [CREATED]
        await backend.end_session(store)
        # Its own watch tells the broker that it lost the bundle.
        assert await receive(mine) == [
            note("/namespace/public/default/0x00000000_0xffffffff", DELETED)
        ]
        # Its next ephemeral write belongs to a new session, which still ends with the store.
        await store.put("/namespace/public/default/0x00000000_0xffffffff", b"again", ephemeral=True)
        assert await store.get("/namespace/public/default/0x00000000_0xffffffff") == (
            VersionedValue(b"again", 0, ephemeral=True, created_by_self=True)
        )
        await store.aclose()
        assert await other.children("/namespace/public/default") == []


# ---- compare-and-set -------------------------------------------------------------------------


async def test_compare_and_set_lets_exactly_one_of_concurrent_writers_win(
    backend: Backend,
) -> None:
    async with await backend.open_session() as first, await backend.open_session() as second:
        await first.put("/loadbalance/bundle-data/x", b"v0")
        read = await second.get("/loadbalance/bundle-data/x")
        assert read is not None
        outcomes: dict[bytes, str] = {}

        async def write(store: MetadataStore, value: bytes) -> None:
            try:
                await store.put("/loadbalance/bundle-data/x", value, read.version)
            except BadVersionError:
                outcomes[value] = "lost"
            else:
                outcomes[value] = "won"

        async with anyio.create_task_group() as tg:
            tg.start_soon(write, first, b"from-first")
            tg.start_soon(write, second, b"from-second")
        assert sorted(outcomes.values()) == ["lost", "won"]
        winner = next(v for v, outcome in outcomes.items() if outcome == "won")
        assert await first.get("/loadbalance/bundle-data/x") == VersionedValue(winner, 1)
        # The loser re-reads and retries on the version it now sees.
        assert await second.put("/loadbalance/bundle-data/x", b"retry", 1) == PutResult(
            "/loadbalance/bundle-data/x", 2
        )


async def test_create_if_absent_has_one_winner_among_many_sessions(backend: Backend) -> None:
    sessions = [await backend.open_session() for _ in range(4)]
    try:
        winners: list[int] = []

        async def claim(index: int) -> None:
            try:
                await sessions[index].put("/lock", b"%d" % index, -1, ephemeral=True)
            except BadVersionError:
                return
            winners.append(index)

        async with anyio.create_task_group() as tg:
            for index in range(len(sessions)):
                tg.start_soon(claim, index)
        assert len(winners) == 1
        owners = [(await s.get("/lock")) for s in sessions]
        assert [o.created_by_self for o in owners if o is not None] == [
            i == winners[0] for i in range(len(sessions))
        ]
    finally:
        for session in sessions:
            await session.aclose()


async def test_compare_and_set_on_an_ephemeral_node_keeps_it_ephemeral(
    store: MetadataStore, other: MetadataStore
) -> None:
    await store.put("/e", b"1", -1, ephemeral=True)
    assert await other.put("/e", b"2", 0) == PutResult("/e", 1)
    with pytest.raises(BadVersionError):
        await other.put("/e", b"3", 0)
    assert await store.get("/e") == VersionedValue(b"2", 1, ephemeral=True, created_by_self=True)
    await store.delete("/e", expected_version=1)
    assert await store.put("/e", b"again", -1) == PutResult("/e", 0)


# ---- sequential nodes -----------------------------------------------------------------------


async def test_sequential_puts_append_an_increasing_ten_digit_counter(
    store: MetadataStore, other: MetadataStore
) -> None:
    paths = [
        (await session.put("/queue/item-", b"x", sequential=True)).path
        for session in (store, other, store)
    ]
    assert all(re.fullmatch(r"/queue/item-\d{10}", p) for p in paths), paths
    assert paths == sorted(paths)
    assert len(set(paths)) == 3
    assert await store.children("/queue") == [p.rpartition("/")[2] for p in paths]
    assert await store.get(paths[0]) == VersionedValue(b"x", 0)


async def test_sequential_ephemeral_nodes_vanish_with_session(backend: Backend) -> None:
    async with await backend.open_session() as keeper:
        owner = await backend.open_session()
        result = await owner.put("/election/n-", b"", ephemeral=True, sequential=True)
        assert result.version == 0
        assert await keeper.exists(result.path)
        await owner.aclose()
        assert await keeper.children("/election") == []


async def test_sequential_put_rejects_an_expected_version(store: MetadataStore) -> None:
    with pytest.raises(ValueError, match="sequential"):
        await store.put("/q/n-", b"", expected_version=0, sequential=True)


# ---- watches --------------------------------------------------------------------------------


async def test_watch_delivers_created_modified_deleted_in_order(
    store: MetadataStore, other: MetadataStore
) -> None:
    async with store.watch("/loadbalance/brokers") as events:
        await other.put("/loadbalance/brokers/b1", b"1")
        await other.put("/loadbalance/brokers/b1", b"2")
        await other.put("/loadbalance/brokers/b2", b"1")
        await other.delete("/loadbalance/brokers/b1")
        assert await receive(events, 4) == [
            note("/loadbalance/brokers/b1", CREATED),
            note("/loadbalance/brokers/b1", MODIFIED),
            note("/loadbalance/brokers/b2", CREATED),
            note("/loadbalance/brokers/b1", DELETED),
        ]


async def test_watch_covers_the_prefix_node_and_whole_segments_only(store: MetadataStore) -> None:
    async with store.watch("/a") as events:
        await store.put("/ab", b"sibling, not below /a")
        await store.put("/b/a", b"elsewhere")
        await store.put("/a", b"the node itself")
        await store.put("/a/b/c", b"deep")
        assert await receive(events, 2) == [note("/a", CREATED), note("/a/b/c", CREATED)]


async def test_root_watch_sees_everything(store: MetadataStore) -> None:
    async with store.watch("/") as events:
        await store.put("/x", b"")
        await store.put("/y/z", b"")
        assert await receive(events, 2) == [note("/x", CREATED), note("/y/z", CREATED)]


async def test_watch_sees_only_writes_after_it_starts(store: MetadataStore) -> None:
    await store.put("/a", b"before")
    async with store.watch("/a") as events:
        await store.put("/a", b"after")
        assert await receive(events) == [note("/a", MODIFIED)]


async def test_every_watcher_gets_every_notification(
    store: MetadataStore, other: MetadataStore
) -> None:
    async with store.watch("/t") as mine, other.watch("/t") as theirs:
        await store.put("/t/1", b"")
        await other.delete("/t/1")
        expected = [note("/t/1", CREATED), note("/t/1", DELETED)]
        assert await receive(mine, 2) == expected
        assert await receive(theirs, 2) == expected


async def test_failed_writes_notify_nothing(store: MetadataStore) -> None:
    async with store.watch("/") as events:
        await store.put("/a", b"1")
        with pytest.raises(BadVersionError):
            await store.put("/a", b"2", expected_version=5)
        with pytest.raises(NotFoundError):
            await store.delete("/missing")
        await store.put("/marker", b"")
        assert await receive(events, 2) == [note("/a", CREATED), note("/marker", CREATED)]


async def test_closing_the_store_ends_its_watches(store: MetadataStore) -> None:
    async with store.watch("/") as events:
        await store.put("/a", b"")
        await store.aclose()
        with anyio.fail_after(RECEIVE_GUARD):
            assert [n async for n in events] == [note("/a", CREATED)]


async def test_slow_watcher_never_blocks_writers_and_learns_it_overflowed(
    store: MetadataStore, other: MetadataStore
) -> None:
    written = [f"/burst/{i:03d}" for i in range(WATCH_BUFFER * 3)]
    async with store.watch("/burst") as events:
        with anyio.fail_after(RECEIVE_GUARD):
            for path in written:
                await other.put(path, b"")  # nobody is receiving: must not block
        got: list[Notification] = []
        with pytest.raises(WatchOverflowError), anyio.fail_after(RECEIVE_GUARD):  # noqa: PT012
            while True:  # drain what was buffered until the overflow is reported
                got.append(await events.receive())
    assert got == [note(path, CREATED) for path in written[: len(got)]]
    assert len(got) < len(written)


async def test_one_write_with_more_notifications_than_a_watch_buffers_overflows_it(
    backend: Backend,
) -> None:
    # Closing a session deletes all its ephemerals at once: more than a watch can hold. Where
    # notifications arrive asynchronously (stub, etcd), a watcher already waiting in receive()
    # takes the first one straight from the writer, so the buffer then holds the next
    # WATCH_BUFFER: two more than that guarantee a loss on every backend.
    async with await backend.open_session() as observer, observer.watch("/locks") as events:
        owner = await backend.open_session()
        locks = [f"/locks/{i:03d}" for i in range(WATCH_BUFFER + 2)]
        for path in locks:
            await owner.put(path, b"", ephemeral=True)
            assert await receive(events) == [note(path, CREATED)]  # the buffer stays empty
        await owner.aclose()
        got: list[Notification] = []
        with pytest.raises(WatchOverflowError), anyio.fail_after(RECEIVE_GUARD):  # noqa: PT012
            while True:  # what was buffered, then the overflow
                got.append(await events.receive())
        assert got == [note(p, DELETED) for p in locks[: len(got)]]
        assert WATCH_BUFFER <= len(got) < len(locks)


async def test_watcher_that_stops_listening_does_not_break_writers(store: MetadataStore) -> None:
    async with store.watch("/a") as events:
        await events.aclose()
        await store.put("/a", b"1")
        await store.put("/a", b"2")
    assert await store.get("/a") == VersionedValue(b"2", 1)


async def test_watch_of_cancelled_reader_is_released(store: MetadataStore) -> None:
    with anyio.CancelScope() as scope:
        async with store.watch("/a") as events:
            scope.cancel()
            await events.receive()
    assert scope.cancelled_caught
    await store.put("/a", b"1")  # the abandoned watch must not get in the way


# ---- memory backend specifics ---------------------------------------------------------------


async def test_memory_store_without_tree_is_private() -> None:
    async with MemoryMetadataStore() as a, MemoryMetadataStore() as b:
        await a.put("/x", b"")
        assert await b.get("/x") is None


async def test_memory_tree_statistics_track_sessions_and_watches() -> None:
    tree = MemoryMetadataTree()
    async with tree.open_session() as a:
        b = tree.open_session()
        await a.put("/p", b"")
        await b.put("/e", b"", ephemeral=True)
        async with a.watch("/"):
            assert tree.statistics() == MemoryMetadataTreeStatistics(
                nodes=2, ephemeral_nodes=1, sessions=2, watchers=1
            )
        await b.aclose()
        assert tree.statistics() == MemoryMetadataTreeStatistics(
            nodes=1, ephemeral_nodes=0, sessions=1, watchers=0
        )


async def test_memory_watch_is_released_as_soon_as_its_stream_is_closed() -> None:
    tree = MemoryMetadataTree()
    async with tree.open_session() as store, store.watch("/") as events:
        assert tree.statistics().watchers == 1
        await events.aclose()
        assert tree.statistics().watchers == 0


def test_memory_tree_rejects_empty_watch_buffer() -> None:
    with pytest.raises(ValueError, match="watch_buffer_size"):
        MemoryMetadataTree(watch_buffer_size=0)
