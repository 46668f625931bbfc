"""Topics and subscriptions over REST, acting on topics that clients use over the wire."""

from __future__ import annotations

import pytest

from emubroker.admin.stats_fields import format_time
from emubroker.app import Broker
from emubroker.naming import TopicName
from protocol import commands as c
from protocol.clock import FakeClock
from tests.emubroker.admin.conftest import Admin, Wire

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

NS = "/admin/v2/persistent/public/default"
T = f"{NS}/t"
TOPIC = "persistent://public/default/t"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


# ---- lifecycle ------------------------------------------------------------------------------


async def test_non_partitioned_create_list_delete(admin: Admin, broker: Broker) -> None:
    assert await admin.call("PUT", T) == (204, None)
    assert await admin.ok("GET", NS) == [TOPIC]
    await admin.fails("PUT", T, 409, "This topic already exists")
    assert await admin.ok("GET", f"{T}/partitions") == {"partitions": 0, "deleted": False}
    assert await admin.call("DELETE", T) == (204, None)
    assert await admin.ok("GET", NS) == []
    await admin.fails("DELETE", T, 404, f"Topic {TOPIC} not found")
    await admin.fails("GET", f"{T}/stats", 404, f"Topic {TOPIC} not found")


async def test_deleting_a_non_persistent_topic_that_is_not_loaded_is_a_no_op(
    admin: Admin, wire: Wire
) -> None:
    # Pulsar's BrokerService.deleteTopic: a non-persistent topic lives only while loaded, so one
    # that is not has nothing to delete (204, as Pulsar 4.0.7 standalone answers), where a
    # persistent one that is not stored is 404.
    path = "/admin/v2/non-persistent/public/default/np"
    assert await admin.call("DELETE", path) == (204, None)
    await wire.consumer("non-persistent://public/default/np", "s")
    await admin.fails("DELETE", path, 412, "Topic has active producers/subscriptions")


async def test_explicit_creation_ignores_auto_creation(admin: Admin, broker: Broker) -> None:
    await admin.ok("POST", "/admin/v2/brokers/configuration/allowAutoTopicCreation/false")
    assert await admin.call("PUT", T) == (204, None)
    assert broker.topics.topic_exists(TopicName.parse(TOPIC))
    assert await admin.ok("GET", NS) == [TOPIC]


async def test_partitioned_create_update_get_delete(admin: Admin) -> None:
    path = f"{T}/partitions"
    assert await admin.call("PUT", path, data="3") == (204, None)
    await admin.fails("PUT", path, 409, "This topic already exists", data="3")
    await admin.fails("PUT", T, 409, "This topic already exists")
    assert await admin.ok("GET", path) == {"partitions": 3, "deleted": False}
    assert await admin.ok("GET", f"{NS}/partitioned") == [TOPIC]
    assert await admin.ok("GET", NS) == [f"{TOPIC}-partition-{i}" for i in range(3)]
    assert await admin.call("POST", path, data="5") == (204, None)
    assert await admin.ok("GET", path) == {"partitions": 5, "deleted": False}
    await admin.fails("POST", path, 422, "can't be less than the current partitions", data="2")
    await admin.fails("DELETE", T, 409, "is a partitioned topic")
    assert await admin.call("DELETE", path) == (204, None)
    await admin.fails("GET", path, 404, f"Topic {TOPIC} not found")
    assert await admin.ok("GET", NS) == []
    await admin.fails("DELETE", path, 404, "not found")


async def test_partitioned_create_takes_pulsars_metadata_media_type(admin: Admin) -> None:
    # What the Go admin client sends (and pulsar-admin with properties).
    response = await admin.client.put(
        f"{T}/partitions",
        data='{"partitions": 2, "properties": {"owner": "ops"}}',
        headers={"Content-Type": "application/vnd.partitioned-topic-metadata+json"},
    )
    assert response.status == 204, await response.text()
    assert await admin.ok("GET", f"{T}/partitions") == {
        "partitions": 2,
        "deleted": False,
        "properties": {"owner": "ops"},
    }


