"""Issue 3 behaviour over in-memory connections: access modes, deduplication, schemas.

Raw protocol with ``WireClient`` against a real broker (FakeClock, no sockets), asserting on the
exact replies of spec §6.1 (PRODUCER_SUCCESS fields, producer_ready), §6.2 (receipts) and §11
(GET_SCHEMA, IncompatibleSchema).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest

from emubroker.app import Broker, open_broker
from emubroker.config import load_config
from emubroker.naming import TopicName
from protocol import commands as c
from protocol.clock import FakeClock
from protocol.errors import ServerError
from tests.emubroker import test_handlers
from tests.emubroker.test_handlers import Connections
from tests.support.broker import WireClient

pytestmark = pytest.mark.anyio

TOPIC = "persistent://public/default/behaviour"


def avro(*fields: dict[str, Any]) -> c.Schema:
    doc = {"type": "record", "name": "User", "fields": list(fields)}
    return c.Schema(name="User", schema_data=json.dumps(doc).encode(), type=c.SchemaType.AVRO)


NAME = {"name": "name", "type": "string"}
V1 = avro(NAME)
V2 = avro(NAME, {"name": "age", "type": ["null", "int"], "default": None})
NO_DEFAULT = avro(NAME, {"name": "age", "type": "int"})


async def open_test_broker(clock: FakeClock, **overrides: Any) -> Any:
    config = load_config(
        overrides={"brokerServicePort": 6650, "webServicePort": 8080, **overrides}, environ={}
    )
    return open_broker(config, clock=clock, listen=False, admin=False)


@pytest.fixture
async def broker(fake_clock: FakeClock) -> AsyncIterator[Broker]:
    async with await open_test_broker(fake_clock) as running:
        yield running


@pytest.fixture
async def conns(broker: Broker) -> AsyncIterator[Connections]:
    connections = Connections(broker)
    try:
        yield connections
    finally:
        await connections.aclose()


async def create_producer(client: WireClient, **fields: Any) -> c.ProducerSuccess:
    fields.setdefault("topic", TOPIC)
    return await test_handlers.create_producer(client, **fields)


async def subscribe(client: WireClient, **fields: Any) -> None:
    fields.setdefault("topic", TOPIC)
    await test_handlers.subscribe(client, **fields)


async def producer_error(client: WireClient, **fields: Any) -> c.Error:
    request_id = client.request_id()
    fields.setdefault("topic", TOPIC)
    await client.send(c.Producer(request_id=request_id, **fields))
    reply = await client.receive_command()
    assert isinstance(reply, c.Error), reply
    assert reply.request_id == request_id
    return reply


async def set_policies(broker: Broker, **fields: Any) -> None:
    path = "/admin/policies/public/default"
    node = await broker.metadata.get(path)
    assert node is not None
    policies = json.loads(node.value)
    policies.update(fields)
    await broker.metadata.put(path, msgspec.json.encode(policies))


# ---- access modes (§6.1) ---------------------------------------------------------------------


async def test_wait_for_exclusive_is_queued_then_ready(conns: Connections) -> None:
    first = await conns.open()
    owner = await create_producer(first, producer_id=1, producer_access_mode=c.AccessMode.EXCLUSIVE)
    assert owner.topic_epoch == 0
    second = await conns.open()
    await second.send(
        c.Producer(
            topic=TOPIC,
            producer_id=1,
            request_id=42,
            producer_name="waiter",
            producer_access_mode=c.AccessMode.WAIT_FOR_EXCLUSIVE,
        )
    )
    # producer_ready=false first: the client stops its timeout and waits.
    assert await second.receive_command() == c.ProducerSuccess(
        request_id=42, producer_name="waiter", schema_version=b"", producer_ready=False
    )
    await first.send(c.CloseProducer(producer_id=1, request_id=5))
    assert await first.receive_command() == c.Success(request_id=5)
    ready = await second.receive_command()
    assert isinstance(ready, c.ProducerSuccess)
    assert (ready.request_id, ready.producer_name, ready.producer_ready) == (42, "waiter", True)
    assert ready.topic_epoch == 1


async def test_exclusive_modes_fence(conns: Connections) -> None:
    client = await conns.open()
    await create_producer(client, producer_id=1, producer_access_mode=c.AccessMode.EXCLUSIVE)
    fenced = await producer_error(
        client, producer_id=2, producer_access_mode=c.AccessMode.EXCLUSIVE
    )
    assert fenced.error is ServerError.ProducerFenced
    await client.send(
        c.Producer(
            topic=TOPIC,
            producer_id=3,
            request_id=30,
            producer_access_mode=c.AccessMode.EXCLUSIVE_WITH_FENCING,
        )
    )
    # The holder is closed (CLOSE_PRODUCER) before the newcomer gets the topic.
    closed = await client.receive_command()
    assert isinstance(closed, c.CloseProducer)
    assert closed.producer_id == 1
    taker = await client.receive_command()
    assert isinstance(taker, c.ProducerSuccess)
    assert (taker.request_id, taker.topic_epoch) == (30, 1)
    # The old producer comes back with its old topic epoch: fenced for good.
    stale = await producer_error(
        client,
        producer_id=1,
        producer_access_mode=c.AccessMode.EXCLUSIVE,
        topic_epoch=0,
        epoch=1,
    )
    assert stale.error is ServerError.ProducerFenced


# ---- deduplication (§6.1, §6.2) --------------------------------------------------------------


async def send(client: WireClient, producer_id: int, sequence_id: int, name: str) -> Any:
    meta = c.MessageMetadata(producer_name=name, sequence_id=sequence_id, publish_time=1)
    await client.send_message(producer_id, sequence_id, metadata=meta)
    reply = await client.receive_command()
    assert isinstance(reply, c.SendReceipt), reply
    assert reply.sequence_id == sequence_id
    assert reply.message_id is not None
    return reply.message_id.ledger_id, reply.message_id.entry_id


async def test_deduplication_by_namespace_policy(broker: Broker, conns: Connections) -> None:
    await set_policies(broker, deduplicationEnabled=True)
    client = await conns.open()
    created = await create_producer(client, producer_id=1, producer_name="dd")
    assert created.last_sequence_id == -1
    for seq in range(3):
        assert (await send(client, 1, seq, "dd"))[1] == seq
    assert await send(client, 1, 1, "dd") == (-1, -1)  # a duplicate: not stored
    await client.send(c.CloseProducer(producer_id=1, request_id=9))
    await client.receive_command()
    again = await create_producer(client, producer_id=2, producer_name="dd")
    assert again.last_sequence_id == 2
    assert (await send(client, 2, 3, "dd"))[1] == 3
    topic: Any = broker.topics.loaded_topic(TopicName.parse(TOPIC))
    assert topic.ledger.count == 4


async def test_deduplication_by_broker_config(fake_clock: FakeClock) -> None:
    async with await open_test_broker(fake_clock, brokerDeduplicationEnabled=True) as running:
        conns = Connections(running)
        try:
            client = await conns.open()
            await create_producer(client, producer_id=1, producer_name="cfg")
            assert (await send(client, 1, 7, "cfg"))[1] == 0
            assert await send(client, 1, 7, "cfg") == (-1, -1)
            assert await send(client, 1, 3, "cfg") == (-1, -1)  # lower ids too
        finally:
            await conns.aclose()


# ---- schemas (§11) ---------------------------------------------------------------------------


async def test_schema_versions_are_8_byte_big_endian(conns: Connections) -> None:
    client = await conns.open()
    first = await create_producer(client, producer_id=1, schema=V1)
    assert first.schema_version == bytes(8)
    same = await create_producer(client, producer_id=2, schema=V1)
    assert same.schema_version == bytes(8)
    evolved = await create_producer(client, producer_id=3, schema=V2)
    assert evolved.schema_version == (1).to_bytes(8, "big")
    plain = await create_producer(client, producer_id=4)
    assert plain.schema_version == b""


async def test_get_schema_latest_and_by_version(conns: Connections) -> None:
    client = await conns.open()
    await create_producer(client, producer_id=1, schema=V1)
    await create_producer(client, producer_id=2, schema=V2)
    await client.send(c.GetSchema(request_id=1, topic=TOPIC))
    latest = await client.receive_command()
    assert isinstance(latest, c.GetSchemaResponse)
    assert latest.error_code is None
    assert latest.schema_version == (1).to_bytes(8, "big")
    assert latest.schema is not None
    assert latest.schema.schema_data == V2.schema_data
    assert latest.schema.type is c.SchemaType.AVRO
    assert latest.schema.name == "public/default/behaviour"  # Pulsar names it by schema id
    await client.send(c.GetSchema(request_id=2, topic=TOPIC, schema_version=bytes(8)))
    old = await client.receive_command()
    assert isinstance(old, c.GetSchemaResponse)
    assert old.schema is not None
    assert old.schema.schema_data == V1.schema_data
    await client.send(c.GetSchema(request_id=3, topic=TOPIC, schema_version=(9).to_bytes(8, "big")))
    missing = await client.receive_command()
    assert isinstance(missing, c.GetSchemaResponse)
    assert missing.error_code is ServerError.TopicNotFound
    await client.send(c.GetSchema(request_id=4, topic=TOPIC, schema_version=b""))
    empty = await client.receive_command()
    assert isinstance(empty, c.GetSchemaResponse)
    assert empty.error_code is ServerError.IncompatibleSchema


async def test_incompatible_schema_is_refused_under_backward(
    broker: Broker, conns: Connections
) -> None:
    client = await conns.open()
    await create_producer(client, producer_id=1, schema=V1)
    # Pulsar's default, FULL, refuses a new field without a default ...
    refused = await producer_error(client, producer_id=2, schema=NO_DEFAULT)
    assert refused.error is ServerError.IncompatibleSchema
    assert "FULL" in refused.message
    # ... and ALWAYS_COMPATIBLE takes anything.
    await set_policies(broker, schema_compatibility_strategy="ALWAYS_COMPATIBLE")
    assert (await create_producer(client, producer_id=2, schema=NO_DEFAULT)).schema_version == (
        (1).to_bytes(8, "big")
    )
    other = "persistent://public/default/backward"
    await set_policies(broker, schema_compatibility_strategy="BACKWARD")
    await create_producer(client, topic=other, producer_id=3, schema=V1)
    refused = await producer_error(client, topic=other, producer_id=4, schema=NO_DEFAULT)
    assert refused.error is ServerError.IncompatibleSchema
    assert "BACKWARD" in refused.message
    accepted = await create_producer(client, topic=other, producer_id=5, schema=V2)
    assert accepted.schema_version == (1).to_bytes(8, "big")


async def test_consumer_schemas(broker: Broker, conns: Connections) -> None:
    client = await conns.open()
    # An idle topic adopts a consumer's schema.
    await subscribe(client, consumer_id=1, schema=V2)
    await client.send(c.GetSchema(request_id=1, topic=TOPIC))
    adopted = await client.receive_command()
    assert isinstance(adopted, c.GetSchemaResponse)
    assert adopted.schema_version == bytes(8)
    # An active topic without a schema takes one under ALWAYS_COMPATIBLE only.
    await set_policies(broker, schema_compatibility_strategy="ALWAYS_COMPATIBLE")
    busy = "persistent://public/default/bytes-topic"
    await create_producer(client, topic=busy, producer_id=1)
    await subscribe(client, topic=busy, consumer_id=3, subscription="any", schema=V1)
    await set_policies(broker, schema_compatibility_strategy="FULL")
    await client.send(
        c.Subscribe(
            topic=busy,
            subscription="s",
            sub_type=c.SubType.EXCLUSIVE,
            consumer_id=2,
            request_id=77,
            schema=V1,
        )
    )
    refused = await client.receive_command()
    assert isinstance(refused, c.Error)
    assert (refused.request_id, refused.error) == (77, ServerError.IncompatibleSchema)


@pytest.mark.parametrize("sub_type", [c.SubType.EXCLUSIVE, c.SubType.SHARED])
async def test_a_subscribe_refused_for_its_schema_leaves_nothing_behind(
    broker: Broker, conns: Connections, sub_type: c.SubType
) -> None:
    # ServerCnx checks the schema before the subscription is touched: the refused consumer never
    # joins, so the same subscription name with a readable schema is free (schema_test.py).
    await set_policies(broker, schema_compatibility_strategy="FULL")
    client = await conns.open()
    await create_producer(client, producer_id=1, schema=V1)
    wrong_type = avro({"name": "name", "type": "int"})
    not_avro = c.Schema(name="s", schema_data=b"", type=c.SchemaType.STRING)
    for consumer_id, schema in enumerate((wrong_type, not_avro), start=1):
        request_id = client.request_id()
        await client.send(
            c.Subscribe(
                topic=TOPIC,
                subscription="sub-1",
                sub_type=sub_type,
                consumer_id=consumer_id,
                request_id=request_id,
                schema=schema,
            )
        )
        refused = await client.receive_command()
        assert isinstance(refused, c.Error), refused
        assert (refused.request_id, refused.error) == (request_id, ServerError.IncompatibleSchema)
    topic = broker.topics.loaded_topic(TopicName.parse(TOPIC))
    assert topic is not None
    assert topic.subscriptions() == []
    assert topic.consumer_count == 0
    await subscribe(client, consumer_id=3, subscription="sub-1", sub_type=sub_type, schema=V1)
    assert topic.subscriptions() == ["sub-1"]
    assert topic.consumer_count == 1


async def test_get_or_create_schema_registers_as_a_producer_would(conns: Connections) -> None:
    # A multi-schema producer (Go, Java) asks for each new schema on its topic (Pulsar's
    # ServerCnx.handleGetOrCreateSchema): the version, or the compatibility check's error.
    client = await conns.open()
    await create_producer(client, producer_id=1, schema=V1)
    asks = [
        (V1, c.GetOrCreateSchemaResponse(request_id=1, schema_version=bytes(8))),
        (V2, c.GetOrCreateSchemaResponse(request_id=2, schema_version=(1).to_bytes(8, "big"))),
        (
            c.Schema(name="none", schema_data=b"", type=c.SchemaType.NONE),
            c.GetOrCreateSchemaResponse(request_id=3, schema_version=b""),
        ),
    ]
    for schema, expected in asks:
        await client.send(
            c.GetOrCreateSchema(request_id=expected.request_id, topic=TOPIC, schema=schema)
        )
        assert await client.receive_command() == expected
    await client.send(c.GetOrCreateSchema(request_id=4, topic=TOPIC, schema=NO_DEFAULT))
    refused = await client.receive_command()
    assert isinstance(refused, c.GetOrCreateSchemaResponse), refused
    assert (refused.request_id, refused.error_code) == (4, ServerError.IncompatibleSchema)
    assert refused.schema_version is None


async def test_a_producer_with_a_none_schema_registers_it(conns: Connections) -> None:
    # The Go client's bytes schema is type NONE; Pulsar's handleProducer registers it (version
    # 0), so its messages carry that version and a consumer's GET_SCHEMA finds it.
    client = await conns.open()
    none = c.Schema(name="bytes", schema_data=b"", type=c.SchemaType.NONE)
    assert (await create_producer(client, producer_id=1, schema=none)).schema_version == bytes(8)
    await client.send(c.GetSchema(request_id=7, topic=TOPIC, schema_version=bytes(8)))
    found = await client.receive_command()
    assert isinstance(found, c.GetSchemaResponse), found
    assert found.schema is not None
    assert found.schema.type is c.SchemaType.NONE


async def test_get_or_create_schema_of_a_missing_topic_is_topic_not_found(
    conns: Connections,
) -> None:
    client = await conns.open()
    missing = TOPIC + "-missing"
    await client.send(c.GetOrCreateSchema(request_id=1, topic=missing, schema=V1))
    assert await client.receive_command() == c.GetOrCreateSchemaResponse(
        request_id=1,
        error_code=ServerError.TopicNotFound,
        error_message=f"Topic not found {missing}",
    )
    # Nothing was created: the topic's first producer registers V1 as version 0.
    assert (
        await create_producer(client, topic=missing, producer_id=1, schema=V1)
    ).schema_version == bytes(8)


async def test_schema_validation_enforced_refuses_producers_without_schema(
    fake_clock: FakeClock,
) -> None:
    async with await open_test_broker(fake_clock, isSchemaValidationEnforced=True) as running:
        conns = Connections(running)
        try:
            client = await conns.open()
            await create_producer(client, producer_id=1)  # no schema on the topic yet: fine
            await create_producer(client, producer_id=2, schema=V1)
            refused = await producer_error(client, producer_id=3)
            assert refused.error is ServerError.IncompatibleSchema
        finally:
            await conns.aclose()


# ---- GET_TOPICS_OF_NAMESPACE modes (§5.3) ----------------------------------------------------


async def test_topics_of_namespace_by_mode(conns: Connections) -> None:
    client = await conns.open()
    volatile = "non-persistent://public/default/volatile"
    await create_producer(client, producer_id=1)
    await create_producer(client, topic=volatile, producer_id=2)
    expected = {
        c.TopicsMode.PERSISTENT: (TOPIC,),
        c.TopicsMode.NON_PERSISTENT: (volatile,),
        c.TopicsMode.ALL: tuple(sorted((TOPIC, volatile))),
    }
    for request_id, (mode, topics) in enumerate(expected.items()):
        await client.send(
            c.GetTopicsOfNamespace(request_id=request_id, namespace="public/default", mode=mode)
        )
        assert await client.receive_command() == c.GetTopicsOfNamespaceResponse(
            request_id=request_id, topics=topics
        )
