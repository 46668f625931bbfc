"""Consumer: permits, batches, ack grouping, negative acks, seek, reconnection."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from protocol import commands as c
from protocol.batch import ack_set_of, indexes_of
from protocol.client import Client, Consumer, InitialPosition, MessageId, Producer, SubType
from protocol.clock import FakeClock
from protocol.errors import ConsumerClosedError, LocalProtocolError
from protocol.framing import encode_section_frame
from tests.support.fake_broker import LEDGER, FakeBroker

pytestmark = pytest.mark.anyio

EARLIEST_POS = InitialPosition.EARLIEST


async def setup(
    client: Client, *, batch: bool = False, **options: Any
) -> tuple[Producer, Consumer]:
    producer = await client.create_producer("t", batching_enabled=batch)
    options.setdefault("initial_position", EARLIEST_POS)
    consumer = await client.subscribe("t", "s", **options)
    assert isinstance(producer, Producer)
    assert isinstance(consumer, Consumer)
    await anyio.wait_all_tasks_blocked()
    return producer, consumer


def flows(broker: FakeBroker) -> list[int]:
    return [f.message_permits for f in broker.of_type(c.Flow)]


def acks(broker: FakeBroker) -> list[c.Ack]:
    return broker.of_type(c.Ack)


async def test_subscribe_then_initial_flow_of_the_queue_size(
    client: Client, broker: FakeBroker
) -> None:
    await setup(client, receiver_queue_size=7)
    (subscribe,) = broker.of_type(c.Subscribe)
    assert subscribe.topic == "persistent://public/default/t"
    assert subscribe.subscription == "s"
    assert subscribe.sub_type is SubType.EXCLUSIVE
    assert subscribe.durable is True
    assert subscribe.initial_position is EARLIEST_POS
    assert subscribe.consumer_name  # always sent (spec §7.1)
    assert flows(broker) == [7]
    order = [type(cmd) for _, cmd in broker.received]
    assert order.index(c.Subscribe) < order.index(c.Flow)


async def test_permits_are_refilled_when_half_the_queue_was_consumed(
    client: Client, broker: FakeBroker
) -> None:
    producer, consumer = await setup(client, receiver_queue_size=10)
    for i in range(12):
        await producer.send(b"m%d" % i)
    for _ in range(4):
        await consumer.receive()
    await anyio.wait_all_tasks_blocked()
    assert flows(broker) == [10]  # 4 < 10 / 2: no refill yet
    await consumer.receive()
    await anyio.wait_all_tasks_blocked()
    assert flows(broker) == [10, 5]
    got = [(await consumer.receive()).payload for _ in range(7)]
    assert got == [b"m%d" % i for i in range(5, 12)]  # the refill let the last two through


async def test_batch_is_split_and_counts_one_permit_per_message(
    client: Client, broker: FakeBroker
) -> None:
    producer, consumer = await setup(client, batch=True, receiver_queue_size=6)
    for i in range(3):
        await producer.send_async(b"m%d" % i)
    await producer.flush()
    got = [await consumer.receive() for _ in range(3)]
    assert [m.message_id for m in got] == [MessageId(LEDGER, 0, -1, i, 3) for i in range(3)]
    assert [m.delivery for m in got] == [(LEDGER, 0, i, 0) for i in range(3)]
    await anyio.wait_all_tasks_blocked()
    assert flows(broker) == [6, 3]


async def test_message_ack_set_skips_acked_batch_indexes_and_refunds_permits(
    client: Client, broker: FakeBroker
) -> None:
    producer, consumer = await setup(client, batch=True, receiver_queue_size=4)
    for i in range(4):
        await producer.send_async(b"m%d" % i)
    await producer.flush()
    # Redeliver the entry by hand with indexes 1 and 2 already acknowledged (spec §7.2).
    entry = broker.topics[producer.topic].entries[0]
    frame = encode_section_frame(
        c.Message(
            consumer_id=consumer.consumer_id,
            message_id=c.MessageIdData(ledger_id=LEDGER, entry_id=0),
            redelivery_count=1,
            ack_set=ack_set_of([0, 3], 4),
        ),
        entry.section,
    )
    received = [await consumer.receive() for _ in range(4)]  # the first delivery
    broker.sessions[0].write(frame)
    again = [await consumer.receive() for _ in range(2)]
    assert [m.payload for m in received] == [b"m0", b"m1", b"m2", b"m3"]
    assert [m.payload for m in again] == [b"m0", b"m3"]
    assert [m.redelivery_count for m in again] == [1, 1]
    await anyio.wait_all_tasks_blocked()
    # 4 received first, then 2 received and 2 skipped: all 8 permits come back.
    assert sum(flows(broker)[1:]) == 8


async def test_acks_are_grouped_and_flushed_by_the_clock(
    client: Client, broker: FakeBroker, fake_clock: FakeClock
) -> None:
    producer, consumer = await setup(client)
    for i in range(3):
        await producer.send(b"m%d" % i)
    messages = [await consumer.receive() for _ in range(3)]
    for message in messages:
        consumer.acknowledge(message)
    await anyio.wait_all_tasks_blocked()
    assert acks(broker) == []
    await fake_clock.advance(0.1)
    (ack,) = acks(broker)
    assert ack.ack_type is c.AckType.INDIVIDUAL
    assert [(d.ledger_id, d.entry_id) for d in ack.message_id] == [(LEDGER, i) for i in range(3)]


async def test_acks_are_flushed_at_the_group_size(client: Client, broker: FakeBroker) -> None:
    producer, consumer = await setup(client, ack_group_max=2)
    for i in range(3):
        await producer.send(b"m%d" % i)
    for _ in range(3):
        consumer.acknowledge(await consumer.receive())
    await anyio.wait_all_tasks_blocked()
    assert [len(a.message_id) for a in acks(broker)] == [2]


async def test_pending_acks_are_flushed_on_close(client: Client, broker: FakeBroker) -> None:
    producer, consumer = await setup(client)
    await producer.send(b"m")
    consumer.acknowledge(await consumer.receive())
    await consumer.aclose()
    order = [type(cmd) for _, cmd in broker.received]
    assert order.index(c.Ack) < order.index(c.CloseConsumer)
    with pytest.raises(ConsumerClosedError):
        await consumer.receive()


async def test_batched_entry_is_acked_once_all_its_messages_are(
    client: Client, broker: FakeBroker
) -> None:
    producer, consumer = await setup(client, batch=True, ack_group_time=0)
    for i in range(3):
        await producer.send_async(b"m%d" % i)
    await producer.flush()
    messages = [await consumer.receive() for _ in range(3)]
    consumer.acknowledge(messages[0])
    consumer.acknowledge(messages[2].message_id)
    await anyio.wait_all_tasks_blocked()
    assert acks(broker) == []
    consumer.acknowledge(messages[1])
    await anyio.wait_all_tasks_blocked()
    (ack,) = acks(broker)
    assert [(d.entry_id, d.ack_set) for d in ack.message_id] == [(0, ())]


async def test_batch_index_ack_sends_the_outstanding_bitmap(
    client: Client, broker: FakeBroker
) -> None:
    producer, consumer = await setup(
        client, batch=True, ack_group_time=0, batch_index_ack_enabled=True
    )
    for i in range(3):
        await producer.send_async(b"m%d" % i)
    await producer.flush()
    messages = [await consumer.receive() for _ in range(3)]
    consumer.acknowledge(messages[1])
    await anyio.wait_all_tasks_blocked()
    (ack,) = acks(broker)
    (data,) = ack.message_id
    assert indexes_of(data.ack_set, 3) == {0, 2}


async def test_cumulative_ack(client: Client, broker: FakeBroker, fake_clock: FakeClock) -> None:
    producer, consumer = await setup(client, batch=True)
    for i in range(3):
        await producer.send(b"m%d" % i)  # three batches of one
    for i in range(3):
        await producer.send_async(b"n%d" % i)  # one batch of three
    await producer.flush()
    messages = [await consumer.receive() for _ in range(6)]
    consumer.acknowledge_cumulative(messages[1])
    consumer.acknowledge_cumulative(messages[0])  # behind: ignored
    await fake_clock.advance(0.1)
    consumer.acknowledge_cumulative(messages[4])  # middle of entry 3: acks entry 2 (spec §7.3)
    await fake_clock.advance(0.1)
    consumer.acknowledge_cumulative(messages[5])
    await fake_clock.advance(0.1)
    assert [(a.ack_type, a.message_id[0].entry_id) for a in acks(broker)] == [
        (c.AckType.CUMULATIVE, 1),
        (c.AckType.CUMULATIVE, 2),
        (c.AckType.CUMULATIVE, 3),
    ]


async def test_cumulative_ack_is_refused_on_shared(client: Client) -> None:
    producer, consumer = await setup(client, sub_type=SubType.SHARED)
    await producer.send(b"m")
    with pytest.raises(LocalProtocolError, match="Shared"):
        consumer.acknowledge_cumulative(await consumer.receive())


async def test_negative_ack_on_shared_redelivers_those_ids_after_the_delay(
    client: Client, broker: FakeBroker, fake_clock: FakeClock
) -> None:
    producer, consumer = await setup(
        client, sub_type=SubType.SHARED, negative_ack_redelivery_delay=1.0
    )
    for i in range(2):
        await producer.send(b"m%d" % i)
    first = await consumer.receive()
    await consumer.receive()
    consumer.negative_acknowledge(first)
    await fake_clock.advance(0.9)
    assert broker.of_type(c.RedeliverUnacknowledgedMessages) == []
    await fake_clock.advance(0.1)
    (redeliver,) = broker.of_type(c.RedeliverUnacknowledgedMessages)
    assert [(d.ledger_id, d.entry_id) for d in redeliver.message_ids] == [(LEDGER, 0)]
    again = await consumer.receive()
    assert again.message_id == first.message_id
    assert again.redelivery_count == 1


async def test_negative_ack_on_exclusive_sends_an_empty_redeliver(
    client: Client, broker: FakeBroker, fake_clock: FakeClock
) -> None:
    producer, consumer = await setup(client, negative_ack_redelivery_delay=1.0)
    await producer.send(b"a")
    await producer.send(b"b")
    first = await consumer.receive()
    consumer.negative_acknowledge(first)
    await fake_clock.advance(1.0)
    (redeliver,) = broker.of_type(c.RedeliverUnacknowledgedMessages)
    assert redeliver.message_ids == ()
    # "b" was prefetched and dropped: both come again, in order, once each.
    got = [await consumer.receive() for _ in range(2)]
    assert [(m.payload, m.redelivery_count) for m in got] == [(b"a", 1), (b"b", 1)]
    assert consumer.receive_nowait() is None


async def test_redelivery_count_grows_with_each_negative_ack(
    client: Client, fake_clock: FakeClock
) -> None:
    producer, consumer = await setup(
        client, sub_type=SubType.SHARED, negative_ack_redelivery_delay=0.5
    )
    await producer.send(b"hello")
    for _ in range(3):
        consumer.negative_acknowledge(await consumer.receive())
        await fake_clock.advance(0.5)
    message = await consumer.receive()
    assert message.redelivery_count == 3
    mid = message.message_id
    assert message.delivery == (mid.ledger_id, mid.entry_id, -1, 3)


async def test_seek_by_id_resubscribes_and_filters_up_to_the_target(
    client: Client, broker: FakeBroker, fake_clock: FakeClock
) -> None:
    producer, consumer = await setup(client)
    ids = [await producer.send(b"m%d" % i) for i in range(5)]
    for _ in range(5):
        await consumer.receive()
    async with anyio.create_task_group() as tg:
        tg.start_soon(consumer.seek, ids[1])
        await anyio.wait_all_tasks_blocked()
        (seek,) = broker.of_type(c.Seek)
        assert (seek.message_id.ledger_id, seek.message_id.entry_id) == (LEDGER, 1)
        assert seek.message_id.batch_index == -1
        await fake_clock.advance(0.1)  # the broker closed us: reattach after the backoff
    subscribes = broker.of_type(c.Subscribe)
    assert len(subscribes) == 2
    assert subscribes[1].consumer_id == subscribes[0].consumer_id
    assert flows(broker)[-1] == 1000  # fresh permits after every SUBSCRIBE
    got = [await consumer.receive() for _ in range(3)]
    assert [m.message_id for m in got] == ids[2:]


async def test_seek_by_publish_time(
    client: Client, broker: FakeBroker, fake_clock: FakeClock
) -> None:
    producer, consumer = await setup(client)
    await producer.send(b"old")
    await fake_clock.advance(1.0)
    when = fake_clock.wall_ms()
    await producer.send(b"new")
    for _ in range(2):
        await consumer.receive()
    async with anyio.create_task_group() as tg:
        tg.start_soon(consumer.seek, when)
        await fake_clock.advance(0.1)
    assert broker.of_type(c.Seek)[0].message_publish_time == when
    assert (await consumer.receive()).payload == b"new"


async def test_get_last_message_id(client: Client) -> None:
    producer, consumer = await setup(client)
    assert (await consumer.get_last_message_id()).entry_id == -1  # empty topic
    for i in range(3):
        await producer.send(b"m")
        assert await consumer.get_last_message_id() == MessageId(LEDGER, i)


async def test_connection_drop_resubscribes_with_fresh_flow_and_gets_redeliveries(
    client: Client, broker: FakeBroker, fake_clock: FakeClock
) -> None:
    producer, consumer = await setup(client, receiver_queue_size=50)
    await producer.send(b"a")
    first = await consumer.receive()
    await broker.sessions[0].disconnect()
    assert not consumer.is_connected()
    await fake_clock.advance(0.1)
    assert consumer.is_connected()
    subscribes = broker.of_type(c.Subscribe)
    assert [s.consumer_id for s in subscribes] == [consumer.consumer_id] * 2
    assert flows(broker) == [50, 50]
    again = await consumer.receive()
    assert again.message_id == first.message_id
    assert again.redelivery_count == 1


async def test_receiver_queue_size_zero_sends_one_permit_per_receive(
    client: Client, broker: FakeBroker
) -> None:
    producer, consumer = await setup(client, receiver_queue_size=0)
    await producer.send(b"a")
    await producer.send(b"b")
    assert flows(broker) == []
    assert (await consumer.receive()).payload == b"a"
    assert (await consumer.receive()).payload == b"b"
    assert flows(broker) == [1, 1]


async def test_corrupt_message_is_discarded_with_a_validation_ack(
    client: Client, broker: FakeBroker
) -> None:
    producer, consumer = await setup(client)
    await producer.send(b"good")
    entry = broker.topics[producer.topic].entries[0]
    corrupt = bytearray(entry.section)
    corrupt[-1] ^= 0xFF
    broker.sessions[0].write(
        encode_section_frame(
            c.Message(
                consumer_id=consumer.consumer_id,
                message_id=c.MessageIdData(ledger_id=LEDGER, entry_id=9),
            ),
            bytes(corrupt),
        )
    )
    assert (await consumer.receive()).payload == b"good"
    await anyio.wait_all_tasks_blocked()
    assert consumer.receive_nowait() is None
    (ack,) = acks(broker)
    assert ack.validation_error == 2  # ChecksumMismatch
    assert ack.message_id[0].entry_id == 9


async def test_unsubscribe(client: Client, broker: FakeBroker) -> None:
    _producer, consumer = await setup(client)
    await consumer.unsubscribe()
    assert broker.of_type(c.Unsubscribe)[0].consumer_id == consumer.consumer_id
    assert broker.subscriptions == {}
    with pytest.raises(ConsumerClosedError):
        consumer.acknowledge(MessageId(LEDGER, 0))


async def test_async_iteration_ends_when_the_consumer_closes(client: Client) -> None:
    producer, consumer = await setup(client)
    for i in range(2):
        await producer.send(b"m%d" % i)
    seen: list[bytes] = []

    async def drain() -> None:
        async for message in consumer:
            seen.append(message.payload)

    async with anyio.create_task_group() as tg:
        tg.start_soon(drain)
        await anyio.wait_all_tasks_blocked()
        await consumer.aclose()
    assert seen == [b"m0", b"m1"]