async def test_partition_counts_are_validated(admin: Admin) -> None:
    path = f"{T}/partitions"
    await admin.fails("PUT", path, 406, "Number of partitions should be more than 0", data="0")
    await admin.fails("PUT", path, 406, "Number of partitions should be more than 0", data="-3")
    await admin.fails("PUT", path, 400, "number of partitions", data='"three"')
    await admin.fails("PUT", path, 400, "is required")
    await admin.fails("PUT", f"{NS}/t-partition-0/partitions", 412, "should not contain")
    await admin.fails("POST", path, 409, "is not the partitioned topic", data="4")
    assert await admin.ok("GET", NS) == []


METADATA = "application/vnd.partitioned-topic-metadata+json"


# Pulsar 4.0.7 standalone (conformance scenario partition_count_coercion): Jackson reads the
# count as a Java int, under the metadata media type and as a bare body alike.
@pytest.mark.parametrize(
    ("value", "status", "partitions"),
    [
        ('"2"', 204, 2),
        ('" 2 "', 204, 2),
        ('"+2"', 204, 2),
        ("2.0", 204, 2),
        ("2.7", 204, 2),
        ("null", 406, None),
        ('""', 406, None),
        ('"2.5"', 400, None),
        ('"two"', 400, None),
        ("true", 400, None),
        ("{}", 400, None),
        ("[2]", 400, None),
        ("4294967298", 400, None),
    ],
)
@pytest.mark.parametrize("media", ["metadata", "bare"])
async def test_partition_counts_are_read_as_jackson_reads_an_int(
    admin: Admin, media: str, value: str, status: int, partitions: int | None
) -> None:
    body, content_type = (
        (f'{{"partitions": {value}}}', METADATA)
        if media == "metadata"
        else (value, "application/json")
    )
    response = await admin.client.put(
        f"{T}/partitions", data=body, headers={"Content-Type": content_type}
    )
    assert response.status == status, await response.text()
    if partitions is not None:
        assert (await admin.ok("GET", f"{T}/partitions"))["partitions"] == partitions


async def test_metadata_without_a_count_is_refused_as_zero(admin: Admin) -> None:
    response = await admin.client.put(
        f"{T}/partitions", data='{"properties": {"a": "1"}}', headers={"Content-Type": METADATA}
    )
    assert response.status == 406, await response.text()
    assert "Number of partitions should be more than 0" in await response.text()


async def test_delete_refuses_topics_in_use_unless_forced(admin: Admin, wire: Wire) -> None:
    await wire.produce(TOPIC, 2)
    await admin.fails("DELETE", T, 412, "Topic has active producers/subscriptions")
    assert await admin.call("DELETE", f"{T}?force=true") == (204, None)
    # The producer was told to go (CLOSE_PRODUCER, §9) and the topic is gone.
    closed = await wire.clients[0].receive_command()
    assert isinstance(closed, c.CloseProducer)
    assert await admin.ok("GET", NS) == []


async def test_delete_partitioned_in_use_and_the_wrong_delete(admin: Admin, wire: Wire) -> None:
    await admin.ok("PUT", f"{T}/partitions", data="2")
    await wire.produce(f"{TOPIC}-partition-1", 1)
    await admin.fails("DELETE", f"{T}/partitions", 412, "active producers")
    await admin.ok("PUT", f"{NS}/single")
    await admin.fails("DELETE", f"{NS}/single/partitions", 409, "is a non-partitioned topic")
    await admin.ok("DELETE", f"{T}/partitions?force=true")
    assert await admin.ok("GET", NS) == [f"{TOPIC.rsplit('/', 1)[0]}/single"]


async def test_http_partitions_call_can_auto_create(admin: Admin) -> None:
    await admin.ok("POST", "/admin/v2/brokers/configuration/allowAutoTopicCreationType/partitioned")
    await admin.ok("POST", "/admin/v2/brokers/configuration/defaultNumPartitions/3")
    await admin.fails("GET", f"{T}/partitions", 404, f"Topic {TOPIC} not found")
    url = f"{T}/partitions?checkAllowAutoCreation=true"
    assert await admin.ok("GET", url) == {"partitions": 3, "deleted": False}


