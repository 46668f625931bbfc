"""Bundle splits over REST: Pulsar's layouts, metadata, ownership, statuses and reasons."""

from __future__ import annotations

import json

import anyio
import pytest

from emubroker.app import Broker
from emubroker.loadbalance.ownership.records import NamespaceEphemeralData
from emubroker.metadata.paths import local_policies_path, ownership_path
from emubroker.naming import BundleRange, NamespaceBundle, NamespaceName, TopicName, name_hash
from protocol import commands as c
from protocol.clock import FakeClock
from tests.emubroker.admin.conftest import Admin, Wire

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

NS = "/admin/v2/namespaces/acme/orders"
NAMESPACE = NamespaceName("acme", "orders")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


async def _namespace(admin: Admin, bundles: int | None = None) -> None:
    await admin.ok("PUT", "/admin/v2/tenants/acme", json={"allowedClusters": ["standalone"]})
    body = None if bundles is None else {"bundles": {"numBundles": bundles}}
    await admin.ok("PUT", NS, json=body)


def _bundle(name: str) -> NamespaceBundle:
    return NamespaceBundle(NAMESPACE, BundleRange.parse(name))


async def _lookup(wire: Wire, topic: str) -> c.LookupTopicResponse:
    """A client's LOOKUP of ``topic``: the broker asked takes an unowned bundle."""
    client = await wire.client()
    await client.send(c.LookupTopic(topic=topic, request_id=0, advertised_listener_name=""))
    reply = await client.receive_command()
    assert isinstance(reply, c.LookupTopicResponse), reply
    return reply


async def test_range_split_writes_pulsars_layout_and_the_owner_takes_the_children(
    admin: Admin, broker: Broker, wire: Wire
) -> None:
    await _namespace(admin)  # defaultNumberOfNamespaceBundles = 4
    assert (await admin.ok("GET", f"{NS}/bundles"))["numBundles"] == 4
    topic = TopicName.parse("persistent://acme/orders/t")
    parent = broker.ownership.bundle_of(topic)
    await _lookup(wire, str(topic))  # the lookup made this broker the owner
    assert broker.ownership.owned_bundles() == [parent]
    status, _ = await admin.call("PUT", f"{NS}/{parent.bundle_range.name}/split")
    assert status == 204
    lower, upper = parent.bundle_range.lower, parent.bundle_range.upper
    middle = lower + (upper - lower) // 2  # range_equally_divide, the default
    expected = sorted({0, 0x40000000, 0x80000000, 0xC0000000, 0xFFFFFFFF, middle})
    layout = {"boundaries": [f"0x{b:08x}" for b in expected], "numBundles": 5}
    assert await admin.ok("GET", f"{NS}/bundles") == layout
    assert (await admin.ok("GET", NS))["bundles"] == layout
    # Local policies as Pulsar's Jackson mapper writes them (null fields left out).
    local = await broker.metadata.get(local_policies_path(NAMESPACE))
    assert local is not None
    assert json.loads(local.value) == {"bundles": layout, "migrated": False}
    children = [
        NamespaceBundle(NAMESPACE, BundleRange(lower, middle)),
        NamespaceBundle(NAMESPACE, BundleRange(middle, upper)),
    ]
    owned = broker.ownership.owned_bundles()
    assert parent not in owned
    assert all(child in owned for child in children)
    assert not await broker.metadata.exists(ownership_path(parent))
    for child in children:
        assert await broker.metadata.exists(ownership_path(child))
    assert broker.ownership.bundle_of(topic) in children  # lookups hash into the new layout


async def test_full_range_splits_at_0x7fffffff(admin: Admin) -> None:
    await _namespace(admin, bundles=1)
    await admin.ok(
        "PUT", f"{NS}/0x00000000_0xffffffff/split?splitAlgorithmName=range_equally_divide"
    )
    bundles = await admin.ok("GET", f"{NS}/bundles")
    assert bundles == {"boundaries": ["0x00000000", "0x7fffffff", "0xffffffff"], "numBundles": 2}
    # And again on a child: the layout keeps growing where it is cut.
    await admin.ok("PUT", f"{NS}/0x7fffffff_0xffffffff/split")
    bundles = await admin.ok("GET", f"{NS}/bundles")
    assert bundles["boundaries"] == ["0x00000000", "0x7fffffff", "0xbfffffff", "0xffffffff"]


async def test_topic_count_split_cuts_between_the_median_topics(admin: Admin, wire: Wire) -> None:
    await _namespace(admin, bundles=1)
    names = [f"persistent://acme/orders/t{i}" for i in range(5)]
    for name in names:
        await wire.produce(name, 1)
    await admin.ok(
        "PUT", f"{NS}/0x00000000_0xffffffff/split?splitAlgorithmName=topic_count_equally_divide"
    )
    hashes = sorted(name_hash(n) for n in names)
    start, end = hashes[1], hashes[2]  # n = 5: h[n/2 - 1] and h[n/2]
    cut = start + (end - start) // 2
    bundles = await admin.ok("GET", f"{NS}/bundles")
    assert bundles["boundaries"] == ["0x00000000", f"0x{cut:08x}", "0xffffffff"]


