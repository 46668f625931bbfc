"""The official client's producers: access modes, deduplication and schemas (issue 3, part 4).

Namespace policies are set the way the admin API stores them: Pulsar's ``Policies`` JSON at
``/admin/policies/<tenant>/<namespace>`` in the broker's metadata store (a fresh namespace per
test, so the module's shared brokers stay untouched). The subprocess broker turns deduplication
on through a ``PULSAR_PREFIX_brokerDeduplicationEnabled`` environment override.
"""

from __future__ import annotations

import contextlib
import enum
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pulsar
import pytest
from pulsar.schema import (
    AvroSchema,
    CustomEnum,
    Integer,
    JsonSchema,
    Record,
    String,
    StringSchema,
)

from emubroker.naming import TopicName
from emubroker.testing import RunningBroker, run_broker_in_thread
from tests.integration.conftest import make_client
from tests.support.broker import standalone_process

pytestmark = pytest.mark.integration

RECEIVE_MS = 5000
Exclusive = pulsar.ProducerAccessMode.Exclusive


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


def namespace_with(broker: RunningBroker, **policies: Any) -> str:
    """A new namespace of ``public`` with ``public/default``'s policies plus ``policies``."""

    async def create(path: str) -> None:
        store = broker.broker.metadata
        template = await store.get("/admin/policies/public/default")
        assert template is not None
        doc = json.loads(template.value)
        doc.update(policies)
        await store.put(path, msgspec.json.encode(doc))

    local = f"ns-{uuid.uuid4().hex[:8]}"
    broker.call(create, f"/admin/policies/public/{local}")
    deadline = time.monotonic() + 5
    while not broker.broker.namespaces.exists(TopicName.parse(f"public/{local}/t").namespace):
        assert time.monotonic() < deadline, "the namespace never became visible"
        time.sleep(0.01)
    return f"persistent://public/{local}"


def unique(prefix: str = "persistent://public/default") -> str:
    return f"{prefix}/b-{uuid.uuid4().hex[:10]}"


# ---- access modes (§6.1) ---------------------------------------------------------------------


def test_second_exclusive_producer_is_fenced_and_shared_is_busy(client: pulsar.Client) -> None:
    topic = unique()
    first = client.create_producer(topic, access_mode=Exclusive)
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(topic, access_mode=Exclusive)
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic)
    first.close()
    client.create_producer(topic, access_mode=Exclusive).send(b"after the first closed")


def test_wait_for_exclusive_gets_the_topic_when_the_holder_closes(client: pulsar.Client) -> None:
    topic = unique()
    holder = client.create_producer(topic, access_mode=Exclusive)
    created = threading.Event()
    box: dict[str, Any] = {}

    def wait_for_topic() -> None:
        try:
            box["producer"] = client.create_producer(
                topic, access_mode=pulsar.ProducerAccessMode.WaitForExclusive
            )
        except Exception as exc:  # reported by the assertions below
            box["error"] = exc
        created.set()

    waiter = threading.Thread(target=wait_for_topic)
    waiter.start()
    try:
        # Queued at the broker (producer_ready=false): longer than any round trip, no answer.
        assert not created.wait(0.5)
        holder.close()
        assert created.wait(10), "the waiting producer never got the topic"
    finally:
        waiter.join(10)
    assert "error" not in box, box.get("error")
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    box["producer"].send(b"mine now")
    assert consumer.receive(RECEIVE_MS).data() == b"mine now"


def test_exclusive_with_fencing_fences_the_old_producer(broker: RunningBroker) -> None:
    client = make_client(broker.service_url)
    try:
        topic = unique()
        consumer = client.subscribe(topic, "s")
        old = client.create_producer(topic, access_mode=Exclusive)
        old.send(b"old")
        fencing = pulsar.ProducerAccessMode.ExclusiveWithFencing
        new = client.create_producer(topic, access_mode=fencing)
        new.send(b"new")
        with pytest.raises(pulsar.ProducerFenced):
            old.send(b"too late")
        assert [consumer.receive(RECEIVE_MS).data() for _ in range(2)] == [b"old", b"new"]
    finally:
        # The C++ client may report closing its fenced producer as AlreadyClosed, depending on
        # whether it finished fencing it first; that is the client's bookkeeping, not ours.
        with contextlib.suppress(pulsar.AlreadyClosed):
            client.close()


