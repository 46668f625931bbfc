"""The ``pulsar_cluster`` fixture's controls, each judged by the official client.

Every test gets a fresh 3-broker cluster in a background thread (the fixture), a client of its
service URL, and checks what the client sees: a consumer keeps receiving through unloads, a
producer's pending sends complete after its broker is killed, a stopped broker hands its topics
over, throttling holds deliveries back, storage faults delay or fail sends as Pulsar's client
handles them.
"""

from __future__ import annotations

import threading
import time

import pulsar
import pytest

from emubroker.testing import Bundle, PulsarCluster
from tests.integration.conftest import make_client

pytestmark = pytest.mark.integration

RECEIVE_MS = 10_000


@pytest.fixture
def service_url(pulsar_cluster: PulsarCluster) -> str:
    """The cluster's, for the integration tests' ``client`` fixture."""
    return pulsar_cluster.service_url


def other_than(cluster: PulsarCluster, broker: object) -> list[object]:
    return [b for b in cluster.running if b != broker]


def send_and_receive(producer: pulsar.Producer, consumer: pulsar.Consumer, payload: bytes) -> None:
    """Send ``payload`` and receive it; earlier messages may come again first.

    The client acknowledges in groups (every 100 ms): a message acknowledged just before an
    unload may be delivered again after it, as Pulsar's at-least-once delivery allows.
    """
    sent = producer.send(payload)
    while True:
        message = consumer.receive(RECEIVE_MS)
        consumer.acknowledge(message)
        if message.data() == payload:
            return
        assert message.message_id() < sent, f"unexpected {message.data()!r}"


def test_brokers_urls_and_leader(pulsar_cluster: PulsarCluster) -> None:
    brokers = pulsar_cluster.brokers
    assert [b.index for b in brokers] == [0, 1, 2]
    assert len({b.service_url for b in brokers}) == 3
    hosts = pulsar_cluster.service_url.removeprefix("pulsar://").split(",")
    assert hosts == [b.service_url.removeprefix("pulsar://") for b in brokers]
    assert all(b.id == b.admin_url.removeprefix("http://") for b in brokers)
    assert pulsar_cluster.wait_for_leader() == pulsar_cluster.leader == brokers[0]
    # The defaults: nothing moves bundles behind the test's back.
    runtime = pulsar_cluster.admin("GET", "/admin/v2/brokers/configuration/runtime")
    assert runtime["loadBalancerSheddingEnabled"] == "false"
    assert runtime["loadBalancerAutoBundleSplitEnabled"] == "false"


def test_a_consumer_keeps_receiving_through_unloads(
    pulsar_cluster: PulsarCluster, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "sub")
    send_and_receive(producer, consumer, b"before")
    owner = pulsar_cluster.owner_of(topic)
    assert owner is not None

    pulsar_cluster.unload(topic)  # the topic alone: closed, reopened on the same owner
    send_and_receive(producer, consumer, b"after topic unload")
    assert pulsar_cluster.owner_of(topic) == owner

    for destination in other_than(pulsar_cluster, owner):
        pulsar_cluster.unload(topic, to=destination)
        send_and_receive(producer, consumer, f"on {destination}".encode())
        # The client's reconnection looked the topic up: the leader placed it on ``to``.
        assert pulsar_cluster.wait_until_owned(topic, by=destination) == destination


def test_unloading_a_bundle_and_a_namespace(
    pulsar_cluster: PulsarCluster, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "sub")
    send_and_receive(producer, consumer, b"0")
    bundle = pulsar_cluster.bundle_of(topic)
    assert bundle in pulsar_cluster.bundles("public/default")
    target = other_than(pulsar_cluster, pulsar_cluster.owner_of(topic))[0]
    pulsar_cluster.unload(str(bundle), to=target)
    send_and_receive(producer, consumer, b"1")
    assert pulsar_cluster.wait_until_owned(topic, by=target) == target
    pulsar_cluster.unload("public/default")
    send_and_receive(producer, consumer, b"2")
    assert pulsar_cluster.wait_until_owned(topic) is not None


