from __future__ import annotations

import anyio
import pytest

from emubroker.topics import Topic
from protocol.commands import AccessMode
from protocol.errors import ProducerBusyError, ProducerFencedError, ServiceNotReadyError
from tests.emubroker.topics.helpers import (
    FakeConsumerSink,
    FakeProducerSink,
    add_producer,
    make_entry,
    open_service,
    publish,
    settle,
    subscribe,
    topic_name,
)

pytestmark = pytest.mark.anyio


async def test_entry_ids_start_at_zero_step_by_one_and_match_last_message_id() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        assert isinstance(topic, Topic)
        ledger, entry, batch_index = topic.last_message_id()
        assert ledger > 0
        assert entry == -1
        assert batch_index == -1
        producer = await add_producer(topic)
        for i in range(5):
            ledger_id, entry_id = await publish(topic, producer, b"m%d" % i, sequence_id=i)
            assert (ledger_id, entry_id) == (ledger, i)
            assert topic.last_message_id() == (ledger, i, -1)


async def test_last_message_id_of_a_batch_carries_its_last_index() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        ledger_id, entry_id = await publish(topic, producer, batch=5)
        assert topic.last_message_id() == (ledger_id, entry_id, 4)


async def test_entries_are_stored_as_payload_sections_in_the_ledger_store() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        assert isinstance(topic, Topic)
        producer = await add_producer(topic)
        ledger_id, entry_id = await publish(topic, producer, b"hello")
        section = topic.ledger.read(0, 0)[2][0]
        assert section.startswith(b"\x0e\x01")
        assert section.endswith(b"hello")
        assert (ledger_id, entry_id) == (topic.ledger.current_ledger_id, 0)


async def test_generated_producer_names_are_unique_and_given_names_kept() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        a = await add_producer(topic, 1)
        b = await add_producer(topic, 2)
        assert a.producer_name == "standalone-0-0"
        assert b.producer_name == "standalone-0-1"
        assert a.last_sequence_id == -1
        # A reconnecting producer brings back the generated name.
        await topic.remove_producer(a)
        again = await add_producer(topic, 1, producer_name="standalone-0-0", epoch=1)
        assert again.producer_name == "standalone-0-0"


async def test_producer_name_in_use_is_busy_unless_successor_on_same_sink() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        sink = FakeProducerSink()
        first = await add_producer(topic, 1, producer_name="me", user_provided_name=True, sink=sink)
        with pytest.raises(ProducerBusyError, match="already connected"):
            await add_producer(topic, 2, producer_name="me", user_provided_name=True)
        successor = await add_producer(
            topic, 1, producer_name="me", user_provided_name=True, sink=sink, epoch=1
        )
        assert first.closed
        assert not successor.closed


async def test_second_exclusive_producer_is_fenced_and_epochs_count_up() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        first = await add_producer(topic, 1, access_mode=AccessMode.EXCLUSIVE)
        assert first.topic_epoch == 0
        with pytest.raises(ProducerFencedError):
            await add_producer(topic, 2, access_mode=AccessMode.EXCLUSIVE)
        with pytest.raises(ProducerBusyError, match="exclusive"):
            await add_producer(topic, 3)
        await topic.remove_producer(first)
        second = await add_producer(topic, 2, access_mode=AccessMode.EXCLUSIVE)
        assert second.topic_epoch == 1
        # The first producer comes back with its old epoch: it was fenced meanwhile.
        await topic.remove_producer(second)
        with pytest.raises(ProducerFencedError, match="fenced"):
            await add_producer(topic, 1, access_mode=AccessMode.EXCLUSIVE, topic_epoch=0)


async def test_exclusive_with_fencing_closes_the_others() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        sink = FakeProducerSink()
        shared = await add_producer(topic, 1, sink=sink)
        fencer = await add_producer(topic, 2, access_mode=AccessMode.EXCLUSIVE_WITH_FENCING)
        assert sink.closed == [1]
        assert shared.closed
        assert fencer.topic_epoch == 0


