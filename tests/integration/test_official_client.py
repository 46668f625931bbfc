"""The official ``pulsar-client`` 3.13.0 against our broker, in-process and as a subprocess.

Every scenario here is something the client's own test suites do; the spec sections cited say
what the broker must do for it to pass.
"""

from __future__ import annotations

import re
import time
import uuid

import pulsar
import pytest

from emubroker.topics.pickers import failover_ring_pick
from tests.integration.conftest import make_client

pytestmark = pytest.mark.integration

RECEIVE_MS = 5000


def receive_all(consumer: pulsar.Consumer, count: int) -> list[pulsar.Message]:
    return [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(count)]


def assert_nothing_more(consumer: pulsar.Consumer, wait_ms: int = 300) -> None:
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=wait_ms)


# ---- produce / consume (spec §6, §7, §10) -------------------------------------------------


def test_ids_of_sends_equal_ids_received_and_start_at_zero(
    client: pulsar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    sent = [producer.send(f"m{i}".encode()) for i in range(10)]
    received = receive_all(consumer, 10)
    assert [m.data() for m in received] == [f"m{i}".encode() for i in range(10)]
    assert [m.message_id() for m in received] == sent
    assert [i.entry_id() for i in sent] == list(range(10))
    assert all(i.partition() == -1 and i.batch_index() == -1 for i in sent)
    assert producer.last_sequence_id() == 9
    for m in received:
        consumer.acknowledge(m)
    producer.close()
    consumer.close()


def test_batched_sends_share_an_entry_and_are_split_by_the_client(
    client: pulsar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_publish_delay_ms=50, batching_max_messages=5
    )
    ids: list[pulsar.MessageId] = []
    for i in range(5):
        producer.send_async(f"b{i}".encode(), lambda res, mid: ids.append(mid))
    producer.flush()
    assert len(ids) == 5
    received = receive_all(consumer, 5)
    assert [m.data() for m in received] == [f"b{i}".encode() for i in range(5)]
    assert sorted(m.message_id() for m in received) == sorted(ids)
    assert {m.message_id().entry_id() for m in received} == {0}
    assert [m.message_id().batch_index() for m in received] == list(range(5))
    consumer.acknowledge_cumulative(received[-1])
    producer.close()


def test_properties_keys_and_event_time_round_trip(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    producer.send(b"x", properties={"a": "1"}, partition_key="k", event_timestamp=1234)
    msg = consumer.receive(timeout_millis=RECEIVE_MS)
    assert msg.properties() == {"a": "1"}
    assert msg.partition_key() == "k"
    assert msg.event_timestamp() == 1234
    assert msg.redelivery_count() == 0


# ---- subscription types (spec §7.1) -------------------------------------------------------


def test_second_exclusive_consumer_is_busy(client: pulsar.Client, topic: str) -> None:
    first = client.subscribe(topic, "excl")
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "excl")
    first.close()
    client.subscribe(topic, "excl").close()  # free again once the first one left


def test_shared_consumers_split_the_messages(client: pulsar.Client, topic: str) -> None:
    consumers = [
        client.subscribe(
            topic, "shared", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=10
        )
        for _ in range(2)
    ]
    producer = client.create_producer(topic)
    for i in range(40):
        producer.send(f"s{i}".encode())
    got: dict[int, list[bytes]] = {0: [], 1: []}
    deadline = time.monotonic() + 10
    while len(got[0]) + len(got[1]) < 40 and time.monotonic() < deadline:
        for index, consumer in enumerate(consumers):
            try:
                msg = consumer.receive(timeout_millis=100)
            except pulsar.Timeout:
                continue
            got[index].append(msg.data())
            consumer.acknowledge(msg)
    assert sorted(got[0] + got[1]) == sorted(f"s{i}".encode() for i in range(40))
    assert got[0]
    assert got[1]


def test_failover_delivers_to_one_consumer_then_fails_over(
    client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic)
    subscribed = {
        name: client.subscribe(
            topic, "fo", consumer_type=pulsar.ConsumerType.Failover, consumer_name=name
        )
        for name in ("a", "b")
    }
    for i in range(5):
        producer.send(f"f{i}".encode())
    # On a non-partitioned topic the topic name's place on the consumers' hash ring decides.
    active = "ab"[failover_ring_pick(topic, ["a", "b"])]
    standby = subscribed["b" if active == "a" else "a"]
    msgs = receive_all(subscribed[active], 5)
    assert [m.data() for m in msgs] == [f"f{i}".encode() for i in range(5)]
    assert_nothing_more(standby)
    subscribed[active].close()  # unacked messages move to the other one
    moved = receive_all(standby, 5)
    assert [m.data() for m in moved] == [f"f{i}".encode() for i in range(5)]
    assert all(m.redelivery_count() == 0 for m in moved)  # Failover counts no redelivery


def test_key_shared_routes_each_key_to_one_consumer(client: pulsar.Client, topic: str) -> None:
    consumers = [
        client.subscribe(topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared) for _ in range(2)
    ]
    producer = client.create_producer(topic)
    for i in range(60):
        producer.send(f"{i}".encode(), partition_key=f"key-{i % 6}")
    owner: dict[str, int] = {}
    total = 0
    deadline = time.monotonic() + 10
    while total < 60 and time.monotonic() < deadline:
        for index, consumer in enumerate(consumers):
            try:
                msg = consumer.receive(timeout_millis=100)
            except pulsar.Timeout:
                continue
            total += 1
            assert owner.setdefault(msg.partition_key(), index) == index
            consumer.acknowledge(msg)
    assert total == 60
    assert len(owner) == 6


def test_key_shared_joining_consumer_waits_for_keys_still_unacked(
    client: pulsar.Client, topic: str
) -> None:
    """PIP-379 draining hashes: keys that move to a new consumer wait for the old one's acks."""

    def drain(consumer: pulsar.Consumer, wait_ms: int) -> list[pulsar.Message]:
        out = []
        while True:
            try:
                out.append(consumer.receive(timeout_millis=wait_ms))
            except pulsar.Timeout:
                return out

    key_shared = pulsar.ConsumerType.KeyShared
    keys = [f"k{i}" for i in range(20)]
    a = client.subscribe(
        topic, "ks", consumer_type=key_shared, consumer_name="a", receiver_queue_size=20
    )
    producer = client.create_producer(topic, batching_enabled=False)
    for i, k in enumerate(keys):
        producer.send(f"{i}".encode(), partition_key=k)
    held = receive_all(a, 20)  # one message of every key, unacked on "a"
    b = client.subscribe(
        topic, "ks", consumer_type=key_shared, consumer_name="b", receiver_queue_size=20
    )
    for i, k in enumerate(keys):
        producer.send(f"{20 + i}".encode(), partition_key=k)
    for i in range(20):
        producer.send(f"f{i}".encode(), partition_key=f"f{i}")
    early = drain(b, 1000)
    assert early, "keys nobody holds go to the new consumer at once"
    assert all(m.partition_key().startswith("f") for m in early)  # nothing of a's held keys
    kept = drain(a, 500)
    moved = [k for k in keys if k not in {m.partition_key() for m in kept}]
    assert moved, "the ring gave some keys to b"
    first = moved[0]
    a.acknowledge(held[keys.index(first)])  # that key alone unblocks
    m = b.receive(timeout_millis=RECEIVE_MS)
    assert (m.partition_key(), m.data()) == (first, f"{20 + keys.index(first)}".encode())
    assert_nothing_more(b)
    for m in held + kept:
        a.acknowledge(m)
    rest = receive_all(b, len(moved) - 1)
    assert [(m.partition_key(), m.data()) for m in rest] == [
        (k, f"{20 + keys.index(k)}".encode()) for k in moved[1:]
    ]
    assert_nothing_more(a)
    assert_nothing_more(b)


# ---- readers (spec §7.1 non-durable, §7.6, §14.3) -----------------------------------------


def test_readers_from_earliest_latest_and_inside_a_batch(client: pulsar.Client, topic: str) -> None:
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_publish_delay_ms=50, batching_max_messages=5
    )
    ids: list[pulsar.MessageId] = []
    for i in range(5):
        producer.send_async(f"r{i}".encode(), lambda res, mid: ids.append(mid))
    producer.flush()
    ids.sort()

    earliest = client.create_reader(topic, pulsar.MessageId.earliest)
    assert [earliest.read_next(RECEIVE_MS).data() for _ in range(5)] == [
        f"r{i}".encode() for i in range(5)
    ]
    assert not earliest.has_message_available()

    inside = client.create_reader(topic, ids[2])  # exclusive: starts after batch index 2
    assert [inside.read_next(RECEIVE_MS).data() for _ in range(2)] == [b"r3", b"r4"]
    assert not inside.has_message_available()

    inclusive = client.create_reader(topic, ids[2], start_message_id_inclusive=True)
    assert inclusive.read_next(RECEIVE_MS).data() == b"r2"

    latest = client.create_reader(topic, pulsar.MessageId.latest)
    assert not latest.has_message_available()
    producer.send(b"after")  # batching: flushed by the delay
    assert latest.read_next(RECEIVE_MS).data() == b"after"
    for reader in (earliest, inside, inclusive, latest):
        reader.close()


