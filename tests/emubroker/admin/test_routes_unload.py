"""Ownership over REST across brokers: topic calls redirected to the owner, HTTP lookups
redirected to the leader, and the bundle unload endpoint with its errors (spec §3.1, §6.3)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from emubroker.admin import build_admin_app
from emubroker.naming import TopicName
from protocol import commands as c
from protocol.clock import FakeClock
from tests.emubroker.admin.conftest import Admin
from tests.support.inprocess_cluster import InProcessCluster, inprocess_cluster, placed_by_leader

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOPIC = "persistent://public/default/rest"
TOPIC_PATH = "/admin/v2/persistent/public/default/rest"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


@asynccontextmanager
async def cluster_with_admins(
    clock: FakeClock, **options: Any
) -> AsyncIterator[tuple[InProcessCluster, list[Admin]]]:
    """An in-process cluster (``options`` as ``inprocess_cluster`` takes them) and an admin
    REST client of each broker."""
    async with inprocess_cluster(clock, **options) as cluster, AsyncExitStack() as stack:
        admins = []
        for node in cluster.nodes:
            assert node.broker.admin is not None
            app = build_admin_app(node.broker.admin)
            admins.append(Admin(await stack.enter_async_context(TestClient(TestServer(app)))))
        yield cluster, admins


async def put_no_redirect(admin: Admin, path: str) -> tuple[int, str]:
    response = await admin.client.put(path, allow_redirects=False)
    return response.status, response.headers.get("Location", "")


async def test_a_topic_call_on_another_broker_is_redirected_to_the_owner(
    fake_clock: FakeClock,
) -> None:
    async with cluster_with_admins(fake_clock) as (cluster, admins):
        owner, _ = await cluster.lookup(TOPIC, start=0)
        producer = await owner.client()
        await producer.send(c.Producer(topic=TOPIC, producer_id=1, request_id=1))
        assert isinstance(await producer.receive_command(), c.ProducerSuccess)
        index = cluster.nodes.index(owner)
        other = (index + 1) % 3
        response = await admins[other].client.get(f"{TOPIC_PATH}/stats", allow_redirects=False)
        assert response.status == 307
        # Replaced by whether the redirecting broker leads (broker 0 does).
        assert response.headers["Location"] == (
            f"http://{owner.broker_id}{TOPIC_PATH}/stats?authoritative={str(other == 0).lower()}"
        )
        stats = await admins[index].ok("GET", f"{TOPIC_PATH}/stats")
        assert len(stats["publishers"]) == 1


async def test_an_http_lookup_of_an_unowned_bundle_goes_to_the_leader(
    fake_clock: FakeClock,
) -> None:
    async with cluster_with_admins(fake_clock) as (cluster, admins):
        path = "/lookup/v2/topic/persistent/public/default/rest"
        response = await admins[2].client.get(path, allow_redirects=False)
        assert response.status == 307
        leader = cluster.nodes[0].broker_id
        assert response.headers["Location"] == f"http://{leader}{path}?authoritative=false"
        # The leader places it (idle brokers tie under LeastLongTermMessageRate: a seeded draw)
        # and sends the client to its choice, or answers itself if it chose itself.
        placed = await admins[0].client.get(path, allow_redirects=False)
        chosen = placed_by_leader(cluster)
        if chosen == leader:
            assert placed.status == 200
            assert (await placed.json())["brokerUrl"] == cluster.nodes[0].broker.service_url
        else:
            assert placed.status == 307
            assert placed.headers["Location"] == f"http://{chosen}{path}?authoritative=true"


async def test_unloading_a_bundle_over_rest(fake_clock: FakeClock) -> None:
    async with cluster_with_admins(fake_clock) as (cluster, admins):
        owner, _ = await cluster.lookup(TOPIC, start=0)
        index = cluster.nodes.index(owner)
        bundle = owner.broker.ownership.bundle_of(TopicName.parse(TOPIC))
        path = f"/admin/v2/namespaces/public/default/{bundle.bundle_range}/unload"
        other = (index + 1) % 3
        status, location = await put_no_redirect(admins[other], path)
        assert status == 307
        assert location.startswith(f"http://{owner.broker_id}{path}?authoritative=")
        await admins[index].ok("PUT", path)
        assert not owner.broker.ownership.is_owned(bundle)
        # Not owned by anyone: nothing to do.
        await admins[other].ok("PUT", path)


async def test_bad_bundles_and_brokers_get_pulsars_errors(fake_clock: FakeClock) -> None:
    async with cluster_with_admins(fake_clock) as (_, admins):
        base = "/admin/v2/namespaces/public/default"
        await admins[0].fails(
            "PUT",
            f"{base}/0x00000000_0x20000000/unload",
            412,
            "Cannot find bundle public/default/0x00000000_0x20000000 in the bundles list",
        )
        await admins[0].fails(
            "PUT", f"{base}/nonsense/unload", 412, "Invalid bundle range: nonsense"
        )
        await admins[0].fails(
            "PUT",
            "/admin/v2/namespaces/public/nope/0x00000000_0x40000000/unload",
            404,
            "Namespace does not exist",
        )
        await admins[0].fails(
            "PUT",
            f"{base}/0x00000000_0x40000000/unload?destinationBroker=127.0.0.1:9999",
            500,
            "Not allowed unload namespace bundle to inactive destination broker",
        )


async def test_a_destination_broker_is_the_leaders_one_shot_choice(fake_clock: FakeClock) -> None:
    async with cluster_with_admins(fake_clock) as (cluster, admins):
        owner, _ = await cluster.lookup(TOPIC, start=0)
        bundle = owner.broker.ownership.bundle_of(TopicName.parse(TOPIC))
        target = next(n for n in cluster.nodes if n is not owner)
        path = (
            f"/admin/v2/namespaces/public/default/{bundle.bundle_range}/unload"
            f"?destinationBroker={target.broker_id}"
        )
        # A follower sends the call to the leader first.
        status, location = await put_no_redirect(admins[1], path)
        assert (status, location) == (
            307,
            f"http://{cluster.nodes[0].broker_id}{path}&authoritative=false",
        )
        index = cluster.nodes.index(owner)
        if index != 0:
            status, location = await put_no_redirect(admins[0], path)
            assert status == 307
            assert location.startswith(f"http://{owner.broker_id}")
            assert location.endswith("authoritative=true")
            await admins[index].ok("PUT", location.split(owner.broker_id, 1)[1])
        else:
            await admins[0].ok("PUT", path)
        assert not owner.broker.ownership.is_owned(bundle)
        placed, _ = await cluster.lookup(TOPIC, start=2)
        assert placed is target


async def test_owned_namespaces_say_which_bundle_is_being_unloaded(fake_clock: FakeClock) -> None:
    async with cluster_with_admins(fake_clock) as (cluster, admins):
        owner, _ = await cluster.lookup(TOPIC, start=0)
        index = cluster.nodes.index(owner)
        bundle = owner.broker.ownership.bundle_of(TopicName.parse(TOPIC))
        path = f"/admin/v2/brokers/standalone/{owner.broker_id}/ownedNamespaces"
        assert (await admins[index].ok("GET", path))[str(bundle)]["is_active"] is True
        owner.broker.ownership.disable(bundle)
        assert (await admins[index].ok("GET", path))[str(bundle)]["is_active"] is False


async def test_a_topics_partitions_are_answered_where_its_existence_is_known(
    fake_clock: FakeClock,
) -> None:
    # A persistent topic is in the shared store, so any broker answers; a non-persistent one
    # exists only where it is loaded, so its call goes to the owner (NonPersistentTopics).
    np_topic = "non-persistent://public/default/rest-np"
    np_path = "/admin/v2/non-persistent/public/default/rest-np/partitions"
    async with cluster_with_admins(fake_clock) as (cluster, admins):
        for topic in (TOPIC, np_topic):
            owner, _ = await cluster.lookup(topic, start=0)
            producer = await owner.client()
            await producer.send(c.Producer(topic=topic, producer_id=1, request_id=1))
            assert isinstance(await producer.receive_command(), c.ProducerSuccess)
        owner, _ = await cluster.lookup(np_topic, start=0)
        index = cluster.nodes.index(owner)
        other = admins[(index + 1) % 3]
        none = {"partitions": 0, "deleted": False}
        for admin in admins:
            assert await admin.ok("GET", f"{TOPIC_PATH}/partitions") == none
            await admin.fails("GET", f"{TOPIC_PATH}-missing/partitions", 404, "not found")
        response = await other.client.get(np_path, allow_redirects=False)
        assert response.status == 307
        assert response.headers["Location"].startswith(f"http://{owner.broker_id}{np_path}?")
        assert await admins[index].ok("GET", np_path) == none
