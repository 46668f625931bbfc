"""The etcd backend against a real etcd: what the conformance suite cannot see.

Session expiry by etcd itself (keep-alives stopped, or kept), the link keys behind ``children``,
endpoint failover, watches that survive an etcd restart, chroots. Lease TTLs are real seconds
on the server, so the expiry tests take one to two seconds each; they wait for a notification
or a counter, never for a fixed time.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import anyio.to_thread
import pytest
from anyio.abc import ObjectReceiveStream

from emubroker.metadata import (
    MetadataStoreError,
    Notification,
    NotificationKind,
    VersionedValue,
)
from emubroker.metadata.etcd import EtcdMetadataStore, open_etcd_metadata_store
from protocol.clock import FakeClock
from tests.support.etcd import EtcdServer, fresh_root, raw_keys, run_etcd

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

CREATED, DELETED = NotificationKind.CREATED, NotificationKind.DELETED
# "Don't hang forever" guards. etcd checks for expired leases every 500 ms, so a 1 s lease
# ends within about 1.5 s of its last keep-alive.
EXPIRY_GUARD = 10.0
RECEIVE_GUARD = 5.0


@pytest.fixture
def url(etcd_server: EtcdServer) -> str:
    return etcd_server.url + fresh_root("etcd")


@pytest.fixture
async def tasks() -> AsyncIterator[anyio.abc.TaskGroup]:
    async with anyio.create_task_group() as tg:
        yield tg
        tg.cancel_scope.cancel()


async def wait_for(condition: Callable[[], bool], guard: float = EXPIRY_GUARD) -> None:
    """Wait until ``condition()`` holds: for work the real etcd server does in its own time."""
    with anyio.fail_after(guard):
        while not condition():  # noqa: ASYNC110 - the change happens in another process
            await anyio.sleep(0.01)


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed: nothing listens there


# ---- sessions end in etcd -------------------------------------------------------------------


@asynccontextmanager
async def hung_owner_and_observer(
    url: str, watched: str
) -> AsyncIterator[tuple[EtcdMetadataStore, FakeClock, ObjectReceiveStream[Notification]]]:
    """An owner whose clock stands still (it sends no keep-alive, like a hung broker) with a
    1 s session, and a watch on ``watched`` by a healthy observer."""
    frozen = FakeClock()
    async with (
        open_etcd_metadata_store(url, clock=frozen, session_timeout=1) as owner,
        open_etcd_metadata_store(url) as observer,
        observer.watch(watched) as events,
    ):
        yield owner, frozen, events


async def test_a_session_whose_keepalives_stop_is_ended_by_etcd(url: str) -> None:
    async with hung_owner_and_observer(url, "/loadbalance") as (owner, frozen, events):
        await owner.put("/loadbalance/leader", b"owner", ephemeral=True)
        with anyio.fail_after(RECEIVE_GUARD):
            assert await events.receive() == Notification("/loadbalance/leader", CREATED)
        with anyio.fail_after(EXPIRY_GUARD):
            assert await events.receive() == Notification("/loadbalance/leader", DELETED)
        assert await owner.children("/loadbalance") == []
        # The owner's keep-alive, once its clock moves, learns that the lease is gone ...
        await frozen.advance(1.0)
        await wait_for(lambda: owner.session_statistics().sessions_lost == 1)
        assert owner.session_id == 0
        # ... and its next ephemeral write opens a new session.
        await owner.put("/loadbalance/leader", b"again", ephemeral=True)
        assert owner.session_statistics().leases_granted == 2
        assert await owner.get("/loadbalance/leader") == VersionedValue(
            b"again", 0, ephemeral=True, created_by_self=True
        )


async def test_an_ephemeral_write_after_etcd_ended_the_session_uses_a_new_one(url: str) -> None:
    async with hung_owner_and_observer(url, "/lock") as (owner, _, events):
        await owner.put("/lock", b"1", ephemeral=True)
        with anyio.fail_after(EXPIRY_GUARD):
            assert [n.kind for n in [await events.receive(), await events.receive()]] == [
                CREATED,
                DELETED,
            ]
        # The keep-alive has not noticed (its clock stands still): the write finds out.
        await owner.put("/lock", b"2", ephemeral=True)
        assert owner.session_statistics().sessions_lost == 1
        assert await owner.get("/lock") == VersionedValue(
            b"2", 0, ephemeral=True, created_by_self=True
        )


async def test_keepalives_keep_a_short_session_alive_past_its_ttl(url: str) -> None:
    async with (
        open_etcd_metadata_store(url, session_timeout=1) as owner,
        open_etcd_metadata_store(url) as observer,
        observer.watch("/") as events,
    ):
        await owner.put("/owned", b"", ephemeral=True)
        # Six keep-alives, one every third of the TTL: two TTLs have passed.
        await wait_for(lambda: owner.session_statistics().keepalives >= 6)
        await observer.put("/marker", b"")
        with anyio.fail_after(RECEIVE_GUARD):
            assert [await events.receive(), await events.receive()] == [
                Notification("/owned", CREATED),
                Notification("/marker", CREATED),
            ]
        assert owner.session_statistics().sessions_lost == 0
        assert await observer.exists("/owned")


# ---- the keys behind children() --------------------------------------------------------------


async def test_links_of_ephemeral_nodes_go_with_their_session(
    etcd_server: EtcdServer, url: str
) -> None:
    root = url.removeprefix(etcd_server.url)
    async with open_etcd_metadata_store(url) as store:
        await store.put("/a/b/c", b"", ephemeral=True)
        keys = await anyio.to_thread.run_sync(raw_keys, etcd_server, root.encode())
        assert len(keys) == 4  # the node and a link per ancestor edge
    assert await anyio.to_thread.run_sync(raw_keys, etcd_server, root.encode()) == []


async def test_delete_drops_the_links_that_no_longer_cover_anything(
    etcd_server: EtcdServer, url: str
) -> None:
    root = url.removeprefix(etcd_server.url).encode()
    async with open_etcd_metadata_store(url) as store:
        await store.put("/a/b/c", b"")
        await store.put("/a/x", b"")
        await store.delete("/a/b/c")
        keys = await anyio.to_thread.run_sync(raw_keys, etcd_server, root)
        # Left: the node /a/x, the link (/, a) and the link (/a, x).
        assert len(keys) == 3
        assert await store.children("/a") == ["x"]


async def test_children_drops_links_left_behind_by_an_ended_session(
    etcd_server: EtcdServer, url: str, tasks: anyio.abc.TaskGroup
) -> None:
    root = url.removeprefix(etcd_server.url).encode()
    async with open_etcd_metadata_store(url) as store:
        other = await EtcdMetadataStore.open(url, task_group=tasks)
        try:
            await store.put("/p/c/persistent", b"")
            await other.put("/p/c/ephemeral", b"", ephemeral=True)
            # The persistent node's links stay: something (the ephemeral) is still below /p/c.
            await store.delete("/p/c/persistent")
        finally:
            await other.aclose()
        stale = await anyio.to_thread.run_sync(raw_keys, etcd_server, root)
        assert len(stale) == 2  # the links (/, p) and (/p, c) of the deleted persistent node
        assert await store.children("/p") == []
        assert await store.children("/") == []
        assert await anyio.to_thread.run_sync(raw_keys, etcd_server, root) == []


async def test_chroots_keep_trees_apart(etcd_server: EtcdServer) -> None:
    first, second = etcd_server.url + fresh_root("a"), etcd_server.url + fresh_root("b")
    async with open_etcd_metadata_store(first) as a, open_etcd_metadata_store(second) as b:
        await a.put("/x", b"a")
        assert await b.get("/x") is None
        assert await b.children("/") == []
        assert await a.children("/") == ["x"]


# ---- endpoints and connections -------------------------------------------------------------


async def test_a_dead_endpoint_is_skipped_for_the_next(
    etcd_server: EtcdServer, tasks: anyio.abc.TaskGroup
) -> None:
    dead = _dead_port()
    url = f"etcd://127.0.0.1:{dead},{etcd_server.host}:{etcd_server.port}{fresh_root('fo')}"
    store = await EtcdMetadataStore.open(url, task_group=tasks)
    try:
        await store.put("/x", b"1")
        assert await store.get("/x") == VersionedValue(b"1", 0)
    finally:
        await store.aclose()


async def test_no_reachable_endpoint_fails_to_open_with_a_clear_error() -> None:
    url = f"etcd://127.0.0.1:{_dead_port()},127.0.0.1:{_dead_port()}"
    with pytest.raises(MetadataStoreError, match="no etcd endpoint answered"):
        async with open_etcd_metadata_store(url):
            pass


async def test_watch_resumes_where_it_was_after_etcd_restarts() -> None:
    with run_etcd() as server:
        async with (
            open_etcd_metadata_store(server.url) as store,
            store.watch("/") as events,
        ):
            await store.put("/before", b"")
            with anyio.fail_after(RECEIVE_GUARD):
                assert await events.receive() == Notification("/before", CREATED)
            await anyio.to_thread.run_sync(server.stop)
            await anyio.to_thread.run_sync(server.start)
            await store.put("/after", b"")
            with anyio.fail_after(EXPIRY_GUARD):
                assert await events.receive() == Notification("/after", CREATED)
            await store.put("/marker", b"")
            with anyio.fail_after(RECEIVE_GUARD):
                assert await events.receive() == Notification("/marker", CREATED)