async def test_partitions_of_a_missing_topic_is_404_unless_a_client_may_create_it(
    admin: Admin,
) -> None:
    # Pulsar's internalGetPartitionedMetadataAsync; differential scenario
    # partitioned_metadata_of_each_kind_of_topic.
    url = f"{T}/partitions"
    await admin.fails("GET", url, 404, f"Topic {TOPIC} not found")
    np = f"/admin/v2/non-persistent/{TOPIC.split('://', 1)[1]}/partitions"
    await admin.fails("GET", np, 404, f"Topic non-{TOPIC} not found")
    created = {"partitions": 0, "deleted": False}
    assert await admin.ok("GET", f"{url}?checkAllowAutoCreation=true") == created
    assert await admin.ok("GET", np + "?checkAllowAutoCreation=true") == created
    await admin.ok("POST", "/admin/v2/brokers/configuration/allowAutoTopicCreation/false")
    await admin.fails("GET", f"{url}?checkAllowAutoCreation=true", 404, "not found")
    await admin.fails("GET", f"{url}?checkAllowAutoCreation=false", 404, "not found")


async def test_partitions_of_an_existing_non_partitioned_topic_or_partition_is_0(
    admin: Admin, wire: Wire
) -> None:
    await admin.ok("POST", "/admin/v2/brokers/configuration/allowAutoTopicCreation/false")
    none = {"partitions": 0, "deleted": False}
    await admin.ok("PUT", T)
    assert await admin.ok("GET", f"{T}/partitions") == none
    await admin.ok("PUT", f"{NS}/p/partitions", data="2")
    assert await admin.ok("GET", f"{NS}/p-partition-1/partitions") == none
    await admin.fails("GET", f"{NS}/p-partition-2/partitions", 404, "not found")
    np = "non-persistent://public/default/np"
    await admin.fails("GET", "/admin/v2/non-persistent/public/default/np/partitions", 404, "")
    await admin.ok("POST", "/admin/v2/brokers/configuration/allowAutoTopicCreation/true")
    await wire.produce(np, 1)
    assert await admin.ok("GET", "/admin/v2/non-persistent/public/default/np/partitions") == none


# ---- stats ----------------------------------------------------------------------------------


async def test_stats_have_pulsars_field_names(
    admin: Admin, wire: Wire, fake_clock: FakeClock
) -> None:
    await wire.produce(TOPIC, 4)
    await wire.consumer(TOPIC, "sub")
    await admin.ok("GET", f"{T}/stats")  # first rate sample
    await wire.produce(TOPIC, 6)
    await fake_clock.advance(2.0)
    stats = await admin.ok("GET", f"{T}/stats")
    assert stats["msgInCounter"] == 10
    assert stats["msgRateIn"] == pytest.approx(3.0)  # 6 messages over 2 s
    assert stats["bytesInCounter"] > 0
    assert stats["msgThroughputIn"] > 0
    assert stats["msgRateOut"] == 0.0
    assert len(stats["publishers"]) == 2
    assert {p["accessMode"] for p in stats["publishers"]} == {"Shared"}
    assert stats["publishers"][0]["producerName"].startswith("standalone-")
    sub = stats["subscriptions"]["sub"]
    assert sub["msgBacklog"] == 10
    assert sub["type"] == "Shared"
    assert sub["isDurable"] is True
    assert [cons["consumerName"] for cons in sub["consumers"]] == [""]
    assert sub["consumers"][0]["availablePermits"] == 0
    assert stats["deduplicationStatus"] == "Disabled"


async def test_subscription_without_a_consumer_yet_has_type_none(admin: Admin, wire: Wire) -> None:
    # Pulsar reports a subscription's type from its dispatcher, made at the first consumer.
    await admin.ok("PUT", f"{T}/subscription/s")
    assert (await admin.ok("GET", f"{T}/stats"))["subscriptions"]["s"]["type"] == "None"
    await wire.consumer(TOPIC, "s")
    assert (await admin.ok("GET", f"{T}/stats"))["subscriptions"]["s"]["type"] == "Shared"


async def test_partitioned_stats_sum_the_partitions(admin: Admin, wire: Wire) -> None:
    await admin.ok("PUT", f"{T}/partitions", data="2")
    await wire.produce(f"{TOPIC}-partition-0", 3)
    await wire.produce(f"{TOPIC}-partition-1", 2)
    await wire.consumer(f"{TOPIC}-partition-0", "s")
    await wire.consumer(f"{TOPIC}-partition-1", "s")
    stats = await admin.ok("GET", f"{T}/partitioned-stats")
    assert stats["metadata"] == {"partitions": 2, "deleted": False}
    assert stats["msgInCounter"] == 5
    assert stats["subscriptions"]["s"]["msgBacklog"] == 5
    assert len(stats["subscriptions"]["s"]["consumers"]) == 2
    assert len(stats["publishers"]) == 2
    assert set(stats["partitions"]) == {f"{TOPIC}-partition-0", f"{TOPIC}-partition-1"}
    assert stats["partitions"][f"{TOPIC}-partition-1"]["msgInCounter"] == 2
    brief = await admin.ok("GET", f"{T}/partitioned-stats?perPartition=false")
    assert brief["partitions"] == {}
    await admin.fails("GET", f"{NS}/flat/partitioned-stats", 404, "Partitioned Topic")


