"""``RemoteMetadataStore`` specifics beyond the shared conformance suite: sessions the service
ends by itself, transport failures, and the TCP entry point."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from emubroker.metadata import MetadataStoreError, VersionedValue, WatchOverflowError
from emubroker.metadata.remote import RemoteMetadataStore, open_remote_metadata_store
from storage_stub.server import serve_stub
from tests.storage_stub.conftest import REQUEST_TIMEOUT, client_of, running_stub

if TYPE_CHECKING:
    from protocol.clock import FakeClock

pytestmark = pytest.mark.anyio


async def test_store_carries_on_with_a_new_session_after_the_service_expired_it(
    fake_clock: FakeClock,
) -> None:
    async with running_stub(fake_clock) as board, client_of(board, fake_clock) as client:
        store = await RemoteMetadataStore.open(client, session_timeout=3.0)
        first = store.session_id
        await store.put("/lock", b"mine", ephemeral=True)
        async with store.watch("/lock") as events:
            board.refuse = True  # heartbeats cannot get through ...
            await board.cut()
            await fake_clock.advance(3.5)  # ... so the service expires the session
            board.refuse = False
            await fake_clock.advance(2.0)  # reconnect; the next heartbeat learns it expired
            assert client.connected
            with pytest.raises(WatchOverflowError):  # the connection broke under the watch
                await events.receive()
        assert await store.get("/lock") is None
        assert store.session_id != first
        await store.put("/lock", b"mine again", ephemeral=True)
        assert await store.get("/lock") == VersionedValue(
            b"mine again", 0, ephemeral=True, created_by_self=True
        )
        await store.aclose()


async def test_unanswered_request_is_a_metadata_store_error(fake_clock: FakeClock) -> None:
    async with running_stub(fake_clock) as board, client_of(board, fake_clock) as client:
        store = await RemoteMetadataStore.open(client)
        await client.stall(60.0)
        failures: list[MetadataStoreError] = []

        async def get() -> None:
            try:
                await store.get("/x")
            except MetadataStoreError as exc:
                failures.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(get)
            await anyio.wait_all_tasks_blocked()
            await fake_clock.advance(REQUEST_TIMEOUT)
        assert len(failures) == 1
        assert "metadata service failed" in str(failures[0])
        await client.clear_faults()
        await store.aclose()


@pytest.mark.integration
async def test_open_remote_metadata_store_over_tcp() -> None:
    async with anyio.create_task_group() as tg:
        address = await tg.start(serve_stub, "127.0.0.1", 0)
        async with (
            open_remote_metadata_store(address.url) as broker_1,
            open_remote_metadata_store(address.url) as broker_2,
        ):
            await broker_1.put("/loadbalance/leader", b"broker-1", ephemeral=True)
            assert await broker_2.get("/loadbalance/leader") == VersionedValue(
                b"broker-1", 0, ephemeral=True, created_by_self=False
            )
        async with open_remote_metadata_store(address.url) as observer:
            assert await observer.get("/loadbalance/leader") is None  # broker_1's session ended
        tg.cancel_scope.cancel()


@pytest.mark.integration
async def test_unreachable_metadata_service_is_a_metadata_store_error() -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    await listener.aclose()
    with pytest.raises(MetadataStoreError, match="cannot reach"):
        async with open_remote_metadata_store(f"stub://127.0.0.1:{port}"):
            pass