async def test_wait_for_exclusive_waits_until_the_topic_is_free() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        holder = await add_producer(topic, 1, access_mode=AccessMode.EXCLUSIVE)
        waits: list[str] = []
        got = []

        async def waiter() -> None:
            got.append(
                await add_producer(
                    topic,
                    2,
                    access_mode=AccessMode.WAIT_FOR_EXCLUSIVE,
                    on_waiting=lambda: waits.append("waiting"),
                )
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            assert waits == ["waiting"]
            assert got == []
            await topic.remove_producer(holder)
        assert got[0].topic_epoch == 1


async def test_wait_for_exclusive_can_be_cancelled_and_fails_retriably_on_unload() -> None:
    async with open_service() as service:
        name = topic_name()
        topic = await service.get_topic(name)
        await add_producer(topic, 1, access_mode=AccessMode.EXCLUSIVE)
        errors: list[ServiceNotReadyError] = []

        async def waiter(producer_id: int) -> None:
            try:
                await add_producer(topic, producer_id, access_mode=AccessMode.WAIT_FOR_EXCLUSIVE)
            except ServiceNotReadyError as exc:
                errors.append(exc)

        async with anyio.create_task_group() as cancelled:
            cancelled.start_soon(waiter, 2)
            await anyio.wait_all_tasks_blocked()
            cancelled.cancel_scope.cancel()  # the client gave up: nothing may stay registered
        assert topic.producer_count == 1
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter, 3)
            await anyio.wait_all_tasks_blocked()
            await service.unload(name)
        assert len(errors) == 1
        assert errors[0].retriable
        reloaded = await service.get_topic(name)
        again = await add_producer(reloaded, 4, access_mode=AccessMode.EXCLUSIVE)
        assert again.topic_epoch == 1
        assert reloaded.producer_count == 1


@pytest.mark.parametrize("domain", ["persistent", "non-persistent"])
async def test_publish_many_equals_publishing_one_by_one(domain: str) -> None:
    entries = [make_entry(b"m%d" % i, sequence_id=i) for i in range(4)]
    async with open_service() as service:
        one = await service.get_topic(topic_name("one", domain))
        many = await service.get_topic(topic_name("many", domain))
        sinks = {}
        for topic in (one, many):
            sinks[topic] = FakeConsumerSink()
            consumer = await subscribe(topic, sinks[topic])
            consumer.flow(100)
        await settle()
        p1 = await add_producer(one)
        p2 = await add_producer(many)
        singles = [await one.publish(p1, *entry) for entry in entries]
        bulk = await many.publish_many(p2, entries[:1])
        bulk += many.publish_many_nowait(p2, entries[1:])
        assert [e for _, e in bulk] == [e for _, e in singles] == [0, 1, 2, 3]
        await settle()
        got = [(m.entry_id, m.section) for m in sinks[many].messages]
        assert got == [(m.entry_id, m.section) for m in sinks[one].messages]
        assert len(got) == 4
        assert many.stats().msg_in == one.stats().msg_in == 4
        assert many.stats().bytes_in == one.stats().bytes_in


async def test_published_entries_are_dispatched_without_waiting_for_a_task() -> None:
    # A read's SENDs, their receipts and their MESSAGEs leave in one write: the publish path
    # runs the dispatch round itself.
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        consumer.flow(10)
        await settle()
        producer = await add_producer(topic)
        topic.publish_many_nowait(producer, [make_entry(b"a"), make_entry(b"b")])
        assert sink.entry_ids == [0, 1]  # no await in between
        assert consumer.permits == 8


async def test_publish_many_to_a_closed_producer_stores_nothing() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        await topic.remove_producer(producer)
        with pytest.raises(ServiceNotReadyError):
            topic.publish_many_nowait(producer, [make_entry(b"a")])
        assert topic.stats().entries == 0
