"""A topic's properties where Pulsar keeps them, across restarts and new owners.

A non-partitioned topic's live in its managed ledger's stored info (Pulsar's
``ManagedLedgerInfo.properties``); a partitioned topic's in its ``PartitionedTopicMetadata``,
which every broker of a cluster reads and changes.
"""

from __future__ import annotations

import anyio
import msgspec
import pytest

from emubroker.metadata import MemoryMetadataStore, MemoryMetadataTree
from emubroker.metadata.paths import managed_ledger_path, partitioned_topic_path
from emubroker.metadata.store import MetadataStore
from emubroker.storage import BookieBackend, MemoryBackend
from emubroker.topics import TopicService
from emubroker.topics.handles import TopicHandle
from emubroker.topics.ml_meta import decode_ledger_info
from emubroker.topics.settings import TopicSettings
from emubroker.topics.topic import Topic
from protocol.clock import FakeClock
from protocol.errors import TopicNotFoundError
from storage_stub.ledger import LedgerStore
from storage_stub.server import open_stub_server
from tests.emubroker.topics.helpers import KNOWN_NAMESPACES, add_producer, open_service, publish
from tests.emubroker.topics.helpers import topic_name as name_of

pytestmark = pytest.mark.anyio


def _persistent(topic: TopicHandle) -> Topic:
    persistent = topic.as_persistent()
    assert persistent is not None
    return persistent


def _service(
    clock: FakeClock, metadata: MetadataStore, ledgers: BookieBackend | None = None
) -> TopicService:
    return TopicService(
        config=TopicSettings(),
        clock=clock,
        ledgers=ledgers or MemoryBackend(LedgerStore()),
        namespaces=KNOWN_NAMESPACES.__contains__,
        metadata=metadata,
    )


async def test_managed_ledger_properties_outlive_a_new_owner_over_the_bookie() -> None:
    clock = FakeClock()
    name = name_of()
    async with (
        open_stub_server(clock=clock) as stub,
        stub.open_local_client() as bookie,
        MemoryMetadataStore() as metadata,
    ):
        first = _service(clock, metadata, BookieBackend(bookie))
        async with first.running():
            topic = _persistent(await first.get_topic(name))
            await topic.ledger.set_properties({"a": "1", "b": "2"})
            await topic.ledger.delete_property("a")
            await topic.ledger.set_properties({"c": "3"})
            producer = await add_producer(topic)
            await publish(topic, producer)  # the ledger list is written again: they stay
        stored = await metadata.get(managed_ledger_path(name))
        assert stored is not None
        assert decode_ledger_info(stored.value).properties == {"b": "2", "c": "3"}
        second = _service(clock, metadata, BookieBackend(bookie))  # another broker, or a restart
        async with second.running():
            topic = _persistent(await second.get_topic(name, create=False))
            assert topic.ledger.properties == {"b": "2", "c": "3"}


async def test_managed_ledger_properties_in_memory_mode_outlive_an_unload() -> None:
    async with open_service() as service:
        topic = _persistent(await service.get_topic(name_of()))
        await topic.ledger.set_properties({"a": "1"})
        await service.unload(name_of())
        again = _persistent(await service.get_topic(name_of()))
        assert again is not topic
        assert again.ledger.properties == {"a": "1"}


async def test_partitioned_properties_are_stored_kept_on_growth_and_seen_by_every_broker() -> None:
    clock = FakeClock()
    parent = name_of("p")
    path = partitioned_topic_path(parent)
    tree = MemoryMetadataTree()
    async with tree.open_session() as one, tree.open_session() as two:
        first, second = _service(clock, one), _service(clock, two)
        async with first.running(), second.running():
            await first.create_partitioned_topic(parent, 2, {"a": "1"})
            stored = await one.get(path)
            assert stored is not None
            assert msgspec.json.decode(stored.value) == {
                "partitions": 2,
                "deleted": False,
                "properties": {"a": "1"},
            }
            # Changes through either broker read the store, so none is lost.
            await second.update_partitioned_properties(parent, {"b": "2"})
            await first.update_partitioned_properties(parent, {"c": "3"})
            await second.remove_partitioned_property(parent, "a")
            await first.update_partitioned_topic(parent, 3)
            stored = await one.get(path)
            assert stored is not None
            assert msgspec.json.decode(stored.value)["properties"] == {"b": "2", "c": "3"}
            assert second.partitioned_properties(parent) == {"b": "2", "c": "3"}
            await anyio.wait_all_tasks_blocked()  # the watch brings the others' changes
            assert first.partitioned_properties(parent) == {"b": "2", "c": "3"}
            assert first.partitions_of(parent) == 3
            assert first.partitioned_properties(parent.partition(0)) is None
        restarted = _service(clock, one)
        async with restarted.running():
            assert restarted.partitioned_properties(parent) == {"b": "2", "c": "3"}


async def test_partitioned_topics_without_properties_store_none_until_some_are_given() -> None:
    parent = name_of("p")
    async with MemoryMetadataStore() as metadata:
        service = _service(FakeClock(), metadata)
        async with service.running():
            await service.create_partitioned_topic(parent, 2)
            stored = await metadata.get(partitioned_topic_path(parent))
            assert stored is not None
            assert msgspec.json.decode(stored.value) == {"partitions": 2, "deleted": False}
            await service.remove_partitioned_property(parent, "k")
            assert service.partitioned_properties(parent) is None
            await service.update_partitioned_properties(parent, {"k": "v"})
            assert service.partitioned_properties(parent) == {"k": "v"}
            await service.delete_partitioned_topic(parent)
            with pytest.raises(TopicNotFoundError):
                await service.update_partitioned_properties(parent, {"k": "v"})
            await anyio.wait_all_tasks_blocked()  # the watch has seen every change
            assert service.partitioned_properties(parent) is None


async def test_partitioned_properties_without_a_metadata_store() -> None:
    parent = name_of("p")
    async with open_service() as service:
        await service.create_partitioned_topic(parent, 1, {"a": "1"})
        await service.update_partitioned_properties(parent, {"b": "2"})
        await service.remove_partitioned_property(parent, "a")
        await service.update_partitioned_topic(parent, 2)
        assert service.partitioned_properties(parent) == {"b": "2"}
        with pytest.raises(TopicNotFoundError):
            await service.remove_partitioned_property(name_of("plain"), "a")
