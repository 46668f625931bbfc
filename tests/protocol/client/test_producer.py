"""Producer: pipelining, receipts, batching, sequence ids, timeouts, reconnection, chunking."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from protocol import commands as c
from protocol.client import Client, InitialPosition, MessageId, Producer, open_client
from protocol.client._util import Future
from protocol.clock import FakeClock
from protocol.codec import decode_record
from protocol.errors import (
    MessageTooBigError,
    OperationTimeoutError,
    ProducerClosedError,
    ProducerFencedError,
    ServerError,
)
from tests.support.fake_broker import LEDGER, FakeBroker, Session, fake_broker

pytestmark = pytest.mark.anyio


def sends(broker: FakeBroker) -> list[c.Send]:
    return broker.of_type(c.Send)


async def producer_of(client: Client, topic: str = "t", **options: Any) -> Producer:
    producer = await client.create_producer(topic, **options)
    assert isinstance(producer, Producer)
    return producer


async def test_receipts_complete_sends_in_order_with_entry_ids(
    client: Client, broker: FakeBroker
) -> None:
    producer = await producer_of(client)
    broker.hold_receipts = True
    futures = [await producer.send_async(b"m%d" % i) for i in range(5)]
    await anyio.wait_all_tasks_blocked()
    assert [s.sequence_id for s in sends(broker)] == [0, 1, 2, 3, 4]
    assert not any(f.done() for f in futures)
    broker.release_receipts()
    ids = [await f for f in futures]
    assert ids == [MessageId(LEDGER, i) for i in range(5)]
    assert producer.last_sequence_id == 4


async def test_send_async_callback_gets_the_completed_future(client: Client) -> None:
    producer = await producer_of(client)
    seen: list[MessageId] = []
    future = await producer.send_async(b"x", callback=lambda f: seen.append(f.result()))
    assert await future == seen[0] == MessageId(LEDGER, 0)


async def test_receipt_listener_hears_each_send_once_batches_whole(
    client: Client, broker: FakeBroker, fake_clock: FakeClock
) -> None:
    heard: list[tuple[Any, ...]] = []

    def listener(*outcome: Any) -> None:
        heard.append(tuple(type(x).__name__ if isinstance(x, Exception) else x for x in outcome))

    batched = await producer_of(client, batching_enabled=True, receipt_listener=listener)
    for i in range(3):
        await batched.send_async(b"m%d" % i)
    await batched.flush()
    single = await producer_of(client, "u", receipt_listener=listener, send_timeout=1.0)
    await single.send(b"x")
    assert heard == [(0, 2, LEDGER, 0, 0, None), (0, 0, LEDGER, 0, -1, None)]
    broker.hold_receipts = True
    failed = await single.send_async(b"y")
    await fake_clock.advance(1.0)
    assert failed.done()
    assert heard[-1] == (1, 1, -1, -1, -1, "OperationTimeoutError")


async def test_send_async_waits_when_max_pending_is_reached(
    client: Client, broker: FakeBroker
) -> None:
    producer = await producer_of(client, max_pending_messages=2)
    broker.hold_receipts = True
    await producer.send_async(b"a")
    await producer.send_async(b"b")
    third: list[Future[MessageId]] = []

    async def send_third() -> None:
        third.append(await producer.send_async(b"c"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(send_third)
        await anyio.wait_all_tasks_blocked()
        assert third == []  # blocked: two messages are pending
        assert len(sends(broker)) == 2
        broker.release_receipts()
    assert len(third) == 1
    await anyio.wait_all_tasks_blocked()
    broker.release_receipts()
    assert await third[0] == MessageId(LEDGER, 2)


async def test_stale_receipt_is_ignored_and_a_future_one_drops_the_connection(
    client: Client, broker: FakeBroker, fake_clock: FakeClock
) -> None:
    producer = await producer_of(client)
    broker.hold_receipts = True
    future = await producer.send_async(b"a")
    await anyio.wait_all_tasks_blocked()
    session = broker.sessions[0]
    session.send(c.SendReceipt(producer_id=producer.producer_id, sequence_id=-5 & 0xFFFF))
    await anyio.wait_all_tasks_blocked()
    # 65531 > the head's sequence id 0: the broker broke the receipt rules (spec §6.2).
    assert session.closed
    assert not future.done()
    broker.hold_receipts = False
    await fake_clock.advance(0.1)  # reconnect backoff
    assert await future == MessageId(LEDGER, 1)  # re-sent on the new connection


async def test_sequence_ids_continue_from_the_brokers_last_sequence_id(
    client: Client, broker: FakeBroker
) -> None:
    def success(session: Session, cmd: c.Producer, payload: object) -> bool:
        session.producers[cmd.producer_id] = cmd.topic
        session.send(
            c.ProducerSuccess(request_id=cmd.request_id, producer_name="p", last_sequence_id=41)
        )
        return True

    broker.on(c.Producer, success)
    producer = await producer_of(client)
    assert producer.last_sequence_id == 41
    await producer.send(b"x")
    await producer.send(b"y", sequence_id=100)
    await producer.send(b"z")
    assert [s.sequence_id for s in sends(broker)] == [42, 100, 101]


async def test_message_metadata_carries_key_properties_and_times(
    client: Client, broker: FakeBroker, fake_clock: FakeClock
) -> None:
    producer = await producer_of(client)
    await producer.send(b"x", key="k", properties={"a": "1"}, event_time=5, deliver_at=9)
    metadata = broker.topics[producer.topic].entries[0].metadata
    assert metadata.producer_name == producer.producer_name
    assert metadata.partition_key == "k"
    assert [(kv.key, kv.value) for kv in metadata.properties] == [("a", "1")]
    assert metadata.event_time == 5
    assert metadata.deliver_at_time == 9
    assert metadata.publish_time == fake_clock.wall_ms()
    assert metadata.num_messages_in_batch is None


class TestBatching:
    async def test_batched_messages_get_ids_by_index(
        self, client: Client, broker: FakeBroker
    ) -> None:
        producer = await producer_of(client, batching_enabled=True)
        futures = [await producer.send_async(b"m%d" % i, key="k") for i in range(3)]
        await producer.flush()
        assert [await f for f in futures] == [MessageId(LEDGER, 0, -1, i, 3) for i in range(3)]
        (send,) = sends(broker)
        assert send.num_messages == 3
        assert send.sequence_id == 0
        entry = broker.topics[producer.topic].entries[0]
        assert entry.metadata.num_messages_in_batch == 3
        assert entry.metadata.partition_key == "k"

    async def test_batch_is_sent_when_it_reaches_max_messages(
        self, client: Client, broker: FakeBroker
    ) -> None:
        producer = await producer_of(client, batching_enabled=True, batching_max_messages=4)
        for i in range(10):
            await producer.send_async(b"m%d" % i)
        await anyio.wait_all_tasks_blocked()
        assert [s.num_messages for s in sends(broker)] == [4, 4]
        assert [s.sequence_id for s in sends(broker)] == [0, 4]

    async def test_batch_is_sent_before_it_would_exceed_max_bytes(
        self, client: Client, broker: FakeBroker
    ) -> None:
        producer = await producer_of(client, batching_enabled=True, batching_max_bytes=250)
        for _ in range(5):
            await producer.send_async(b"x" * 100)
        await anyio.wait_all_tasks_blocked()
        assert [s.num_messages for s in sends(broker)] == [2, 2]

    async def test_batch_is_sent_after_the_publish_delay(
        self, client: Client, broker: FakeBroker, fake_clock: FakeClock
    ) -> None:
        producer = await producer_of(client, batching_enabled=True, batching_max_publish_delay=0.05)
        future = await producer.send_async(b"a")
        await fake_clock.advance(0.04)
        await producer.send_async(b"b")
        assert sends(broker) == []
        await fake_clock.advance(0.01)  # 50 ms after the batch's first message
        assert [s.num_messages for s in sends(broker)] == [2]
        assert await future == MessageId(LEDGER, 0, -1, 0, 2)
        await producer.send_async(b"c")
        await fake_clock.advance(0.049)
        assert len(sends(broker)) == 1
        await fake_clock.advance(0.001)
        assert len(sends(broker)) == 2

    async def test_awaited_send_does_not_wait_for_the_delay(self, client: Client) -> None:
        producer = await producer_of(client, batching_enabled=True, batching_max_publish_delay=60)
        assert await producer.send(b"a") == MessageId(LEDGER, 0, -1, 0, 1)

    async def test_delayed_messages_are_never_batched(
        self, client: Client, broker: FakeBroker
    ) -> None:
        producer = await producer_of(client, batching_enabled=True)
        assert await producer.send(b"a", deliver_at=123) == MessageId(LEDGER, 0)
        assert sends(broker)[0].num_messages == 1

    async def test_consumer_splits_the_batch(self, client: Client, broker: FakeBroker) -> None:
        producer = await producer_of(client, batching_enabled=True)
        futures = [
            await producer.send_async(b"m%d" % i, properties={"i": str(i)}) for i in range(3)
        ]
        await producer.flush()
        consumer = await client.subscribe(
            producer.topic, "s", initial_position=InitialPosition.EARLIEST
        )
        got = [await consumer.receive() for _ in range(3)]
        assert [m.payload for m in got] == [b"m0", b"m1", b"m2"]
        assert [m.message_id for m in got] == [await f for f in futures]
        assert [m.properties for m in got] == [{"i": "0"}, {"i": "1"}, {"i": "2"}]
        assert [m.sequence_id for m in got] == [0, 1, 2]


async def test_send_timeout_fails_unreceipted_sends_on_the_clock(
    client: Client, broker: FakeBroker, fake_clock: FakeClock
) -> None:
    producer = await producer_of(client, send_timeout=2.0)
    broker.hold_receipts = True
    first = await producer.send_async(b"a")
    await fake_clock.advance(1.0)
    second = await producer.send_async(b"b")
    await fake_clock.advance(1.0)
    assert first.done()
    assert not second.done()
    with pytest.raises(OperationTimeoutError):
        await first
    await fake_clock.advance(1.0)
    with pytest.raises(OperationTimeoutError):
        await second


async def test_close_producer_from_broker_reconnects_and_resends_pending(
    client: Client, broker: FakeBroker, fake_clock: FakeClock
) -> None:
    producer = await producer_of(client)
    name = producer.producer_name
    broker.hold_receipts = True
    futures = [await producer.send_async(b"m%d" % i) for i in range(3)]
    await anyio.wait_all_tasks_blocked()
    broker.held_receipts.clear()  # the broker "lost" them while unloading
    broker.hold_receipts = False
    broker.sessions[0].send(c.CloseProducer(producer_id=producer.producer_id, request_id=99))
    await anyio.wait_all_tasks_blocked()
    assert not producer.is_connected()
    assert len(broker.of_type(c.LookupTopic)) == 1
    await fake_clock.advance(0.05)
    assert len(broker.of_type(c.Producer)) == 1  # still in the 100 ms backoff
    await fake_clock.advance(0.05)
    assert len(broker.of_type(c.LookupTopic)) == 2  # a fresh lookup (spec §9)
    again = broker.of_type(c.Producer)[1]
    assert again.epoch == 1
    assert again.producer_name == name
    assert again.user_provided_producer_name is False
    assert [s.sequence_id for s in sends(broker)] == [0, 1, 2, 0, 1, 2]
    assert [await f for f in futures] == [MessageId(LEDGER, i) for i in (3, 4, 5)]
    assert producer.is_connected()


async def test_connection_drop_reconnects_and_resends(
    client: Client, broker: FakeBroker, fake_clock: FakeClock
) -> None:
    producer = await producer_of(client)
    broker.hold_receipts = True
    future = await producer.send_async(b"a")
    await anyio.wait_all_tasks_blocked()
    broker.held_receipts.clear()
    broker.hold_receipts = False
    await broker.sessions[0].disconnect()
    await fake_clock.advance(0.1)
    assert len(broker.of_type(c.Connect)) == 2  # a new connection with a new handshake
    assert await future == MessageId(LEDGER, 1)
    assert await producer.send(b"b") == MessageId(LEDGER, 2)


async def test_broker_url_and_attachments_follow_a_reconnection(
    client: Client, broker: FakeBroker, fake_clock: FakeClock
) -> None:
    producer = await producer_of(client)
    assert producer.attachments == 1
    assert producer.broker_url == broker.url
    told: list[int] = []
    producer.on_attach = lambda: told.append(producer.attachments)
    await broker.sessions[0].disconnect()
    await anyio.wait_all_tasks_blocked()
    assert producer.broker_url is None  # detached until the backoff ends
    await fake_clock.advance(0.1)
    assert producer.attachments == 2
    assert told == [2]  # told of the re-attachment once it counted it
    assert producer.broker_url == broker.url


async def test_fenced_producer_fails_for_good(
    client: Client, broker: FakeBroker, fake_clock: FakeClock
) -> None:
    producer = await producer_of(client)
    broker.hold_receipts = True
    future = await producer.send_async(b"a")
    await anyio.wait_all_tasks_blocked()
    broker.fail_next(c.Producer, ServerError.ProducerFenced)
    broker.sessions[0].send(c.CloseProducer(producer_id=producer.producer_id, request_id=1))
    await fake_clock.advance(0.1)
    with pytest.raises(ProducerFencedError):
        await future
    with pytest.raises(ProducerFencedError):
        await producer.send(b"b")


async def test_non_retriable_creation_error_raises_at_once(
    client: Client, broker: FakeBroker
) -> None:
    from protocol.errors import ProducerBusyError

    broker.fail_next(c.Producer, ServerError.ProducerBusy)
    with pytest.raises(ProducerBusyError):
        await client.create_producer("t", producer_name="taken")
    assert len(broker.of_type(c.Producer)) == 1


async def test_close_flushes_waits_and_refuses_further_sends(
    client: Client, broker: FakeBroker
) -> None:
    producer = await producer_of(client, batching_enabled=True)
    future = await producer.send_async(b"a")
    await producer.aclose()
    assert future.result() == MessageId(LEDGER, 0, -1, 0, 1)
    assert broker.of_type(c.CloseProducer)[0].producer_id == producer.producer_id
    with pytest.raises(ProducerClosedError):
        await producer.send(b"b")


class TestChunking:
    async def test_large_message_is_chunked_and_reassembled(self, fake_clock: FakeClock) -> None:
        async with (
            fake_broker(max_message_size=1000) as broker,
            open_client(broker.url, connector=broker.connect, clock=fake_clock) as client,
        ):
            producer = await producer_of(client, chunking_enabled=True)
            payload = bytes(range(256)) * 20  # 5120 bytes
            message_id = await producer.send(payload)
            chunk_sends = sends(broker)
            assert len(chunk_sends) == 6
            assert all(s.is_chunk and s.sequence_id == 0 for s in chunk_sends)
            metadata = [e.metadata for e in broker.topics[producer.topic].entries]
            assert [m.chunk_id for m in metadata] == list(range(6))
            assert {m.uuid for m in metadata} == {f"{producer.producer_name}-0"}
            assert {m.num_chunks_from_msg for m in metadata} == {6}
            assert {m.total_chunk_msg_size for m in metadata} == {len(payload)}
            assert message_id == MessageId(LEDGER, 5)  # the last chunk's id
            for entry in broker.topics[producer.topic].entries:
                body_size = len(entry.section) - 6 - 4  # crc section and metadata size
                assert body_size <= 1000  # metadata + chunk within max_message_size

            consumer = await client.subscribe(
                producer.topic, "s", initial_position=InitialPosition.EARLIEST
            )
            message = await consumer.receive()
            assert message.payload == payload
            assert message.message_id == message_id
            consumer.acknowledge(message)
            consumer.flush_acks()
            await anyio.wait_all_tasks_blocked()
            acked = [d.entry_id for a in broker.of_type(c.Ack) for d in a.message_id]
            assert sorted(acked) == list(range(6))  # every chunk's entry

    async def test_too_big_without_chunking_raises(self, fake_clock: FakeClock) -> None:
        async with (
            fake_broker(max_message_size=1000) as broker,
            open_client(broker.url, connector=broker.connect, clock=fake_clock) as client,
        ):
            producer = await producer_of(client)
            with pytest.raises(MessageTooBigError):
                await producer.send(b"x" * 1000)
            assert await producer.send(b"x" * 900) == MessageId(LEDGER, 0)


def test_metadata_of_a_send_decodes() -> None:
    # Guard for the helper above: entries keep the producer's metadata bytes intact.
    from protocol.client.messages import build_single

    frame = build_single(
        c.Send(producer_id=1, sequence_id=2),
        c.MessageMetadata(producer_name="p", sequence_id=2, publish_time=3),
        b"body",
        1000,
    )
    assert frame is not None
    from protocol.framing import FrameDecoder

    decoder = FrameDecoder()
    decoder.feed(frame)
    decoded = decoder.next_frame()
    assert decoded is not None
    assert decoded.payload is not None
    assert decoded.payload.checksum_ok()
    assert decode_record(c.MessageMetadata, decoded.payload.metadata).sequence_id == 2
    assert bytes(decoded.payload.body) == b"body"


async def test_full_queue_flushes_the_open_batch_instead_of_waiting_for_the_delay(
    client: Client, broker: FakeBroker
) -> None:
    producer = await producer_of(
        client, batching_enabled=True, batching_max_publish_delay=60.0, max_pending_messages=3
    )
    futures = [await producer.send_async(b"m%d" % i) for i in range(4)]  # the 4th waits for room
    assert [s.num_messages for s in sends(broker)][:1] == [3]
    await producer.flush()
    assert [await f for f in futures][-1] == MessageId(LEDGER, 1, -1, 0, 1)
