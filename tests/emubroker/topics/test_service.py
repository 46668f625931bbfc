from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from emubroker.metadata import MemoryMetadataStore
from emubroker.naming import NamespaceName, TopicName
from emubroker.storage import MemoryBackend
from emubroker.topics import TopicService, TopicSettings
from protocol.clock import FakeClock
from protocol.commands import AckType, SubType, TopicsMode
from protocol.errors import NotAllowedError, ServiceNotReadyError, TopicNotFoundError
from storage_stub.ledger import LedgerStore
from tests.emubroker.topics.helpers import (
    KNOWN_NAMESPACES,
    FakeConsumerSink,
    add_producer,
    mid,
    open_service,
    publish,
    settle,
    subscribe,
    topic_name,
)

pytestmark = pytest.mark.anyio


async def test_unknown_namespace_is_topic_not_found() -> None:
    async with open_service() as service:
        name = TopicName.parse("persistent://tenant/ns/t")
        with pytest.raises(TopicNotFoundError, match="Namespace tenant/ns"):
            await service.get_topic(name)
        with pytest.raises(TopicNotFoundError):
            await service.partitioned_metadata(name)
        with pytest.raises(TopicNotFoundError):
            service.topics_of_namespace(NamespaceName("tenant", "ns"), TopicsMode.ALL)


async def test_auto_creation_off_or_create_false_refuse_missing_topics() -> None:
    async with open_service(allow_auto_topic_creation=False) as service:
        with pytest.raises(TopicNotFoundError, match="does not exist"):
            await service.get_topic(topic_name())
        await service.create_partitioned_topic(topic_name("p"), 2)
        # Partitions of a partitioned topic exist even with auto-creation off.
        await service.get_topic(topic_name("p-partition-1"))
        with pytest.raises(TopicNotFoundError):
            await service.get_topic(topic_name("p-partition-2"))
    async with open_service() as service:
        with pytest.raises(TopicNotFoundError):
            await service.get_topic(topic_name(), create=False)
        topic = await service.get_topic(topic_name())
        assert await service.get_topic(topic_name(), create=False) is topic
        await service.create_partitioned_topic(topic_name("p"), 2)
        with pytest.raises(TopicNotFoundError):
            await service.get_topic(topic_name("p-partition-2"))  # beyond the partitions


async def test_partitioned_metadata() -> None:
    store = MemoryMetadataStore()
    service = TopicService(
        config=TopicSettings(),
        clock=FakeClock(),
        ledgers=MemoryBackend(LedgerStore()),
        namespaces=KNOWN_NAMESPACES.__contains__,
        metadata=store,
    )
    async with store, service.running():
        parent = topic_name("p")
        assert await service.partitioned_metadata(topic_name("plain")) == 0
        await service.create_partitioned_topic(parent, 3)
        assert await service.partitioned_metadata(parent) == 3
        assert await service.partitioned_metadata(parent.partition(1)) == 0
        with pytest.raises(NotAllowedError, match="already exists"):
            await service.create_partitioned_topic(parent, 3)
        with pytest.raises(NotAllowedError, match="partition"):
            await service.get_topic(parent)
        stored = await store.get("/admin/partitioned-topics/public/default/persistent/p")
        assert stored is not None
        assert msgspec.json.decode(stored.value)["partitions"] == 3


async def test_partitioned_metadata_of_an_odd_name_is_stored_encoded_and_read_back() -> None:
    # Any local name Pulsar accepts (a NUL byte here) is one URL-encoded path segment.
    store = MemoryMetadataStore()
    odd = TopicName.parse("persistent://public/default/a\x00b %")

    def service() -> TopicService:
        return TopicService(
            config=TopicSettings(),
            clock=FakeClock(),
            ledgers=MemoryBackend(LedgerStore()),
            namespaces=KNOWN_NAMESPACES.__contains__,
            metadata=store,
        )

    async with store:
        async with service().running() as first:
            await first.create_partitioned_topic(odd, 2)
        assert await store.exists("/admin/partitioned-topics/public/default/persistent/a%00b%20%25")
        async with service().running() as second:
            assert await second.partitioned_metadata(odd) == 2


async def test_partitioned_auto_creation_type() -> None:
    async with open_service(
        allow_auto_topic_creation_type="partitioned", default_num_partitions=2
    ) as service:
        assert await service.partitioned_metadata(topic_name("auto")) == 2
        assert await service.partitioned_metadata(topic_name("auto")) == 2