def test_pending_sends_complete_after_the_owner_is_killed(
    pulsar_cluster: PulsarCluster, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=30_000)
    consumer = client.subscribe(topic, "sub")
    producer.send(b"warm-up")
    owner = pulsar_cluster.owner_of(topic)
    assert owner is not None
    results: list[pulsar.Result] = []
    done = threading.Event()
    count = 200

    def sent(result: pulsar.Result, _msg_id: pulsar.MessageId) -> None:
        results.append(result)
        if len(results) == count:
            done.set()

    for i in range(count):
        producer.send_async(str(i).encode(), sent)
        if i == count // 4:
            pulsar_cluster.kill(owner)
    assert done.wait(30), f"{len(results)} of {count} sends completed"
    assert set(results) == {pulsar.Result.Ok}
    new_owner = pulsar_cluster.wait_until_owned(topic)
    assert new_owner != owner
    assert pulsar_cluster.wait_for_leader() != owner  # a new one if the owner led
    # Every acknowledged send arrives (the kill may cost redeliveries, never a message).
    expected = {b"warm-up", *(str(i).encode() for i in range(count))}
    received: set[bytes] = set()
    while not received >= expected:
        message = consumer.receive(RECEIVE_MS)  # raises Timeout if one never comes
        consumer.acknowledge(message)
        received.add(message.data())


def test_stop_hands_topics_over_and_restart_brings_the_broker_back(
    pulsar_cluster: PulsarCluster, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "sub")
    send_and_receive(producer, consumer, b"0")
    owner = pulsar_cluster.owner_of(topic)
    assert owner is not None
    pulsar_cluster.stop(owner)
    assert owner not in pulsar_cluster.running
    # Graceful: the bundle was released, not lost with a session; the next lookup places it.
    send_and_receive(producer, consumer, b"1")
    assert pulsar_cluster.wait_until_owned(topic) in pulsar_cluster.running

    pulsar_cluster.restart(owner)
    assert owner in pulsar_cluster.running
    assert pulsar_cluster.broker(owner.id) == owner  # same ports, same id
    pulsar_cluster.unload(topic, to=owner)
    send_and_receive(producer, consumer, b"2")
    assert pulsar_cluster.wait_until_owned(topic, by=owner) == owner


@pytest.mark.parametrize(
    ("level", "target", "subscription"),
    [
        ("topic", "{topic}", None),
        ("namespace", "public/default", None),
        ("subscription", "{topic}", None),
        ("subscription", "{topic}", "sub"),
        ("subscription", "public/default", None),
    ],
)
def test_a_dispatch_rate_holds_deliveries_back(
    pulsar_cluster: PulsarCluster,
    client: pulsar.Client,
    topic: str,
    level: str,
    target: str,
    subscription: str | None,
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)  # the topic exists
    # Five messages per hour: the first period's five go out, the rest waits.
    pulsar_cluster.set_dispatch_rate(
        level,  # type: ignore[arg-type]
        target.format(topic=topic),
        messages=5,
        period=3600,
        subscription=subscription,
    )
    consumer = client.subscribe(topic, "sub")
    for i in range(20):
        producer.send(str(i).encode())
    received = [consumer.receive(RECEIVE_MS) for _ in range(5)]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(500)
    stats = pulsar_cluster.admin("GET", f"/admin/v2/persistent/{topic[13:]}/stats")
    sub = stats["subscriptions"]["sub"]
    assert sub["msgOutCounter"] == 5
    assert sub["msgBacklog"] == 20  # nothing acknowledged yet
    throttled = sum(v for k, v in sub.items() if k.startswith("dispatchThrottled"))
    assert throttled > 0
    assert [m.data() for m in received] == [str(i).encode() for i in range(5)]


