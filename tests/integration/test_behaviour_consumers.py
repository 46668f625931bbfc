"""The official client's consumers: delayed delivery, dead letters, compaction and TableView,
and pattern subscriptions over non-persistent topics (issue 3, part 4).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import re
import time
import urllib.request
import uuid
from collections.abc import Iterator

import pulsar
import pytest

from emubroker.naming import TopicName
from emubroker.testing import RunningBroker, run_broker_in_thread
from tests.integration.conftest import make_client

pytestmark = pytest.mark.integration

RECEIVE_MS = 5000


@pytest.fixture(scope="module")
def broker() -> Iterator[RunningBroker]:
    with run_broker_in_thread() as running:
        yield running


@pytest.fixture
def client(broker: RunningBroker) -> Iterator[pulsar.Client]:
    c = make_client(broker.service_url)
    try:
        yield c
    finally:
        c.close()


def unique(prefix: str = "persistent://public/default/c") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def drain(consumer: pulsar.Consumer, wait_ms: int = 1000) -> list[bytes]:
    """Everything that arrives until ``wait_ms`` pass without a message."""
    out = []
    while True:
        try:
            msg = consumer.receive(wait_ms)
        except pulsar.Timeout:
            return out
        out.append(msg.data())
        consumer.acknowledge(msg)


# ---- delayed delivery (§6.4 deliver_at_time) -------------------------------------------------


@pytest.mark.parametrize("kind", [pulsar.ConsumerType.Shared, pulsar.ConsumerType.KeyShared])
def test_deliver_after_holds_messages_back(
    client: pulsar.Client, kind: pulsar.ConsumerType
) -> None:
    topic = unique()
    consumer = client.subscribe(topic, "delayed", consumer_type=kind)
    producer = client.create_producer(topic)
    start = time.monotonic()
    producer.send(b"later", deliver_after=datetime.timedelta(milliseconds=1200))
    producer.send(b"now", partition_key="k")
    first = consumer.receive(RECEIVE_MS)
    assert first.data() == b"now"
    assert time.monotonic() - start < 1.0
    second = consumer.receive(RECEIVE_MS)
    assert second.data() == b"later"
    assert time.monotonic() - start >= 1.1


def test_exclusive_subscriptions_ignore_delays(client: pulsar.Client) -> None:
    topic = unique()
    consumer = client.subscribe(topic, "excl")
    producer = client.create_producer(topic)
    producer.send(b"not delayed here", deliver_after=datetime.timedelta(seconds=30))
    assert consumer.receive(RECEIVE_MS).data() == b"not delayed here"


# ---- dead letter topics ----------------------------------------------------------------------


def test_dead_letter_topic_gets_the_poison_message(client: pulsar.Client) -> None:
    topic = unique()
    consumer = client.subscribe(
        topic,
        "work",
        consumer_type=pulsar.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=100,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(
            max_redeliver_count=2, initial_subscription_name="triage"
        ),
    )
    producer = client.create_producer(topic)
    producer.send(b"poison")
    producer.send(b"fine")
    counts = []
    while True:
        try:
            msg = consumer.receive(2000)
        except pulsar.Timeout:
            break
        if msg.data() == b"fine":
            consumer.acknowledge(msg)
        else:
            counts.append(msg.redelivery_count())
            consumer.negative_acknowledge(msg)
    assert counts == [0, 1, 2]
    # The client published it to <topic>-<subscription>-DLQ, whose initial subscription was
    # created by its producer, so it is there from the start.
    dlq = client.subscribe(f"{topic}-work-DLQ", "triage")
    dead = dlq.receive(RECEIVE_MS)
    assert dead.data() == b"poison"
    assert dead.properties()["REAL_TOPIC"] == topic


def admin(broker: RunningBroker, method: str, path: str, body: object = None) -> object:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{broker.admin_url}/admin/v2/{path}", data, method=method)
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=5) as reply:
        text = reply.read()
    return json.loads(text) if text else None


def test_no_dead_letter_where_its_initial_subscription_may_not_be_created(
    broker: RunningBroker, client: pulsar.Client
) -> None:
    # The namespace forbids subscription auto-creation: the broker refuses the dead-letter
    # producer that names an initial subscription (NotAllowedError), as Pulsar does, so the
    # poison message never reaches the dead-letter topic.
    namespace = f"public/dlq-{uuid.uuid4().hex[:8]}"
    admin(broker, "PUT", f"namespaces/{namespace}")
    off = {"allowAutoSubscriptionCreation": False}
    admin(broker, "POST", f"namespaces/{namespace}/autoSubscriptionCreation", off)
    topic = f"persistent://{namespace}/t"
    admin(broker, "PUT", f"persistent/{namespace}/t/subscription/work")
    consumer = client.subscribe(
        topic,
        "work",
        consumer_type=pulsar.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=100,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(
            max_redeliver_count=1, initial_subscription_name="triage"
        ),
    )
    client.create_producer(topic).send(b"poison")
    for _ in range(2):
        consumer.negative_acknowledge(consumer.receive(RECEIVE_MS))
    with contextlib.suppress(pulsar.Timeout):  # past the count the client tries the DLQ
        consumer.receive(1500)
    stats = admin(broker, "GET", f"persistent/{namespace}/t-work-DLQ/stats")
    assert isinstance(stats, dict)
    assert (stats["msgInCounter"], stats["publishers"], stats["subscriptions"]) == (0, [], {})


# ---- compaction and TableView (§7.1 read_compacted, §7.6) ------------------------------------


def compact(broker: RunningBroker, topic: str) -> None:
    """Trigger through the admin REST API and wait for SUCCESS."""
    path = topic.replace("://", "/")
    url = f"{broker.admin_url}/admin/v2/{path}/compaction"
    request = urllib.request.Request(url, method="PUT")
    with urllib.request.urlopen(request, timeout=5) as reply:
        assert reply.status == 204
    deadline = time.monotonic() + 10
    while True:
        with urllib.request.urlopen(url, timeout=5) as reply:
            status = json.loads(reply.read())
        if status["status"] == "SUCCESS":
            return
        assert status["status"] in ("RUNNING", "NOT_RUN"), status
        assert time.monotonic() < deadline, status
        time.sleep(0.02)


def fill(client: pulsar.Client, topic: str) -> None:
    plain = client.create_producer(topic)
    batched = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=20)
    for key, value in [("a", b"1"), ("b", b"1"), ("a", b"2"), ("c", b"1"), ("b", b"")]:
        plain.send(value, partition_key=key)
    plain.send(b"no key")
    for key, value in [("d", b"1"), ("e", b"1"), ("d", b"2")]:
        batched.send_async(value, None, partition_key=key)
    batched.flush()
    plain.send(b"", partition_key="c")  # a tombstone as the very last message


def read_compacted(client: pulsar.Client, topic: str) -> list[tuple[str, bytes]]:
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    out = []
    while reader.has_message_available():
        msg = reader.read_next(RECEIVE_MS)
        out.append((msg.partition_key(), msg.data()))
    reader.close()
    return out


def test_read_compacted_sees_the_latest_value_per_key(
    broker: RunningBroker, client: pulsar.Client
) -> None:
    topic = unique()
    fill(client, topic)
    assert len(read_compacted(client, topic)) == 10  # nothing compacted yet
    compact(broker, topic)
    # b and c were deleted by tombstones, the keyless message dropped, d's older value (in the
    # same batch as e) compacted out; c's tombstone, the topic's last message, is after the
    # compaction horizon and read as it is (as Pulsar 4.0.7's compacted readers receive it).
    assert read_compacted(client, topic) == [("a", b"2"), ("e", b"1"), ("d", b"2"), ("c", b"")]
    # Compacted consumers too; and what comes after the compaction is read as it is.
    client.create_producer(topic).send(b"3", partition_key="a")
    consumer = client.subscribe(
        topic, "compacted", is_read_compacted=True, initial_position=pulsar.InitialPosition.Earliest
    )
    assert drain(consumer) == [b"2", b"1", b"2", b"", b"3"]
    plain = client.create_reader(topic, pulsar.MessageId.earliest)
    assert len([plain.read_next(RECEIVE_MS) for _ in range(11)]) == 11  # all still stored
    assert not plain.has_message_available()


def test_table_view_over_a_compacted_topic(broker: RunningBroker, client: pulsar.Client) -> None:
    topic = unique()
    fill(client, topic)
    compact(broker, topic)
    table = client.create_table_view(topic)
    snapshot: dict[str, bytes] = {}
    table.for_each(lambda key, value: snapshot.__setitem__(key, value))
    assert snapshot == {"a": b"2", "d": b"2", "e": b"1"}
    producer = client.create_producer(topic)
    producer.send(b"new", partition_key="f")
    producer.send(b"", partition_key="a")
    deadline = time.monotonic() + 5
    while table.get("f") is None or table.get("a") is not None:
        assert time.monotonic() < deadline, "the table view never caught up"
        time.sleep(0.02)
    assert table.get("f") == b"new"


def test_compaction_status_through_the_service(broker: RunningBroker) -> None:
    service = broker.broker.compaction
    assert service is not None
    name = TopicName.parse(unique())
    client = make_client(broker.service_url)
    try:
        client.create_producer(str(name)).send(b"x", partition_key="k")
    finally:
        client.close()
    assert service.status(name).status == "NOT_RUN"
    broker.call(service.trigger, name)
    deadline = time.monotonic() + 5
    while service.status(name).status != "SUCCESS":
        assert time.monotonic() < deadline, service.status(name)
        time.sleep(0.02)


# ---- pattern subscriptions over non-persistent topics (§5.3) ---------------------------------


def test_regex_subscription_modes_include_non_persistent_topics(client: pulsar.Client) -> None:
    prefix = f"rx-{uuid.uuid4().hex[:8]}"
    volatile = [
        client.create_producer(f"non-persistent://public/default/{prefix}-{i}") for i in (0, 1)
    ]
    durable = client.create_producer(f"persistent://public/default/{prefix}-p")
    durable.send(b"stored before")
    only_volatile = client.subscribe(
        re.compile(f"non-persistent://public/default/{prefix}-.*"),
        "np",
        regex_subscription_mode=pulsar.RegexSubscriptionMode.NonPersistentOnly,
    )
    everything = client.subscribe(
        re.compile(f"public/default/{prefix}-.*"),
        "all",
        regex_subscription_mode=pulsar.RegexSubscriptionMode.AllTopics,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    for index, producer in enumerate(volatile):
        producer.send(f"np{index}".encode())
    durable.send(b"stored after")
    assert sorted(drain(only_volatile)) == [b"np0", b"np1"]
    assert sorted(drain(everything)) == [b"np0", b"np1", b"stored after", b"stored before"]


def test_non_persistent_topics_have_no_last_message_id(client: pulsar.Client) -> None:
    # Pulsar's NonPersistentTopic refuses getLastDispatchablePosition; the broker answers
    # GET_LAST_MESSAGE_ID with UnknownError, so has_message_available fails as well.
    topic = unique("non-persistent://public/default/np")
    reader = client.create_reader(topic, pulsar.MessageId.latest)
    consumer = client.subscribe(topic, "s")
    client.create_producer(topic).send(b"x")
    assert reader.read_next(RECEIVE_MS).data() == b"x"
    with pytest.raises(pulsar.UnknownError):
        reader.has_message_available()
    with pytest.raises(pulsar.UnknownError):
        consumer.get_last_message_id()


def test_seek_on_a_non_persistent_topic_succeeds_and_changes_nothing(
    client: pulsar.Client,
) -> None:
    # NonPersistentSubscription.resetCursor is a no-op that completes: SUCCESS, no disconnect.
    topic = unique("non-persistent://public/default/np")
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic)
    producer.send(b"before")
    assert drain(consumer) == [b"before"]
    consumer.seek(pulsar.MessageId.earliest)
    consumer.seek(0)
    assert drain(consumer, wait_ms=200) == []  # nothing stored, nothing replayed
    producer.send(b"after")
    assert drain(consumer) == [b"after"]


@pytest.mark.parametrize("topic_index", [0, 2])  # names whose hash ring would pick "b", "c"
def test_non_persistent_failover_activates_the_first_consumer_by_name(
    client: pulsar.Client, topic_index: int
) -> None:
    # NonPersistentSubscription uses partition index 0 for a non-partitioned topic, so the
    # active consumer is the first in name order whatever the topic's name hashes to.
    topic = f"non-persistent://public/default/failover-by-name-{topic_index}"
    consumers = {
        name: client.subscribe(
            topic, "f", consumer_type=pulsar.ConsumerType.Failover, consumer_name=name
        )
        for name in ("c", "a", "b")
    }
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(3):
        producer.send(f"m{i}".encode())
    assert drain(consumers["a"]) == [b"m0", b"m1", b"m2"]
    assert drain(consumers["b"], wait_ms=200) == drain(consumers["c"], wait_ms=200) == []
