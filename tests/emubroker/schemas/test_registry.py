"""SchemaRegistry over the in-memory metadata store: versions, checks, deletes, races."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio
import msgspec
import pytest

from emubroker.metadata import MemoryMetadataStore
from emubroker.naming import TopicName
from emubroker.schemas import (
    CompatibilityStrategy,
    SchemaData,
    SchemaRegistry,
    schema_id,
    version_from_wire,
    version_to_wire,
)
from protocol.clock import FakeClock
from protocol.commands import SchemaType
from protocol.errors import IncompatibleSchemaError

pytestmark = pytest.mark.anyio

S = CompatibilityStrategy
TOPIC = TopicName.parse("persistent://public/default/orders")


def avro(*fields: dict[str, object]) -> SchemaData:
    doc = {"type": "record", "name": "Order", "fields": list(fields)}
    return SchemaData(SchemaType.AVRO, json.dumps(doc).encode())


ID = {"name": "id", "type": "long"}
V1 = avro(ID)
V2 = avro(ID, {"name": "note", "type": ["null", "string"], "default": None})
NO_DEFAULT = avro(ID, {"name": "qty", "type": "int"})


@pytest.fixture
async def store() -> AsyncIterator[MemoryMetadataStore]:
    async with MemoryMetadataStore() as s:
        yield s


@pytest.fixture
def registry(store: MemoryMetadataStore) -> SchemaRegistry:
    return SchemaRegistry(store, FakeClock())


def test_wire_versions_are_8_byte_big_endian() -> None:
    assert version_to_wire(0) == bytes(8)
    assert version_to_wire(258) == b"\x00" * 6 + b"\x01\x02"
    assert version_from_wire(version_to_wire(7)) == 7
    with pytest.raises(ValueError, match="8 bytes"):
        version_from_wire(b"\x01")


def test_schema_id_ignores_domain_and_partition() -> None:
    assert schema_id(TOPIC) == "public/default/orders"
    assert schema_id(TopicName.parse("non-persistent://public/default/orders")) == schema_id(TOPIC)
    assert schema_id(TOPIC.partition(3)) == schema_id(TOPIC)


async def test_versions_count_from_zero_and_equal_schemas_reuse_theirs(
    registry: SchemaRegistry, store: MemoryMetadataStore
) -> None:
    assert await registry.get(TOPIC) is None
    assert await registry.get_or_create(TOPIC, V1, S.BACKWARD, name="orders") == 0
    relaid = SchemaData(SchemaType.AVRO, json.dumps(json.loads(V1.data), indent=2).encode())
    assert await registry.get_or_create(TOPIC, relaid, S.BACKWARD) == 0
    assert await registry.get_or_create(TOPIC.partition(1), V2, S.BACKWARD) == 1
    latest = await registry.get(TOPIC)
    assert latest is not None
    assert latest.version == 1
    assert latest.data == V2.data
    first = await registry.get(TOPIC, 0)
    assert first is not None
    assert first.name == "orders"
    assert first.type is SchemaType.AVRO
    assert await registry.get(TOPIC, 5) is None
    assert [v.version for v in await registry.versions(TOPIC)] == [0, 1]
    assert await registry.version_of(TOPIC, V1) == 0
    # Stored where Pulsar keeps schemas, as JSON.
    node = await store.get("/schemas/public/default/orders")
    assert node is not None
    assert len(json.loads(node.value)["versions"]) == 2


async def test_an_incompatible_schema_is_refused_and_nothing_is_stored(
    registry: SchemaRegistry,
) -> None:
    await registry.get_or_create(TOPIC, V1, S.BACKWARD)
    with pytest.raises(IncompatibleSchemaError, match="BACKWARD"):
        await registry.get_or_create(TOPIC, NO_DEFAULT, S.BACKWARD)
    assert [v.version for v in await registry.versions(TOPIC)] == [0]
    # The same change passes where the strategy allows it.
    assert await registry.get_or_create(TOPIC, NO_DEFAULT, S.FORWARD) == 1


async def test_transitive_strategy_checks_all_live_versions(registry: SchemaRegistry) -> None:
    await registry.get_or_create(TOPIC, V1, S.ALWAYS_COMPATIBLE)
    await registry.get_or_create(
        TOPIC, avro(ID, {"name": "qty", "type": "int", "default": 1}), S.FULL
    )
    with pytest.raises(IncompatibleSchemaError):
        await registry.get_or_create(TOPIC, NO_DEFAULT, S.BACKWARD_TRANSITIVE)
    assert await registry.get_or_create(TOPIC, NO_DEFAULT, S.BACKWARD) == 2


async def test_auto_update_disabled_accepts_only_known_schemas(registry: SchemaRegistry) -> None:
    await registry.get_or_create(TOPIC, V1, S.FULL)
    assert await registry.get_or_create(TOPIC, V1, S.FULL, allow_update=False) == 0
    with pytest.raises(IncompatibleSchemaError, match="auto updating is disabled"):
        await registry.get_or_create(TOPIC, V2, S.FULL, allow_update=False)


async def test_soft_delete_starts_a_fresh_unchecked_history(registry: SchemaRegistry) -> None:
    await registry.get_or_create(TOPIC, V1, S.BACKWARD)
    assert await registry.delete(TOPIC) == 1  # the marker is a version too
    assert await registry.get(TOPIC) is None
    assert await registry.get(TOPIC, 1) is None
    assert await registry.delete(TOPIC) is None  # nothing left to delete
    # Not checked against the deleted history, and numbered after the marker.
    assert await registry.get_or_create(TOPIC, NO_DEFAULT, S.ALWAYS_INCOMPATIBLE) == 2
    assert [v.version for v in await registry.versions(TOPIC)] == [2]
    # A version before the deletion is gone too (GET_SCHEMA and REST answer "not found").
    assert await registry.get(TOPIC, 0) is None
    assert await registry.get(TOPIC, 2) is not None


async def test_forced_delete_restarts_numbering(registry: SchemaRegistry) -> None:
    await registry.get_or_create(TOPIC, V1, S.BACKWARD)
    await registry.get_or_create(TOPIC, V2, S.BACKWARD)
    assert await registry.delete(TOPIC, force=True) is None
    assert await registry.delete(TOPIC, force=True) is None  # idempotent
    assert await registry.get_or_create(TOPIC, NO_DEFAULT, S.BACKWARD) == 0


async def test_consumer_check(registry: SchemaRegistry) -> None:
    with pytest.raises(IncompatibleSchemaError, match="does not have schema"):
        await registry.check_consumer(TOPIC, V1, S.BACKWARD)
    await registry.get_or_create(TOPIC, V2, S.BACKWARD)
    await registry.check_consumer(TOPIC, V2, S.BACKWARD)  # a registered schema
    await registry.check_consumer(TOPIC, V1, S.BACKWARD)  # can read V2 data (note skipped)
    with pytest.raises(IncompatibleSchemaError):
        await registry.check_consumer(TOPIC, NO_DEFAULT, S.BACKWARD)


async def test_concurrent_registrations_get_distinct_versions(
    registry: SchemaRegistry, store: MemoryMetadataStore
) -> None:
    other = SchemaRegistry(store, FakeClock())  # e.g. another broker on the same store
    schemas = [avro(ID, {"name": f"f{i}", "type": "int", "default": i}) for i in range(6)]
    results: dict[int, int] = {}

    async def register(i: int) -> None:
        reg = registry if i % 2 else other
        results[i] = await reg.get_or_create(TOPIC, schemas[i], S.ALWAYS_COMPATIBLE)

    async with anyio.create_task_group() as tg:
        for i in range(len(schemas)):
            tg.start_soon(register, i)
    assert sorted(results.values()) == list(range(len(schemas)))
    for i, version in results.items():
        stored = await registry.get(TOPIC, version)
        assert stored is not None
        assert stored.data == schemas[i].data


async def test_timestamps_come_from_the_clock(store: MemoryMetadataStore) -> None:
    clock = FakeClock()
    await clock.advance(12.5)
    reg = SchemaRegistry(store, clock)
    await reg.get_or_create(TOPIC, V1, S.FULL)
    stored = await reg.get(TOPIC)
    assert stored is not None
    assert stored.timestamp == clock.wall_ms()
    assert msgspec.json.decode(msgspec.json.encode(stored), type=type(stored)) == stored