async def test_topic_count_split_of_a_bundle_with_one_topic_changes_nothing(
    admin: Admin, wire: Wire
) -> None:
    await _namespace(admin, bundles=1)
    await wire.produce("persistent://acme/orders/only", 1)
    status, _ = await admin.call(
        "PUT", f"{NS}/0x00000000_0xffffffff/split?splitAlgorithmName=topic_count_equally_divide"
    )
    assert status == 204  # Pulsar answers success and splits nothing
    assert (await admin.ok("GET", f"{NS}/bundles"))["numBundles"] == 1


async def test_specified_positions_split_in_several_places(admin: Admin, wire: Wire) -> None:
    await _namespace(admin, bundles=1)
    for name in ("a", "b"):
        await wire.produce(f"persistent://acme/orders/{name}", 1)
    path = f"{NS}/0x00000000_0xffffffff/split?splitAlgorithmName=specified_positions_divide"
    # Positions outside the bundle are dropped; the others are sorted.
    await admin.ok("PUT", path, json=[0xC0000000, 0x10000000, 0, 0x1_0000_0000])
    bundles = await admin.ok("GET", f"{NS}/bundles")
    assert bundles == {
        "boundaries": ["0x00000000", "0x10000000", "0xc0000000", "0xffffffff"],
        "numBundles": 3,
    }


async def test_specified_positions_need_two_topics(admin: Admin) -> None:
    await _namespace(admin, bundles=1)
    path = f"{NS}/0x00000000_0xffffffff/split?splitAlgorithmName=specified_positions_divide"
    assert (await admin.call("PUT", path, json=[0x10000000]))[0] == 204
    assert (await admin.ok("GET", f"{NS}/bundles"))["numBundles"] == 1


async def test_split_errors_have_pulsars_status_and_reason(admin: Admin) -> None:
    await _namespace(admin)
    bundle = f"{NS}/0x00000000_0x40000000"
    await admin.fails(
        "PUT",
        f"{bundle}/split?splitAlgorithmName=halves",
        412,
        "Unsupported namespace bundle split algorithm, supported algorithms are "
        "[range_equally_divide, topic_count_equally_divide, specified_positions_divide, "
        "flow_or_qps_equally_divide]",
    )
    await admin.fails(
        "PUT",
        f"{bundle}/split?splitAlgorithmName=specified_positions_divide",
        412,
        "With specified_positions_divide split algorithm, splitBoundaries must not be empty",
    )
    await admin.fails(
        "PUT", "/admin/v2/namespaces/acme/nope/0x00000000_0x40000000/split", 404,
        "Namespace does not exist",
    )  # fmt: skip
    await admin.fails(
        "PUT", f"{NS}/0x00000000_0x10000000/split", 412,
        "Invalid upper boundary for bundle acme/orders/0x00000000_0x10000000. "
        "Expected upper boundary of acme/orders/0x00000000_0x40000000",
    )  # fmt: skip
    await admin.fails(
        "PUT", f"{NS}/0x10000000_0x40000000/split", 412,
        "Cannot find bundle acme/orders/0x10000000_0x40000000 in the bundles list",
    )  # fmt: skip
    await admin.fails("PUT", f"{NS}/everything/split", 412, "Invalid bundle range: everything")
    await admin.fails("PUT", f"{NS}/0x0_0xzz/split", 412, 'For input string: "0xzz"')
    await admin.fails("PUT", f"{NS}/0x40000000_0x0/split", 412, "Invalid range:")
    await admin.fails(
        "PUT", f"{bundle}/split?splitAlgorithmName=flow_or_qps_equally_divide", 500,
        "defaultNamespaceBundleSplitAlgorithm=flow_or_qps_equally_divide",
    )  # fmt: skip
    await admin.fails("PUT", f"{bundle}/split", 400, "splitBoundaries", data=b"[1,")
    assert (await admin.ok("GET", f"{NS}/bundles"))["numBundles"] == 4  # nothing changed


async def test_a_bundle_of_one_hash_value_cannot_be_split(admin: Admin) -> None:
    await admin.ok("PUT", "/admin/v2/tenants/acme", json={"allowedClusters": ["standalone"]})
    layout = {"boundaries": ["0x00000000", "0x00000001", "0xffffffff"], "numBundles": 2}
    await admin.ok("PUT", NS, json={"bundles": layout})
    await admin.fails(
        "PUT", f"{NS}/0x00000000_0x00000001/split", 412,
        "Split bundle failed due to invalid request",
    )  # fmt: skip