# ---- deduplication (§6.1, §6.2) --------------------------------------------------------------


def read_all(client: pulsar.Client, topic: str) -> list[bytes]:
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    out = []
    while reader.has_message_available():
        out.append(reader.read_next(RECEIVE_MS).data())
    reader.close()
    return out


def check_deduplication(service_url: str, topic: str) -> None:
    client = make_client(service_url)
    try:
        producer = client.create_producer(topic, producer_name="dedup-producer")
        assert producer.last_sequence_id() == -1
        for i in range(3):
            producer.send(f"m{i}".encode())
        assert producer.last_sequence_id() == 2
        duplicate = producer.send(b"again", sequence_id=1)
        assert (duplicate.ledger_id(), duplicate.entry_id()) == (-1, -1)
        producer.send(b"m9", sequence_id=9)
        assert read_all(client, topic) == [b"m0", b"m1", b"m2", b"m9"]
    finally:
        client.close()
    # A new client (no sequence state of its own) continues from what the broker remembers.
    client = make_client(service_url)
    try:
        producer = client.create_producer(topic, producer_name="dedup-producer")
        assert producer.last_sequence_id() == 9
        producer.send(b"m10")
        producer.send(b"m9 again", sequence_id=9)
        assert read_all(client, topic)[-2:] == [b"m9", b"m10"]
    finally:
        client.close()


def test_deduplication_enabled_by_namespace_policy(broker: RunningBroker) -> None:
    namespace = namespace_with(broker, deduplicationEnabled=True)
    check_deduplication(broker.service_url, unique(namespace))


def test_deduplication_survives_a_topic_unload(broker: RunningBroker) -> None:
    topic = unique(namespace_with(broker, deduplicationEnabled=True))
    client = make_client(broker.service_url)
    try:
        producer = client.create_producer(topic, producer_name="unloaded")
        for i in range(3):
            producer.send(f"u{i}".encode())
        broker.call(broker.broker.topics.unload, TopicName.parse(topic))
        producer.send(b"u3")  # waits for the reconnection
        assert producer.last_sequence_id() == 3
        assert read_all(client, topic) == [b"u0", b"u1", b"u2", b"u3"]
    finally:
        client.close()
    client = make_client(broker.service_url)
    try:
        assert client.create_producer(topic, producer_name="unloaded").last_sequence_id() == 3
    finally:
        client.close()


def test_deduplication_enabled_by_environment_in_a_subprocess() -> None:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PULSAR_PREFIX_brokerDeduplicationEnabled", "true")  # read at start-up
        with standalone_process() as proc:
            check_deduplication(proc.service_url, unique())


# ---- schemas (§11) ---------------------------------------------------------------------------


def user_schema(**fields: Any) -> type[Record]:
    """A ``User`` record with the given fields (one name, several versions)."""
    return type("User", (Record,), dict(fields))


UserV1 = user_schema(name=String(), age=Integer(required=True))
UserV2 = user_schema(name=String())  # a field removed: readers of v2 ignore it in v1 data
UserV3 = user_schema(name=String(), email=String())  # v2 data has no email and no default


@pytest.mark.parametrize("make_schema", [AvroSchema, JsonSchema], ids=["avro", "json"])
def test_record_schemas_round_trip_with_versions(
    broker: RunningBroker, client: pulsar.Client, make_schema: Callable[[type[Record]], Any]
) -> None:
    # BACKWARD: v2 readers can read v1 data (Pulsar's default, FULL, would refuse v2).
    topic = unique(namespace_with(broker, schema_compatibility_strategy="BACKWARD"))
    consumer = client.subscribe(topic, "s", schema=make_schema(UserV1))
    producer = client.create_producer(topic, schema=make_schema(UserV1))
    producer.send(UserV1(name="ada", age=36))
    msg = consumer.receive(RECEIVE_MS)
    assert (msg.value().name, msg.value().age) == ("ada", 36)
    assert msg.schema_version().encode() == bytes(8)  # the first version: eight zero bytes
    evolved = client.create_producer(topic, schema=make_schema(UserV2))
    evolved.send(UserV2(name="bob"))
    second = consumer.receive(RECEIVE_MS)
    assert second.schema_version().encode() == (1).to_bytes(8, "big")