def test_the_broker_level_rate_reaches_every_broker(pulsar_cluster: PulsarCluster) -> None:
    pulsar_cluster.set_dispatch_rate("broker", messages=7, bytes_per_period=1000)
    for broker in pulsar_cluster.brokers:
        runtime = pulsar_cluster.admin("GET", "/admin/v2/brokers/configuration/runtime", at=broker)
        assert runtime["dispatchThrottlingRateInMsg"] == "7"
        assert runtime["dispatchThrottlingRateInByte"] == "1000"


def test_storage_latency_delays_sends(
    pulsar_cluster: PulsarCluster, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"created")
    pulsar_cluster.storage.inject(latency=0.3)
    began = time.monotonic()
    producer.send(b"slow")
    assert time.monotonic() - began >= 0.3
    delayed = pulsar_cluster.storage.statistics().faults.delayed
    assert delayed >= 1
    pulsar_cluster.storage.inject(latency=0)
    producer.send(b"fast")
    assert pulsar_cluster.storage.statistics().faults.delayed == delayed


def test_a_failed_storage_write_is_retried_by_the_client(
    pulsar_cluster: PulsarCluster, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(topic, "sub")
    producer.send(b"0")
    pulsar_cluster.storage.inject(fail_next=2)
    # The broker answers SendError; the client reconnects and sends again, so the send
    # completes (Pulsar's ClientConnection handles a SendError this way).
    producer.send(b"1")
    assert pulsar_cluster.storage.statistics().faults.failed == 2
    data = []
    while len(data) < 2 or data[-1] != b"1":
        message = consumer.receive(RECEIVE_MS)
        consumer.acknowledge(message)
        data.append(message.data())
    assert data.count(b"1") == 1


def test_a_stalled_storage_holds_sends(
    pulsar_cluster: PulsarCluster, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"0")
    began = time.monotonic()  # the stall runs from the stub's receipt of the request
    pulsar_cluster.storage.inject(stall=0.5)
    producer.send(b"1")
    assert time.monotonic() - began >= 0.5


def test_split_shows_new_ranges(
    pulsar_cluster: PulsarCluster, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "sub")
    send_and_receive(producer, consumer, b"0")
    before = pulsar_cluster.bundles("public/default")
    assert str(before[0]) == "public/default/0x00000000_0x40000000"
    pulsar_cluster.split(before[0], algorithm="range_equally_divide")
    after = pulsar_cluster.bundles("public/default")
    assert after == [
        Bundle("public/default", "0x00000000_0x20000000"),
        Bundle("public/default", "0x20000000_0x40000000"),
        *before[1:],
    ]
    # The topic's own bundle too, whichever it is: its clients carry on in the new bundle.
    old = pulsar_cluster.bundle_of(topic)
    pulsar_cluster.split(old, unload=True)
    send_and_receive(producer, consumer, b"1")
    new = pulsar_cluster.bundle_of(topic)
    assert new != old
    assert new in pulsar_cluster.bundles("public/default")
    assert pulsar_cluster.wait_until_owned(topic) is not None


@pytest.mark.pulsar_cluster(brokers=2, config={"maxProducersPerTopic": 1})
def test_the_marker_sets_size_and_config(pulsar_cluster: PulsarCluster, topic: str) -> None:
    assert len(pulsar_cluster.brokers) == 2
    client = make_client(pulsar_cluster.service_url)
    try:
        client.create_producer(topic)
        with pytest.raises(pulsar.ProducerBusy):
            client.create_producer(topic)
    finally:
        client.close()


def test_the_factory_starts_clusters_of_any_size(pulsar_cluster_factory) -> None:  # type: ignore[no-untyped-def]
    five = pulsar_cluster_factory(brokers=5, config={"loadBalancerSheddingEnabled": True})
    one = pulsar_cluster_factory(brokers=1)
    assert len(five.brokers) == 5
    assert len(one.brokers) == 1
    runtime = five.admin("GET", "/admin/v2/brokers/configuration/runtime")
    assert runtime["loadBalancerSheddingEnabled"] == "true"
    assert five.wait_for_leader() == five.brokers[0]