async def test_a_bundle_owned_elsewhere_is_redirected_to_its_owner(
    admin: Admin, broker: Broker
) -> None:
    await _namespace(admin)
    other = NamespaceEphemeralData(
        native_url="pulsar://10.0.0.2:6650", http_url="http://10.0.0.2:8080"
    )
    bundle = _bundle("0x40000000_0x80000000")
    await broker.metadata.put(
        ownership_path(bundle), json.dumps(other, default=_camel).encode(), expected_version=-1
    )
    response = await admin.client.put(
        f"{NS}/0x40000000_0x80000000/split?unload=true", allow_redirects=False
    )
    assert response.status == 307
    location = response.headers["Location"]
    # This single broker is the leader, so it sends the request on as authoritative.
    assert location == (
        "http://10.0.0.2:8080/admin/v2/namespaces/acme/orders/0x40000000_0x80000000/split"
        "?unload=true&authoritative=true"
    )
    assert (await admin.ok("GET", f"{NS}/bundles"))["numBundles"] == 4


def _camel(value: NamespaceEphemeralData) -> dict[str, object]:
    return {"nativeUrl": value.native_url, "httpUrl": value.http_url}


async def test_split_with_unload_closes_the_producers_of_the_children(
    admin: Admin, broker: Broker, wire: Wire
) -> None:
    await _namespace(admin, bundles=1)
    topic = "persistent://acme/orders/moving"
    await wire.produce(topic, 3)
    producer = wire.clients[-1]
    await admin.ok("PUT", f"{NS}/0x00000000_0xffffffff/split?unload=true")
    with anyio.fail_after(5):
        closed = await producer.receive_command()
    assert isinstance(closed, c.CloseProducer), closed
    assert broker.ownership.owned_bundles() == []  # children unloaded: the leader places them
    assert broker.topics.loaded_topic(TopicName.parse(topic)) is None
    # A fresh lookup acquires the topic's child bundle again, and nothing was lost.
    reply = await _lookup(wire, topic)
    assert (reply.response, reply.broker_service_url) == (c.LookupType.CONNECT, broker.service_url)
    assert broker.ownership.owned_bundles() == [broker.ownership.bundle_of(TopicName.parse(topic))]
    stats = await admin.ok("GET", "/admin/v2/persistent/acme/orders/moving/internalStats")
    assert stats["numberOfEntries"] == 3


async def test_largest_names_the_bundle_with_most_topics(admin: Admin, wire: Wire) -> None:
    await _namespace(admin, bundles=2)
    names = [f"persistent://acme/orders/t{i}" for i in range(6)]
    for name in names:
        await wire.produce(name, 1)
    low = sum(1 for n in names if name_hash(n) < 0x80000000)
    assert low not in (0, 3, 6)  # these names fall unevenly into both bundles
    lower, upper = (0, 0x80000000) if low > len(names) - low else (0x80000000, 0xFFFFFFFF)
    await admin.ok("PUT", f"{NS}/LARGEST/split")
    boundaries = (await admin.ok("GET", f"{NS}/bundles"))["boundaries"]
    middle = lower + (upper - lower) // 2
    assert boundaries == sorted(["0x00000000", "0x80000000", "0xffffffff", f"0x{middle:08x}"])


async def test_largest_of_a_namespace_without_topics_is_not_found(admin: Admin) -> None:
    await _namespace(admin)
    await admin.fails("PUT", f"{NS}/LARGEST/split", 404, "Bundle range LARGEST not found")


async def test_hot_names_the_bundle_with_the_highest_throughput(
    admin: Admin, wire: Wire, broker: Broker, fake_clock: FakeClock
) -> None:
    await _namespace(admin, bundles=2)
    low = next(
        f"persistent://acme/orders/l{i}"
        for i in range(99)
        if name_hash(f"persistent://acme/orders/l{i}") < 0x80000000
    )
    high = next(
        f"persistent://acme/orders/h{i}"
        for i in range(99)
        if name_hash(f"persistent://acme/orders/h{i}") >= 0x80000000
    )
    await wire.produce(low, 5)
    await wire.produce(high, 1)
    assert broker.admin is not None
    broker.admin.stats.refresh()  # the first sample: rates count from here
    await fake_clock.advance(2.0)
    await wire.produce(high, 10)  # the upper bundle is now the hot one
    await admin.ok("PUT", f"{NS}/HOT/split")
    boundaries = (await admin.ok("GET", f"{NS}/bundles"))["boundaries"]
    assert boundaries == ["0x00000000", "0x80000000", "0xbfffffff", "0xffffffff"]


async def test_hot_without_topics_is_not_found(admin: Admin) -> None:
    await _namespace(admin)
    await admin.fails("PUT", f"{NS}/HOT/split", 404, "Bundle range HOT not found")


async def test_a_deleted_namespace_takes_its_local_policies_along(
    admin: Admin, broker: Broker
) -> None:
    await _namespace(admin, bundles=1)
    await admin.ok("PUT", f"{NS}/0x00000000_0xffffffff/split")
    await admin.ok("DELETE", NS)
    assert not await broker.metadata.exists(local_policies_path(NAMESPACE))
    # Created again, it starts from its new layout, not from the old split's.
    await admin.ok("PUT", NS, json={"bundles": {"numBundles": 2}})
    await admin.ok("PUT", f"{NS}/0x80000000_0xffffffff/split")
    bundles = await admin.ok("GET", f"{NS}/bundles")
    assert bundles["boundaries"] == ["0x00000000", "0x80000000", "0xbfffffff", "0xffffffff"]