async def test_stats_options_leave_out_publishers_and_consumers(admin: Admin, wire: Wire) -> None:
    await admin.ok("PUT", f"{T}/partitions", data="2")
    for partition in (f"{TOPIC}-partition-0", f"{TOPIC}-partition-1"):
        await wire.produce(partition, 1)
        await wire.consumer(partition, "s")
    one = f"{T}-partition-0/stats"
    both = "excludePublishers=true&excludeConsumers=true"
    full = await admin.ok("GET", one)
    assert (len(full["publishers"]), len(full["subscriptions"]["s"]["consumers"])) == (1, 1)
    bare = await admin.ok("GET", f"{one}?{both}")
    assert (bare["publishers"], bare["subscriptions"]["s"]["consumers"]) == ([], [])
    assert bare["msgInCounter"] == 1  # only the lists go
    only = await admin.ok("GET", f"{one}?excludeConsumers=true")
    assert (len(only["publishers"]), only["subscriptions"]["s"]["consumers"]) == (1, [])
    merged = await admin.ok("GET", f"{T}/partitioned-stats?{both}")
    assert (merged["publishers"], merged["subscriptions"]["s"]["consumers"]) == ([], [])
    for doc in merged["partitions"].values():
        assert (doc["publishers"], doc["subscriptions"]["s"]["consumers"]) == ([], [])


async def test_internal_stats_describe_ledgers_and_cursors(admin: Admin, wire: Wire) -> None:
    await wire.produce(TOPIC, 3)
    await admin.ok("PUT", f"{T}/subscription/s", json="earliest")
    internal = await admin.ok("GET", f"{T}/internalStats")
    assert internal["entriesAddedCounter"] == 3
    assert internal["numberOfEntries"] == 3
    [ledger] = internal["ledgers"]
    assert ledger["entries"] == 3
    assert ledger["size"] > 0
    assert internal["lastConfirmedEntry"] == f"{ledger['ledgerId']}:2"
    cursor = internal["cursors"]["s"]
    assert cursor["markDeletePosition"] == f"{ledger['ledgerId']}:-1"
    assert cursor["individuallyDeletedMessages"] == "[]"


# ---- subscriptions --------------------------------------------------------------------------


async def test_subscription_create_at_positions_and_list(admin: Admin, wire: Wire) -> None:
    await wire.produce(TOPIC, 5)
    sub = f"{T}/subscription"
    assert await admin.call("PUT", f"{sub}/latest") == (204, None)
    await admin.ok("PUT", f"{sub}/earliest", json="earliest")
    await admin.ok("PUT", f"{sub}/byid", json={"ledgerId": 1, "entryId": 2})
    await admin.ok("PUT", f"{sub}/after", json={"ledgerId": 1, "entryId": 2, "isExcluded": True})
    await admin.ok("PUT", f"{sub}/query?messageId=1:4")
    assert await admin.ok("GET", f"{T}/subscriptions") == [
        "after",
        "byid",
        "earliest",
        "latest",
        "query",
    ]
    stats = (await admin.ok("GET", f"{T}/stats"))["subscriptions"]
    backlogs = {name: s["msgBacklog"] for name, s in stats.items()}
    assert backlogs == {"latest": 0, "earliest": 5, "byid": 3, "after": 2, "query": 1}
    await admin.fails("PUT", f"{sub}/latest", 409, "Subscription already exists for topic")
    await admin.fails("PUT", f"{sub}/bad", 400, "Invalid message id", json="yesterday")