def test_string_schema_round_trip(client: pulsar.Client) -> None:
    topic = unique()
    consumer = client.subscribe(topic, "s", schema=StringSchema())
    producer = client.create_producer(topic, schema=StringSchema())
    producer.send("hello")
    msg = consumer.receive(RECEIVE_MS)
    assert msg.value() == "hello"
    assert msg.schema_version().encode() == bytes(8)


def test_incompatible_schema_is_rejected_under_backward(
    broker: RunningBroker, client: pulsar.Client
) -> None:
    topic = unique(namespace_with(broker, schema_compatibility_strategy="BACKWARD"))
    client.create_producer(topic, schema=AvroSchema(UserV1)).send(UserV1(name="a", age=1))
    client.create_producer(topic, schema=AvroSchema(UserV2)).send(UserV2(name="b"))
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=AvroSchema(UserV3))
    # A Python Avro reader decodes every version through GET_SCHEMA.
    reader = client.create_reader(topic, pulsar.MessageId.earliest, schema=AvroSchema(UserV2))
    assert [reader.read_next(RECEIVE_MS).value().name for _ in range(2)] == ["a", "b"]


def test_default_strategy_is_full_as_in_pulsar(client: pulsar.Client) -> None:
    topic = unique()
    client.create_producer(topic, schema=AvroSchema(UserV2))
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=StringSchema())


def test_always_compatible_accepts_any_evolution(
    broker: RunningBroker, client: pulsar.Client
) -> None:
    topic = unique(namespace_with(broker, schema_compatibility_strategy="ALWAYS_COMPATIBLE"))
    client.create_producer(topic, schema=AvroSchema(UserV2))
    client.create_producer(topic, schema=AvroSchema(UserV3))
    client.create_producer(topic, schema=StringSchema())  # even another type


def test_a_renamed_record_that_still_resolves_is_compatible(
    broker: RunningBroker, client: pulsar.Client
) -> None:
    # Pulsar's validator resolves schemas without comparing record names (the official
    # client's schema_test.py evolves User1 into User2 under FORWARD).
    topic = unique(namespace_with(broker, schema_compatibility_strategy="FORWARD"))
    first = type("User1", (Record,), {"name": String(), "age": Integer()})
    second = type(
        "User2",
        (Record,),
        {"_sorted_fields": True, "name": String(), "age": Integer(required=True)},
    )
    consumer = client.subscribe(topic, "s", schema=AvroSchema(first))
    client.create_producer(topic, schema=AvroSchema(first)).send(first(name="a", age=1))
    client.create_producer(topic, schema=AvroSchema(second)).send(second(name="b", age=2))
    values = [consumer.receive(RECEIVE_MS).value() for _ in range(2)]
    assert [(v.name, v.age) for v in values] == [("a", 1), ("b", 2)]
    # Enum names are still compared.
    colour = enum.Enum("Colour", {"RED": 0})
    shade = enum.Enum("Shade", {"RED": 0})
    enum_topic = unique(namespace_with(broker, schema_compatibility_strategy="FORWARD"))
    with_colour = type("Paint", (Record,), {"c": CustomEnum(colour)})
    with_shade = type("Paint", (Record,), {"c": CustomEnum(shade)})
    client.create_producer(enum_topic, schema=AvroSchema(with_colour))
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(enum_topic, schema=AvroSchema(with_shade))


def test_a_consumer_refused_for_its_schema_never_joins_the_subscription(
    broker: RunningBroker, client: pulsar.Client
) -> None:
    # schema_test.py's test_json_schema, under Pulsar's default strategy (FULL).
    topic = unique(namespace_with(broker, schema_compatibility_strategy="FULL"))
    example = type("Example", (Record,), {"a": Integer(), "b": Integer()})
    bad = type("BadExample", (Record,), {"a": String(), "b": Integer()})
    producer = client.create_producer(topic, schema=JsonSchema(example))
    for schema in (JsonSchema(bad), AvroSchema(bad), StringSchema()):
        with pytest.raises(pulsar.IncompatibleSchema):
            client.subscribe(topic, "sub-1", schema=schema)
    consumer = client.subscribe(topic, "sub-1", schema=JsonSchema(example))
    producer.send(example(a=1, b=2))
    assert consumer.receive(RECEIVE_MS).value() == example(a=1, b=2)