def test_get_last_message_id_and_has_message_available(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "last", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    for i in range(3):
        sent = producer.send(b"x")
        assert consumer.get_last_message_id().entry_id() == i
        assert consumer.get_last_message_id() == sent
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    for _ in range(3):
        assert reader.has_message_available()
        reader.read_next(RECEIVE_MS)
    assert not reader.has_message_available()


# ---- acks, redelivery, seek (spec §7.3-§7.5) ----------------------------------------------


def test_negative_acks_count_redeliveries(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(
        topic,
        "nack",
        consumer_type=pulsar.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=100,
    )
    producer = client.create_producer(topic)
    producer.send(b"again")
    for expected in range(4):
        msg = consumer.receive(timeout_millis=RECEIVE_MS)
        assert msg.data() == b"again"
        assert msg.redelivery_count() == expected
        if expected < 3:
            consumer.negative_acknowledge(msg)
    consumer.acknowledge(msg)
    assert_nothing_more(consumer)


def test_exclusive_negative_ack_redelivers_everything_unacked(
    client: pulsar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "nack-ex", negative_ack_redelivery_delay_ms=100)
    producer = client.create_producer(topic)
    producer.send(b"one")
    msg = consumer.receive(timeout_millis=RECEIVE_MS)
    consumer.negative_acknowledge(msg)
    again = consumer.receive(timeout_millis=RECEIVE_MS)
    assert again.data() == b"one"
    # Pulsar's single-active-consumer dispatcher does not track redeliveries.
    assert again.redelivery_count() == 0


def test_cumulative_ack_survives_reconnect(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "cum")
    producer = client.create_producer(topic)
    for i in range(6):
        producer.send(f"c{i}".encode())
    msgs = receive_all(consumer, 6)
    consumer.acknowledge_cumulative(msgs[3])
    consumer.close()
    again = client.subscribe(topic, "cum")
    assert [m.data() for m in receive_all(again, 2)] == [b"c4", b"c5"]
    assert_nothing_more(again)


def test_unacked_messages_come_back_after_close(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "back")
    producer = client.create_producer(topic)
    producer.send(b"a")
    producer.send(b"b")
    first = consumer.receive(timeout_millis=RECEIVE_MS)
    consumer.acknowledge(first)
    consumer.receive(timeout_millis=RECEIVE_MS)  # not acked
    consumer.close()
    again = client.subscribe(topic, "back")
    msg = again.receive(timeout_millis=RECEIVE_MS)
    assert msg.data() == b"b"
    assert msg.redelivery_count() == 0  # replayed after a close: not a redelivery request


def test_seek_by_id_and_by_time(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "seek")
    producer = client.create_producer(topic)
    ids = [producer.send(f"k{i}".encode()) for i in range(5)]
    msgs = receive_all(consumer, 5)
    for m in msgs:
        consumer.acknowledge(m)
    consumer.seek(ids[1])
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"k2"  # exclusive of the id
    consumer.seek(msgs[3].publish_timestamp())
    got = consumer.receive(timeout_millis=RECEIVE_MS)
    assert got.publish_timestamp() >= msgs[3].publish_timestamp()
    assert got.data() in (b"k0", b"k1", b"k2", b"k3")  # same-millisecond publishes tie
    consumer.seek(pulsar.MessageId.earliest)
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"k0"


def test_unsubscribe_deletes_the_subscription(client: pulsar.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "gone")
    producer.send(b"old")
    consumer.unsubscribe()
    consumer = client.subscribe(topic, "gone")  # recreated at Latest: "old" is not there
    producer.send(b"new")
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"new"


def test_unsubscribe_is_refused_while_another_consumer_is_attached(
    client: pulsar.Client, topic: str
) -> None:
    # Pulsar answers MetadataError ("Unconnected or shared consumer attempting to unsubscribe").
    first = client.subscribe(topic, "both", consumer_type=pulsar.ConsumerType.Shared)
    second = client.subscribe(topic, "both", consumer_type=pulsar.ConsumerType.Shared)
    with pytest.raises(pulsar.BrokerMetadataError):
        first.unsubscribe()
    second.close()
    first.unsubscribe()  # alone now: allowed


# ---- partitioned topics, errors, big messages ---------------------------------------------


def test_unknown_namespace_is_topic_not_found(client: pulsar.Client) -> None:
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer(f"nosuchtenant/nosuchns/t-{uuid.uuid4().hex[:8]}")
    with pytest.raises(pulsar.TopicNotFound):
        client.subscribe(f"persistent://public/nosuchns/t-{uuid.uuid4().hex[:8]}", "s")


def test_unknown_listener_name_fails(service_url: str) -> None:
    client = pulsar.Client(
        service_url,
        operation_timeout_seconds=5,
        listener_name="test",
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    try:
        with pytest.raises(pulsar.PulsarException):
            client.create_producer(f"t-{uuid.uuid4().hex[:8]}")
    finally:
        client.close()


def test_chunked_10_mib_message(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "chunks")
    producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False)
    payload = bytes(range(256)) * (10 * 1024 * 1024 // 256)
    producer.send(payload)
    msg = consumer.receive(timeout_millis=20_000)
    assert msg.data() == payload
    consumer.acknowledge(msg)


def test_message_too_big_without_chunking_fails_locally(client: pulsar.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    with pytest.raises(pulsar.MessageTooBig):
        producer.send(b"x" * (5 * 1024 * 1024 + 1))


def test_producer_names_are_generated_and_exclusive_producers_fence(
    client: pulsar.Client, topic: str
) -> None:
    first = client.create_producer(topic)
    second = client.create_producer(topic)
    assert first.producer_name() != second.producer_name()
    assert first.producer_name().startswith("standalone-")
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic, producer_name=first.producer_name())
    exclusive_topic = topic + "-x"
    exclusive = client.create_producer(
        exclusive_topic, access_mode=pulsar.ProducerAccessMode.Exclusive
    )
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(exclusive_topic, access_mode=pulsar.ProducerAccessMode.Exclusive)
    exclusive.close()


def test_two_clients_on_one_broker(service_url: str, topic: str) -> None:
    producer_client, consumer_client = make_client(service_url), make_client(service_url)
    try:
        consumer = consumer_client.subscribe(topic, "two")
        producer = producer_client.create_producer(topic)
        sent = producer.send(b"across")
        msg = consumer.receive(timeout_millis=RECEIVE_MS)
        assert msg.message_id() == sent
    finally:
        producer_client.close()
        consumer_client.close()


def test_reader_at_latest_inclusive_reads_the_last_message(
    client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic)
    for i in range(3):
        producer.send(f"l{i}".encode())
    # The client asks GET_LAST_MESSAGE_ID, then SEEKs to it (spec §14.3).
    reader = client.create_reader(topic, pulsar.MessageId.latest, start_message_id_inclusive=True)
    assert reader.has_message_available()
    assert reader.read_next(RECEIVE_MS).data() == b"l2"
    assert not reader.has_message_available()


def test_regex_subscription_finds_topics_of_the_namespace(client: pulsar.Client) -> None:
    prefix = f"rx-{uuid.uuid4().hex[:8]}"
    producers = [client.create_producer(f"{prefix}-{i}") for i in range(2)]
    consumer = client.subscribe(
        re.compile(f"persistent://public/default/{prefix}-.*"),
        "rx",
        initial_position=pulsar.InitialPosition.Earliest,
    )
    for index, producer in enumerate(producers):
        producer.send(f"from-{index}".encode())
    got = sorted(m.data() for m in receive_all(consumer, 2))
    assert got == [b"from-0", b"from-1"]