async def test_subscription_on_a_partitioned_topic_covers_every_partition(admin: Admin) -> None:
    await admin.ok("PUT", f"{T}/partitions", data="2")
    await admin.ok("PUT", f"{T}/subscription/s")
    assert await admin.ok("GET", f"{NS}/t-partition-1/subscriptions") == ["s"]
    assert await admin.ok("GET", f"{T}/subscriptions") == ["s"]
    await admin.ok("DELETE", f"{T}/subscription/s")
    assert await admin.ok("GET", f"{NS}/t-partition-0/subscriptions") == []


async def test_delete_subscription_with_consumers_needs_force(admin: Admin, wire: Wire) -> None:
    consumer = await wire.consumer(TOPIC, "s")
    await admin.fails("DELETE", f"{T}/subscription/s", 412, "active connected consumers")
    assert await admin.call("DELETE", f"{T}/subscription/s?force=true") == (204, None)
    assert isinstance(await consumer.receive_command(), c.CloseConsumer)
    assert await admin.ok("GET", f"{T}/subscriptions") == []
    await admin.fails("DELETE", f"{T}/subscription/s", 404, "Subscription s not found")


async def test_skip_and_skip_all(admin: Admin, wire: Wire) -> None:
    await wire.produce(TOPIC, 6)
    await admin.ok("PUT", f"{T}/subscription/s", json="earliest")

    async def backlog() -> int:
        result: int = (await admin.ok("GET", f"{T}/stats"))["subscriptions"]["s"]["msgBacklog"]
        return result

    assert await admin.call("POST", f"{T}/subscription/s/skip/2") == (204, None)
    assert await backlog() == 4
    await admin.fails("POST", f"{T}/subscription/s/skip/-1", 400, "numMessages")
    await admin.fails("POST", f"{T}/subscription/s/skip/x", 404, "not an integer")
    await admin.ok("POST", f"{T}/subscription/s/skip_all")
    assert await backlog() == 0
    await admin.fails("POST", f"{T}/subscription/nope/skip/1", 404, "Subscription nope not found")


async def test_reset_cursor_to_time_and_to_id(admin: Admin, wire: Wire) -> None:
    await wire.produce(TOPIC, 5, publish_time=1_000)  # publish times 1000 .. 1004
    await admin.ok("PUT", f"{T}/subscription/s")
    sub = f"{T}/subscription/s"

    async def backlog() -> int:
        result: int = (await admin.ok("GET", f"{T}/stats"))["subscriptions"]["s"]["msgBacklog"]
        return result

    assert await backlog() == 0
    assert await admin.call("POST", f"{sub}/resetcursor/1002") == (204, None)
    assert await backlog() == 3
    await admin.ok("POST", f"{sub}/resetcursor", json={"ledgerId": 1, "entryId": 1})
    assert await backlog() == 4
    await admin.ok("POST", f"{sub}/resetcursor", json="earliest")
    assert await backlog() == 5
    await admin.fails("POST", f"{sub}/resetcursor", 400, "A message id is required")
    await admin.fails("POST", f"{sub}/resetcursor/soon", 404, "not an integer")


async def test_reset_cursor_disconnects_consumers(admin: Admin, wire: Wire) -> None:
    await wire.produce(TOPIC, 2)
    consumer = await wire.consumer(TOPIC, "s")
    await admin.ok("POST", f"{T}/subscription/s/resetcursor/0")
    assert isinstance(await consumer.receive_command(), c.CloseConsumer)


async def test_partitioned_only_operations_are_refused_on_partitioned_topics(admin: Admin) -> None:
    await admin.ok("PUT", f"{T}/partitions", data="2")
    await admin.ok("PUT", f"{T}/subscription/s")
    sub = f"{T}/subscription/s"
    await admin.fails("POST", f"{sub}/skip/1", 405, "Skip messages on a partitioned topic")
    await admin.fails("POST", f"{sub}/resetcursor", 405, "partitioned-topic", json="earliest")
    assert await admin.call("POST", f"{sub}/resetcursor/0") == (204, None)
    assert await admin.call("POST", f"{sub}/skip_all") == (204, None)