async def test_topics_of_namespace_lists_partitions_and_domains() -> None:
    async with open_service() as service:
        await service.get_topic(topic_name("a"))
        await service.get_topic(topic_name("b", "non-persistent"))
        await service.create_partitioned_topic(topic_name("p"), 2)
        await service.get_topic(TopicName.parse("persistent://public/default-2/other"))
        ns = NamespaceName("public", "default")
        assert service.topics_of_namespace(ns, TopicsMode.PERSISTENT) == [
            "persistent://public/default/a",
            "persistent://public/default/p-partition-0",
            "persistent://public/default/p-partition-1",
        ]
        assert service.topics_of_namespace(ns, TopicsMode.NON_PERSISTENT) == [
            "non-persistent://public/default/b"
        ]
        assert len(service.topics_of_namespace(ns, TopicsMode.ALL)) == 4


async def test_statistics_count_topics_handlers_and_traffic() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink, sub_type=SubType.SHARED)
        consumer.flow(10)
        await publish(topic, producer, b"abc", batch=3)
        await anyio.wait_all_tasks_blocked()
        stats = service.statistics()
        assert (stats.topics_count, stats.producers, stats.consumers) == (1, 1, 1)
        t = stats.topics[0]
        assert t.name == "persistent://public/default/t"
        assert t.namespace == "public/default"
        assert (t.msg_in, t.msg_out, t.entries, t.backlog) == (3, 3, 1, 1)
        assert t.bytes_in > 3
        assert t.bytes_out >= t.bytes_in
        assert t.subscriptions[0].type == "Shared"


async def test_closed_service_refuses_work_and_must_be_started() -> None:
    service = TopicService(
        config=TopicSettings(),
        clock=FakeClock(),
        ledgers=MemoryBackend(LedgerStore()),
        namespaces=KNOWN_NAMESPACES.__contains__,
    )
    with pytest.raises(RuntimeError, match="not running"):
        await service.get_topic(topic_name())
    async with service.running():
        sink = FakeConsumerSink()
        await subscribe(await service.get_topic(topic_name()), sink)
    with pytest.raises(ServiceNotReadyError):
        await service.get_topic(topic_name("other"))
    assert sink.closed == []  # shutdown closes quietly: the connections go as well


async def test_run_in_a_task_group() -> None:
    service = TopicService(
        config=TopicSettings(),
        clock=FakeClock(),
        ledgers=MemoryBackend(LedgerStore()),
        namespaces=KNOWN_NAMESPACES.__contains__,
    )
    async with anyio.create_task_group() as tg:
        await tg.start(service.run)
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        consumer.flow(1)
        await publish(topic, producer)
        await anyio.wait_all_tasks_blocked()
        assert sink.entry_ids == [0]
        await service.aclose()


class _DurableMemory(MemoryBackend):
    """A backend that answers at once and says its entries outlive the broker (a file would)."""

    durable = True


async def test_a_durable_backend_is_persisted_even_when_it_answers_at_once() -> None:
    # Whether ledger lists and cursors are persisted is what the backend states, never a
    # guess from which operations it implements.
    ledgers, store = LedgerStore(), MemoryMetadataStore()

    def service() -> TopicService:
        return TopicService(
            config=TopicSettings(),
            clock=FakeClock(),
            ledgers=_DurableMemory(ledgers),
            namespaces=KNOWN_NAMESPACES.__contains__,
            metadata=store,
        )

    async with store:
        async with service().running() as first:
            topic = await first.get_topic(topic_name())
            consumer = await subscribe(topic, FakeConsumerSink())
            producer = await add_producer(topic)
            assert not topic.ledger.nowait  # a ledger list to persist: adds are awaited
            for _ in range(3):
                await publish(topic, producer)
            consumer.ack(AckType.CUMULATIVE, [mid(*topic.ledger.position(0))])
        assert await store.get("/managed-ledgers/public/default/persistent/t") is not None
        async with service().running() as second:
            reopened = await second.get_topic(topic_name(), create=False)
            assert reopened.ledger.count == 3
            sub = reopened.subscription("sub")
            assert sub is not None
            assert sub.cursor.mark_delete == 0


async def test_each_topic_s_load_sample_matches_its_statistics() -> None:
    # The load report samples every topic each minute: the sample is the stats' counters.
    async with open_service() as service:
        persistent = await service.get_topic(topic_name("p"))
        producer = await add_producer(persistent)
        await publish(persistent, producer, b"abc")
        consumer = await subscribe(persistent, FakeConsumerSink())
        consumer.flow(10)
        await settle()
        await add_producer(await service.get_topic(topic_name("np", "non-persistent")))

        def counted(t: Any) -> tuple[str, int, int, int, int, int, int]:
            return (
                str(t.name),
                t.msg_in,
                t.bytes_in,
                t.msg_out,
                t.bytes_out,
                t.producers,
                t.consumers,
            )

        loads = [counted(t) for t in service.loads()]
        assert loads == [counted(t) for t in service.statistics().topics]
        _, msg_in, bytes_in, msg_out, bytes_out, producers, consumers = loads[1]
        assert (msg_in, msg_out, producers, consumers) == (1, 1, 1, 1)  # sent and delivered
        assert bytes_in > 0
        assert bytes_out > 0
