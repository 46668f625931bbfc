"""SchemaService and TopicFeatures: namespace policies decide strategy, updates, validation."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest

from emubroker.config import BrokerConfig
from emubroker.metadata import MemoryMetadataStore
from emubroker.naming import TopicName
from emubroker.schemas import CompatibilityStrategy, SchemaData, SchemaRegistry, SchemaService
from emubroker.topics.features import TopicFeatures
from protocol import commands as c
from protocol.clock import FakeClock
from protocol.errors import IncompatibleSchemaError, ServerError

pytestmark = pytest.mark.anyio

S = CompatibilityStrategy
TOPIC = TopicName.parse("persistent://public/default/svc")
POLICIES = "/admin/policies/public/default"


def record(*fields: dict[str, Any]) -> SchemaData:
    doc = {"type": "record", "name": "R", "fields": list(fields)}
    return SchemaData(c.SchemaType.AVRO, json.dumps(doc).encode())


V1 = record({"name": "a", "type": "int"})
V2 = record({"name": "a", "type": "int"}, {"name": "b", "type": "int"})  # b has no default


def wire(schema: SchemaData) -> c.Schema:
    return c.Schema(name="R", schema_data=schema.data, type=schema.type)


@pytest.fixture
async def store() -> AsyncIterator[MemoryMetadataStore]:
    async with MemoryMetadataStore() as s:
        yield s


async def policies(store: MemoryMetadataStore, **fields: Any) -> None:
    await store.put(POLICIES, msgspec.json.encode({"bundles": {"numBundles": 4}, **fields}))


def service(store: MemoryMetadataStore, **config: Any) -> SchemaService:
    features = TopicFeatures(BrokerConfig(**config), store)
    return SchemaService(SchemaRegistry(store, FakeClock()), features)


async def test_strategy_comes_from_the_namespace_then_the_broker(
    store: MemoryMetadataStore,
) -> None:
    features = TopicFeatures(BrokerConfig(schemaCompatibilityStrategy="FULL"), store)
    assert (await features.schema_policy(TOPIC)).strategy is S.FULL  # no policies node
    await policies(store, schema_compatibility_strategy="UNDEFINED")
    assert (await features.schema_policy(TOPIC)).strategy is S.FULL
    await policies(store, schema_auto_update_compatibility_strategy="BackwardTransitive")
    assert (await features.schema_policy(TOPIC)).strategy is S.BACKWARD_TRANSITIVE
    await policies(
        store,
        schema_compatibility_strategy="FORWARD",
        schema_auto_update_compatibility_strategy="Full",
    )
    assert (await features.schema_policy(TOPIC)).strategy is S.FORWARD
    undefined = TopicFeatures(BrokerConfig(schemaCompatibilityStrategy="UNDEFINED"))
    assert (await undefined.schema_policy(TOPIC)).strategy is S.ALWAYS_COMPATIBLE


async def test_switches_and_their_fallbacks(store: MemoryMetadataStore) -> None:
    features = TopicFeatures(
        BrokerConfig(isAllowAutoUpdateSchemaEnabled=False, brokerDeduplicationEnabled=True), store
    )
    policy = await features.schema_policy(TOPIC)
    assert policy.allow_update is False
    assert policy.validation_enforced is False
    assert await features.dedup_enabled(TOPIC) is True
    await policies(
        store,
        is_allow_auto_update_schema=True,
        schema_validation_enforced=True,
        deduplicationEnabled=False,
    )
    policy = await features.schema_policy(TOPIC)
    assert (policy.allow_update, policy.validation_enforced) == (True, True)
    assert await features.dedup_enabled(TOPIC) is False
    await store.put(POLICIES, b"{not json")  # unreadable: the broker's values
    assert await features.dedup_enabled(TOPIC) is True


async def test_register_and_compatibility_follow_the_policy(store: MemoryMetadataStore) -> None:
    schemas = service(store)
    assert await schemas.register(TOPIC, V1, name="R") == 0
    assert await schemas.compatibility(TOPIC, V2) == (False, S.FULL)  # Pulsar's default
    await policies(store, schema_compatibility_strategy="ALWAYS_COMPATIBLE")
    assert await schemas.compatibility(TOPIC, V2) == (True, S.ALWAYS_COMPATIBLE)
    await policies(store, schema_compatibility_strategy="BACKWARD")
    assert await schemas.compatibility(TOPIC, V2) == (False, S.BACKWARD)
    assert await schemas.compatibility(TOPIC, V1) == (True, S.BACKWARD)  # already registered
    with pytest.raises(IncompatibleSchemaError):
        await schemas.register(TOPIC, V2)
    assert await schemas.producer_schema(TOPIC, wire(V1)) == bytes(8)
    assert await schemas.producer_schema(TOPIC, None) is None


async def test_consumers_on_idle_and_active_topics(store: MemoryMetadataStore) -> None:
    schemas = service(store, schemaCompatibilityStrategy="FULL")
    await schemas.consumer_schema(TOPIC, None, topic_active=True)  # bytes: always fine
    with pytest.raises(IncompatibleSchemaError, match="empty\\(BYTES\\) schema"):
        await schemas.consumer_schema(TOPIC, wire(V1), topic_active=True)
    await schemas.consumer_schema(TOPIC, wire(V1), topic_active=False)  # idle: adopted
    assert (await schemas.registry.get(TOPIC)) is not None
    with pytest.raises(IncompatibleSchemaError):
        await schemas.consumer_schema(TOPIC, wire(V2), topic_active=True)  # cannot read V1


async def test_get_schema_answers(store: MemoryMetadataStore) -> None:
    schemas = service(store)
    missing = await schemas.get_schema(c.GetSchema(request_id=1, topic=str(TOPIC)), TOPIC)
    assert missing.error_code is ServerError.TopicNotFound
    await schemas.register(TOPIC, SchemaData(c.SchemaType.STRING, b"", {"k": "v"}))
    found = await schemas.get_schema(c.GetSchema(request_id=2, topic=str(TOPIC)), TOPIC)
    assert found.schema == c.Schema(
        name="public/default/svc",
        schema_data=b"",
        type=c.SchemaType.STRING,
        properties=(c.KeyValue(key="k", value="v"),),
    )
    assert found.schema_version == bytes(8)


async def test_get_or_create_takes_wire_schemas(store: MemoryMetadataStore) -> None:
    schemas = service(store, schemaCompatibilityStrategy="ALWAYS_COMPATIBLE")
    assert await schemas.get_or_create(TOPIC, wire(V1)) == bytes(8)
    assert await schemas.get_or_create(TOPIC, wire(V2)) == (1).to_bytes(8, "big")
    stored = await schemas.registry.get(TOPIC, 1)
    assert stored is not None
    assert stored.name == "R"