async def test_non_persistent_subscriptions(admin: Admin, wire: Wire) -> None:
    np = "/admin/v2/non-persistent/public/default/n"
    await wire.produce("non-persistent://public/default/n", 1)
    await admin.fails("PUT", f"{np}/subscription/s", 400, "non-persistent topic")
    await wire.consumer("non-persistent://public/default/n", "s")
    assert await admin.ok("GET", f"{np}/subscriptions") == ["s"]
    await admin.fails("POST", f"{np}/subscription/s/skip/1", 405, "non-persistent")
    await admin.ok("DELETE", f"{np}/subscription/s?force=true")
    assert await admin.ok("GET", f"{np}/subscriptions") == []
    stats = await admin.ok("GET", f"{np}/stats")
    assert stats["msgInCounter"] == 1
    assert stats["msgDropRate"] == 0.0
    assert await admin.ok("GET", "/admin/v2/non-persistent/public/default") == [
        "non-persistent://public/default/n"
    ]


# ---- unload and compaction ------------------------------------------------------------------


async def test_unload_closes_clients_and_keeps_data(
    admin: Admin, wire: Wire, broker: Broker
) -> None:
    await wire.produce(TOPIC, 3)
    consumer = await wire.consumer(TOPIC, "s")
    assert await admin.call("PUT", f"{T}/unload") == (204, None)
    assert isinstance(await wire.clients[0].receive_command(), c.CloseProducer)
    assert isinstance(await consumer.receive_command(), c.CloseConsumer)
    assert broker.topics.loaded_topic(TopicName.parse(TOPIC)) is None
    stats = await admin.ok("GET", f"{T}/stats")  # loads it again, from its stored state
    assert stats["subscriptions"]["s"]["msgBacklog"] == 3
    await admin.fails("PUT", f"{NS}/nope/unload", 404, "not found")


async def test_compaction_trigger_and_status(admin: Admin, wire: Wire) -> None:
    await wire.produce(TOPIC, 2)
    assert await admin.ok("GET", f"{T}/compaction") == {"status": "NOT_RUN", "lastError": ""}
    assert await admin.call("PUT", f"{T}/compaction") == (204, None)
    status = await admin.ok("GET", f"{T}/compaction")
    assert status["status"] in ("RUNNING", "SUCCESS")
    await admin.fails("PUT", f"{NS}/nope/compaction", 404, "not found")
    await admin.fails(
        "PUT", "/admin/v2/non-persistent/public/default/n/compaction", 404, "not found"
    )


async def test_broker_stats_topics_streams_the_loaded_topics_by_namespace_and_bundle(
    admin: Admin, wire: Wire
) -> None:
    await wire.produce(TOPIC, 2)
    await wire.consumer(TOPIC, "s")
    await admin.ok("PUT", "/admin/v2/non-persistent/public/default/np")
    tree = await admin.ok("GET", "/admin/v2/broker-stats/topics")
    bundle = await admin.ok("GET", "/lookup/v2/topic/persistent/public/default/t/bundle")
    persistent = tree["public/default"][bundle]["persistent"][TOPIC]
    assert persistent["msgInCount"] == 2
    assert persistent["producerCount"] == 1
    assert persistent["publishers"][0]["producerName"].startswith("standalone-")
    assert persistent["subscriptions"]["s"]["msgBacklog"] == 2
    assert persistent["subscriptions"]["s"]["type"] == "Shared"
    assert len(persistent["subscriptions"]["s"]["consumers"]) == 1
    np_bundle = await admin.ok("GET", "/lookup/v2/topic/non-persistent/public/default/np/bundle")
    assert list(tree["public/default"][np_bundle]["non-persistent"]) == [
        "non-persistent://public/default/np"
    ]


async def test_publishers_and_consumers_show_address_client_version_and_since(
    admin: Admin, wire: Wire, fake_clock: FakeClock
) -> None:
    await fake_clock.advance(5.0)
    await wire.produce(TOPIC, 1)
    since = format_time(fake_clock.wall_ms())
    await fake_clock.advance(1.0)
    await wire.consumer(TOPIC, "s")
    stats = await admin.ok("GET", f"{T}/stats")
    (publisher,) = stats["publishers"]
    (consumer,) = stats["subscriptions"]["s"]["consumers"]
    # CONNECT's client_version; the address as Java prints a socket address ("/host:port").
    assert publisher["clientVersion"] == consumer["clientVersion"] == "Pulsar-CPP-v4.2.0"
    assert publisher["address"].startswith("/")
    assert consumer["address"].startswith("/")
    assert publisher["connectedSince"] == since  # when the producer was created
    assert consumer["connectedSince"] == format_time(fake_clock.wall_ms())
