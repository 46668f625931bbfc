"""The command handlers over in-memory connections to a real broker (topics, metadata, ledgers).

Each test talks raw protocol with ``WireClient`` and asserts on the exact replies: the reply form
for every failure (spec §4.2), receipt order (§6.2), broker-initiated closes (§9) and what bad
input does to one connection and not to the others (§2.5).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emubroker.app import Broker, open_broker
from emubroker.config import load_config
from emubroker.handlers import (
    SCHEMA_VERSION_ZERO,
    SERVER_VERSION,
    BrokerServices,
    ConnectionHandler,
)
from emubroker.handlers.access import BROKER_FEATURES
from emubroker.naming import TopicName
from emubroker.net.session import Session
from protocol import commands as c
from protocol.clock import FakeClock
from protocol.codec import encode_record
from protocol.errors import RemoteProtocolError, ServerError
from protocol.framing import DEFAULT_MAX_MESSAGE_SIZE, build_entry, checksum
from tests.support.broker import WireClient, memory_stream_pair

pytestmark = pytest.mark.anyio

TOPIC = "persistent://public/default/t"


class Connections:
    """Opens in-memory client connections to a broker and closes them at the end."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.clients: list[WireClient] = []

    async def open(self, *, handshake: bool = True) -> WireClient:
        client_end, server_end = memory_stream_pair()
        self.broker.start_session(server_end)
        client = WireClient(client_end)
        self.clients.append(client)
        if handshake:
            await client.handshake()
        return client

    async def aclose(self) -> None:
        for client in self.clients:
            await client.stream.aclose()


@pytest.fixture
async def broker(fake_clock: FakeClock) -> AsyncIterator[Broker]:
    config = load_config(overrides={"brokerServicePort": 6650, "webServicePort": 8080})
    async with open_broker(config, clock=fake_clock, listen=False, admin=False) as running:
        yield running


@pytest.fixture
async def conns(broker: Broker) -> AsyncIterator[Connections]:
    connections = Connections(broker)
    try:
        yield connections
    finally:
        await connections.aclose()


async def create_producer(
    client: WireClient, topic: str = TOPIC, producer_id: int = 1, **fields: Any
) -> c.ProducerSuccess:
    await client.send(
        c.Producer(topic=topic, producer_id=producer_id, request_id=client.request_id(), **fields)
    )
    reply = await client.receive_command()
    assert isinstance(reply, c.ProducerSuccess), reply
    return reply


async def subscribe(
    client: WireClient,
    topic: str = TOPIC,
    consumer_id: int = 1,
    subscription: str = "sub",
    **fields: Any,
) -> None:
    request_id = client.request_id()
    await client.send(
        c.Subscribe(
            topic=topic,
            subscription=subscription,
            sub_type=fields.pop("sub_type", c.SubType.EXCLUSIVE),
            consumer_id=consumer_id,
            request_id=request_id,
            **fields,
        )
    )
    assert await client.receive_command() == c.Success(request_id=request_id)


# ---- handshake and discovery (spec §3.1, §5) -----------------------------------------------


async def test_connected_announces_version_and_max_message_size(conns: Connections) -> None:
    client = await conns.open(handshake=False)
    connected = await client.handshake(protocol_version=20)
    assert connected == c.Connected(
        server_version=SERVER_VERSION,
        protocol_version=20,
        max_message_size=DEFAULT_MAX_MESSAGE_SIZE,
        feature_flags=BROKER_FEATURES,
    )
    older = await conns.open(handshake=False)
    assert (await older.handshake(protocol_version=12)).protocol_version == 12


async def test_lookup_answers_connect_to_this_broker(conns: Connections) -> None:
    client = await conns.open()
    await client.send(c.LookupTopic(topic=TOPIC, request_id=0, advertised_listener_name=""))
    assert await client.receive_command() == c.LookupTopicResponse(
        request_id=0,
        broker_service_url="pulsar://127.0.0.1:6650",
        response=c.LookupType.CONNECT,
        authoritative=True,
    )


async def test_lookup_acquires_the_bundle_in_the_metadata_store(
    broker: Broker, conns: Connections
) -> None:
    client = await conns.open()
    await client.send(c.LookupTopic(topic=TOPIC, request_id=0))
    await client.receive_command()
    bundle = broker.ownership.bundle_of(TopicName.parse(TOPIC))
    node = await broker.metadata.get(f"/namespace/public/default/{bundle.bundle_range.name}")
    assert node is not None
    assert node.ephemeral
    assert b'"nativeUrl":"pulsar://127.0.0.1:6650"' in node.value


@pytest.mark.parametrize(
    ("topic", "listener", "error", "text"),
    [
        ("persistent://public/default/t", "test", ServerError.ServiceNotReady, "test listener"),
        ("persistent://nope/ns/t", "", ServerError.TopicNotFound, "nope/ns"),
        ("bogus://public/default/t", "", ServerError.InvalidTopicName, "domain"),
    ],
)
async def test_lookup_failures_use_the_failed_form(
    conns: Connections, topic: str, listener: str, error: ServerError, text: str
) -> None:
    client = await conns.open()
    await client.send(c.LookupTopic(topic=topic, request_id=5, advertised_listener_name=listener))
    reply = await client.receive_command()
    assert isinstance(reply, c.LookupTopicResponse)
    assert reply.request_id == 5
    assert reply.response is c.LookupType.FAILED
    assert reply.error is error
    assert reply.message is not None
    assert text in reply.message


async def test_partitioned_metadata_success_and_failure_forms(
    broker: Broker, conns: Connections
) -> None:
    await broker.topics.create_partitioned_topic(TopicName.parse(TOPIC + "-p"), 3)
    client = await conns.open()
    await client.send(c.PartitionedTopicMetadata(topic=TOPIC, request_id=0))
    await client.send(c.PartitionedTopicMetadata(topic=TOPIC + "-p", request_id=1))
    await client.send(c.PartitionedTopicMetadata(topic="persistent://x/y/z", request_id=2))
    replies = {}
    for _ in range(3):
        reply = await client.receive_command()
        assert isinstance(reply, c.PartitionedTopicMetadataResponse)
        replies[reply.request_id] = reply
    assert replies[0] == c.PartitionedTopicMetadataResponse(
        request_id=0, partitions=0, response=c.MetadataResult.SUCCESS
    )
    assert replies[1].partitions == 3
    assert replies[1].response is c.MetadataResult.SUCCESS
    assert replies[2].response is c.MetadataResult.FAILED
    assert replies[2].error is ServerError.TopicNotFound


async def test_topics_of_namespace_and_unknown_namespace(conns: Connections) -> None:
    client = await conns.open()
    await create_producer(client)
    await client.send(c.GetTopicsOfNamespace(request_id=1, namespace="public/default"))
    reply = await client.receive_command()
    assert reply == c.GetTopicsOfNamespaceResponse(request_id=1, topics=(TOPIC,))
    # As Pulsar: an unknown namespace has no topics (no error).
    await client.send(c.GetTopicsOfNamespace(request_id=2, namespace="public/none"))
    assert await client.receive_command() == c.GetTopicsOfNamespaceResponse(request_id=2, topics=())


async def test_get_schema_answers_topic_not_found(conns: Connections) -> None:
    client = await conns.open()
    await client.send(c.GetSchema(request_id=3, topic=TOPIC))
    reply = await client.receive_command()
    assert isinstance(reply, c.GetSchemaResponse)
    assert reply.request_id == 3
    assert reply.error_code is ServerError.TopicNotFound


# ---- producers (spec §6) ------------------------------------------------------------------


async def test_producer_success_fields(conns: Connections) -> None:
    client = await conns.open()
    plain = await create_producer(client, producer_id=1, user_provided_producer_name=False)
    assert plain.producer_name.startswith("standalone-")
    assert plain.last_sequence_id == -1
    # Set, and empty, without a schema: the Java client fails on an unset schema_version.
    assert plain.schema_version == b""
    schema = c.Schema(name="s", schema_data=b"", type=c.SchemaType.STRING)
    with_schema = await create_producer(client, producer_id=2, schema=schema)
    assert with_schema.schema_version == SCHEMA_VERSION_ZERO


async def test_producer_errors_are_error_replies(conns: Connections) -> None:
    client = await conns.open()
    await create_producer(client, producer_id=1, producer_name="me")
    await client.send(c.Producer(topic=TOPIC, producer_id=2, request_id=7, producer_name="me"))
    busy = await client.receive_command()
    assert isinstance(busy, c.Error)
    assert (busy.request_id, busy.error) == (7, ServerError.ProducerBusy)
    await client.send(c.Producer(topic="persistent://x/y/t", producer_id=3, request_id=8))
    missing = await client.receive_command()
    assert isinstance(missing, c.Error)
    assert (missing.request_id, missing.error) == (8, ServerError.TopicNotFound)


async def test_receipts_follow_send_order_with_ids_from_zero(conns: Connections) -> None:
    client = await conns.open()
    await create_producer(client)
    for sequence_id in range(20):
        await client.send_message(1, sequence_id, f"m{sequence_id}".encode())
    receipts = [await client.receive_command() for _ in range(20)]
    assert [r.sequence_id for r in receipts] == list(range(20))  # type: ignore[union-attr]
    ids = [r.message_id for r in receipts]  # type: ignore[union-attr]
    assert [i.entry_id for i in ids] == list(range(20))  # type: ignore[union-attr]
    assert len({i.ledger_id for i in ids}) == 1  # type: ignore[union-attr]
    assert all(i.ledger_id > 0 for i in ids)  # type: ignore[union-attr]


async def test_bad_checksum_fails_that_send_only_and_in_order(conns: Connections) -> None:
    client = await conns.open()
    await create_producer(client)
    await client.send_message(1, 0)
    await client.send_message(1, 1, bad_checksum=True)
    await client.send_message(1, 2)
    first, second, third = [await client.receive_command() for _ in range(3)]
    assert isinstance(first, c.SendReceipt)
    assert first.sequence_id == 0
    assert isinstance(second, c.SendError)
    assert (second.sequence_id, second.error) == (1, ServerError.ChecksumError)
    assert isinstance(third, c.SendReceipt)
    assert third.sequence_id == 2
    assert third.message_id is not None
    assert third.message_id.entry_id == 1  # the bad one was never stored


def send_frame(client: WireClient, sequence_id: int, *, bad_checksum: bool = False) -> bytes:
    """The bytes of one SEND of producer 1, to be written together with others."""
    meta = c.MessageMetadata(producer_name="p", sequence_id=sequence_id, publish_time=1)
    entry = build_entry(encode_record(meta), b"x%d" % sequence_id)
    crc = checksum(entry) ^ (1 if bad_checksum else 0)
    return client.conn.send_payload(c.Send(producer_id=1, sequence_id=sequence_id), entry, crc)


def receipted_entry_ids(replies: list[c.Command]) -> list[int]:
    return [
        r.message_id.entry_id
        for r in replies
        if isinstance(r, c.SendReceipt) and r.message_id is not None
    ]


async def test_sends_of_one_read_are_receipted_in_order_around_a_failed_one(
    conns: Connections,
) -> None:
    # spec §6.2/§6.3: a read's SENDs are published together; the one that fails on its own
    # keeps its place, and the rest are stored and receipted in order.
    client = await conns.open()
    await create_producer(client)
    await client.send_raw(b"".join(send_frame(client, s, bad_checksum=s == 2) for s in range(5)))
    replies = [await client.receive_command() for _ in range(5)]
    assert [type(r) for r in replies] == [c.SendReceipt] * 2 + [c.SendError] + [c.SendReceipt] * 2
    assert [r.sequence_id for r in replies] == list(range(5))  # type: ignore[union-attr]
    assert receipted_entry_ids(replies) == [0, 1, 2, 3]


class AwaitedStorageTopic:
    """A real topic whose storage cannot answer at once: the handler must await it."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.awaited = 0
        self.asked_at_once = 0

    def publish_many_nowait(self, producer: Any, entries: Any) -> list[tuple[int, int]]:
        self.asked_at_once += 1
        raise anyio.WouldBlock

    async def publish_many(self, producer: Any, entries: Any) -> list[tuple[int, int]]:
        self.awaited += 1
        await anyio.lowlevel.checkpoint()
        return self._inner.publish_many_nowait(producer, entries)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class AwaitedStorageTopics:
    """The real topic service, handing out topics whose storage must be awaited."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.topics: list[AwaitedStorageTopic] = []

    async def get_topic(self, name: TopicName, *, create: bool = True) -> Any:
        topic = AwaitedStorageTopic(await self._inner.get_topic(name, create=create))
        self.topics.append(topic)
        return topic

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def awaited_storage_session(
    broker: Broker,
) -> tuple[AwaitedStorageTopics, Session, WireClient, Any]:
    """A session whose topics' storage must be awaited, a client at its other end, its stream."""
    topics = AwaitedStorageTopics(broker.topics)
    services = BrokerServices(
        config=broker.config,
        topics=topics,  # type: ignore[arg-type]
        ownership=broker.ownership,
        namespace_exists=broker.namespaces,
    )
    client_end, server_end = memory_stream_pair()
    session = Session(
        server_end,
        lambda s: ConnectionHandler(services, s),
        clock=broker.clock,
        max_frame_size=1 << 20,
        keepalive_interval=30,
    )
    return topics, session, WireClient(client_end), client_end


async def test_storage_that_must_be_awaited_is_asked_at_once_only_the_first_time(
    broker: Broker,
) -> None:
    # Bookie mode stays so for the topic: after the first WouldBlock, a read's SENDs go to
    # the producer's task as they are (not taken from the FIFO and put back first), and the
    # task awaits storage without asking it again.
    topics, session, client, client_end = awaited_storage_session(broker)
    async with anyio.create_task_group() as tg:
        tg.start_soon(session.run)
        await client.handshake()
        await create_producer(client)
        for s in range(4):
            await client.send_raw(send_frame(client, s))
            reply = await client.receive_command()
            assert isinstance(reply, c.SendReceipt)
            assert reply.sequence_id == s
        assert topics.topics[0].asked_at_once == 1
        assert topics.topics[0].awaited == 4
        await client_end.aclose()


async def test_storage_that_must_be_awaited_is_published_by_the_producer_task(
    broker: Broker,
) -> None:
    topics, session, client, client_end = awaited_storage_session(broker)
    async with anyio.create_task_group() as tg:
        tg.start_soon(session.run)
        await client.handshake()
        await create_producer(client)
        await client.send_raw(b"".join(send_frame(client, s) for s in range(3)))
        await client.send_raw(send_frame(client, 3, bad_checksum=True) + send_frame(client, 4))
        replies = [await client.receive_command() for _ in range(5)]
        assert [r.sequence_id for r in replies] == list(range(5))  # type: ignore[union-attr]
        assert isinstance(replies[3], c.SendError)
        assert receipted_entry_ids(replies) == [0, 1, 2, 3]
        assert topics.topics[0].awaited >= 2
        await client_end.aclose()


async def test_send_for_unknown_producer_closes_only_that_connection(
    conns: Connections,
) -> None:
    bad = await conns.open()
    good = await conns.open()
    await create_producer(good)
    await bad.send_message(42, 0)
    await bad.expect_closed()
    await good.send_message(1, 0)
    assert isinstance(await good.receive_command(), c.SendReceipt)


async def test_close_producer_answers_after_pending_receipts(conns: Connections) -> None:
    client = await conns.open()
    await create_producer(client)
    for sequence_id in range(5):
        await client.send_message(1, sequence_id)
    await client.send(c.CloseProducer(producer_id=1, request_id=99))
    replies = [await client.receive_command() for _ in range(6)]
    assert [type(r) for r in replies] == [c.SendReceipt] * 5 + [c.Success]
    await client.send_message(1, 5)  # a late SEND after the close is dropped, not fatal
    await client.send(c.Ping())
    assert await client.receive_command() == c.Pong()


# ---- consumers (spec §7) ------------------------------------------------------------------


async def test_subscribe_flow_message_ack_response(conns: Connections) -> None:
    client = await conns.open()
    await create_producer(client)
    await subscribe(client, initial_position=c.InitialPosition.EARLIEST)
    await client.send_message(1, 0, b"hello")
    receipt = await client.receive_command()
    assert isinstance(receipt, c.SendReceipt)
    assert receipt.message_id is not None
    ledger_id = receipt.message_id.ledger_id
    await client.send(c.Flow(consumer_id=1, message_permits=10))
    frame = await client.receive()
    assert frame.command == c.Message(
        consumer_id=1,
        message_id=c.MessageIdData(ledger_id=ledger_id, entry_id=0),
    )
    assert frame.payload is not None
    assert bytes(frame.payload.body) == b"hello"
    assert frame.payload.checksum_ok()
    await client.send(
        c.Ack(
            consumer_id=1,
            ack_type=c.AckType.INDIVIDUAL,
            message_id=(c.MessageIdData(ledger_id=ledger_id, entry_id=0),),
            request_id=4,
        )
    )
    assert await client.receive_command() == c.AckResponse(consumer_id=1, request_id=4)


async def test_ack_for_unknown_consumer_with_request_id_reports_error(
    conns: Connections,
) -> None:
    client = await conns.open()
    await client.send(
        c.Ack(consumer_id=9, ack_type=c.AckType.INDIVIDUAL, message_id=(), request_id=1)
    )
    reply = await client.receive_command()
    assert isinstance(reply, c.AckResponse)
    assert reply.error is ServerError.ConsumerNotFound


async def test_subscribe_errors_are_error_replies(conns: Connections) -> None:
    client = await conns.open()
    await subscribe(client, consumer_id=1)
    await client.send(
        c.Subscribe(
            topic=TOPIC,
            subscription="sub",
            sub_type=c.SubType.EXCLUSIVE,
            consumer_id=2,
            request_id=3,
        )
    )
    reply = await client.receive_command()
    assert isinstance(reply, c.Error)
    assert (reply.request_id, reply.error) == (3, ServerError.ConsumerBusy)


@pytest.mark.parametrize("name", ["", "  "])
async def test_subscribe_with_a_blank_subscription_name_is_refused(
    conns: Connections, name: str
) -> None:
    # Pulsar's PersistentTopic.subscribe: NamingException, answered as ProducerBusy.
    client = await conns.open()
    await client.send(
        c.Subscribe(
            topic=TOPIC, subscription=name, sub_type=c.SubType.SHARED, consumer_id=1, request_id=5
        )
    )
    assert await client.receive_command() == c.Error(
        request_id=5, error=ServerError.ProducerBusy, message="Empty subscription name"
    )


async def test_transaction_requests_are_refused_as_without_a_coordinator(
    conns: Connections,
) -> None:
    # transactionCoordinatorEnabled=false, Pulsar's default: ServerCnx answers every
    # coordinator request with ERROR NotAllowed, and the connection stays.
    client = await conns.open()
    requests = [
        c.TcClientConnectRequest(request_id=1, tc_id=0),
        c.NewTxn(request_id=2, txn_ttl_seconds=60),
        c.AddPartitionToTxn(request_id=3, txnid_most_bits=0, txnid_least_bits=1),
        c.AddSubscriptionToTxn(request_id=4, txnid_least_bits=1),
        c.EndTxn(request_id=5, txnid_least_bits=1),
    ]
    for request in requests:
        await client.send(request)
        assert await client.receive_command() == c.Error(
            request_id=request.request_id,
            error=ServerError.NotAllowedError,
            message="Transactions are not enabled.",
        )
    await create_producer(client)


async def test_last_message_id_for_empty_partition_and_batched_entries(
    broker: Broker, conns: Connections
) -> None:
    await broker.topics.create_partitioned_topic(TopicName.parse(TOPIC + "-p"), 2)
    partition = TOPIC + "-p-partition-1"
    client = await conns.open()
    await subscribe(client, topic=partition)
    await client.send(c.GetLastMessageId(consumer_id=1, request_id=1))
    empty = await client.receive_command()
    assert isinstance(empty, c.GetLastMessageIdResponse)
    assert empty.last_message_id.entry_id == -1
    assert empty.last_message_id.partition == 1
    await create_producer(client, topic=partition)
    batch = c.MessageMetadata(
        producer_name="p", sequence_id=0, publish_time=1, num_messages_in_batch=3
    )
    await client.send_message(1, 0, b"\x00" * 8, metadata=batch)
    assert isinstance(await client.receive_command(), c.SendReceipt)
    await client.send(c.GetLastMessageId(consumer_id=1, request_id=2))
    last = await client.receive_command()
    assert isinstance(last, c.GetLastMessageIdResponse)
    assert (last.last_message_id.entry_id, last.last_message_id.batch_index) == (0, 2)
    assert last.last_message_id.partition == 1
    assert last.consumer_mark_delete_position is not None


async def test_seek_closes_the_consumer_then_succeeds(conns: Connections) -> None:
    client = await conns.open()
    await subscribe(client)
    await client.send(
        c.Seek(consumer_id=1, request_id=8, message_id=c.MessageIdData(ledger_id=-1, entry_id=-1))
    )
    first = await client.receive_command()
    assert isinstance(first, c.CloseConsumer)
    assert first.consumer_id == 1
    assert await client.receive_command() == c.Success(request_id=8)
    await subscribe(client)  # the same consumer id subscribes again, as the client does


async def test_close_consumer_and_unknown_ids_get_success(conns: Connections) -> None:
    client = await conns.open()
    await subscribe(client)
    await client.send(c.CloseConsumer(consumer_id=1, request_id=5))
    assert await client.receive_command() == c.Success(request_id=5)
    await client.send(c.CloseConsumer(consumer_id=77, request_id=6))
    assert await client.receive_command() == c.Success(request_id=6)
    # Pulsar's ServerCnx: MetadataError "Consumer not found" for these three.
    await client.send(c.Unsubscribe(consumer_id=77, request_id=7))
    reply = await client.receive_command()
    assert isinstance(reply, c.Error)
    assert (reply.error, reply.message) == (ServerError.MetadataError, "Consumer not found")
    await client.send(c.Seek(consumer_id=77, request_id=8, message_publish_time=1))
    reply = await client.receive_command()
    assert isinstance(reply, c.Error)
    assert (reply.error, reply.message) == (ServerError.MetadataError, "Consumer not found")
    await client.send(c.GetLastMessageId(consumer_id=77, request_id=9))
    reply = await client.receive_command()
    assert isinstance(reply, c.Error)
    assert (reply.error, reply.message) == (ServerError.MetadataError, "Consumer not found")


async def test_consumer_stats_answers_with_numbers(conns: Connections) -> None:
    client = await conns.open()
    await subscribe(client)
    await client.send(c.ConsumerStats(request_id=2, consumer_id=1))
    reply = await client.receive_command()
    assert isinstance(reply, c.ConsumerStatsResponse)
    assert reply.error_code is None
    assert reply.available_permits == 0


# ---- teardown, unload and bad input (spec §2.5, §9) ---------------------------------------


async def test_dropped_connection_makes_its_unacked_messages_redeliverable(
    conns: Connections,
) -> None:
    first = await conns.open()
    await create_producer(first)
    await subscribe(first, sub_type=c.SubType.SHARED, initial_position=c.InitialPosition.EARLIEST)
    await first.send_message(1, 0, b"keep")
    assert isinstance(await first.receive_command(), c.SendReceipt)
    await first.send(c.Flow(consumer_id=1, message_permits=5))
    assert isinstance(await first.receive_command(), c.Message)
    await first.stream.aclose()  # dies without acking

    second = await conns.open()
    await subscribe(second, consumer_id=3, sub_type=c.SubType.SHARED)
    await second.send(c.Flow(consumer_id=3, message_permits=5))
    frame = await second.receive()
    assert isinstance(frame.command, c.Message)
    assert frame.command.redelivery_count == 0  # replayed after a disconnect: not counted
    assert frame.payload is not None
    assert bytes(frame.payload.body) == b"keep"


async def test_unload_closes_producers_and_consumers_of_the_topic(
    broker: Broker, conns: Connections
) -> None:
    client = await conns.open()
    await create_producer(client)
    await subscribe(client)
    await broker.topics.unload(TopicName.parse(TOPIC))
    closes = {type(await client.receive_command()).__name__ for _ in range(2)}
    assert closes == {"CloseProducer", "CloseConsumer"}
    await client.send_message(1, 0)  # in flight before the client saw the close: ignored
    second = await create_producer(client, producer_id=1, epoch=1)
    assert second.last_sequence_id == -1
    await subscribe(client)


async def test_garbage_on_one_connection_leaves_others_working(conns: Connections) -> None:
    good = await conns.open()
    await create_producer(good)
    bad = await conns.open()
    await bad.send_raw(b"\x00\x00\x00\x0c\x00\x00\x00\x08" + b"\xff" * 8)
    await bad.expect_closed()
    oversized = await conns.open()
    await oversized.send_raw((DEFAULT_MAX_MESSAGE_SIZE + 20 * 1024).to_bytes(4, "big"))
    await oversized.expect_closed()
    for sequence_id in range(3):
        await good.send_message(1, sequence_id)
    assert [type(await good.receive_command()) for _ in range(3)] == [c.SendReceipt] * 3


async def test_frames_up_to_max_message_size_plus_padding_are_accepted(
    conns: Connections,
) -> None:
    client = await conns.open()
    await create_producer(client)
    await client.send_message(1, 0, b"z" * (DEFAULT_MAX_MESSAGE_SIZE - 100))
    with anyio.fail_after(10):
        assert isinstance(await client.receive_command(), c.SendReceipt)


class SlowTopics:
    """The real topic service, with get_topic held until the test releases it."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.release = anyio.Event()

    async def get_topic(self, name: TopicName, *, create: bool = True) -> Any:
        await self.release.wait()
        return await self._inner.get_topic(name, create=create)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def test_close_while_creating_undoes_the_creation(broker: Broker) -> None:
    slow = SlowTopics(broker.topics)
    services = BrokerServices(
        config=broker.config,
        topics=slow,  # type: ignore[arg-type]
        ownership=broker.ownership,
        namespace_exists=broker.namespaces,
    )
    client_end, server_end = memory_stream_pair()
    session = Session(
        server_end,
        lambda s: ConnectionHandler(services, s),
        clock=broker.clock,
        max_frame_size=1 << 20,
        keepalive_interval=30,
    )
    client = WireClient(client_end)
    async with anyio.create_task_group() as tg:
        tg.start_soon(session.run)
        await client.handshake()
        await client.send(c.Producer(topic=TOPIC, producer_id=1, request_id=1, producer_name="n"))
        await client.send(
            c.Subscribe(
                topic=TOPIC,
                subscription="s",
                sub_type=c.SubType.EXCLUSIVE,
                consumer_id=1,
                request_id=2,
            )
        )
        await client.send(c.CloseProducer(producer_id=1, request_id=3))
        await client.send(c.CloseConsumer(consumer_id=1, request_id=4))
        assert {await client.receive_command() for _ in range(2)} == {
            c.Success(request_id=3),
            c.Success(request_id=4),
        }
        slow.release.set()
        failed = {}
        for _ in range(2):
            reply = await client.receive_command()
            assert isinstance(reply, c.Error)
            failed[reply.request_id] = reply.error
        assert failed == {1: ServerError.ServiceNotReady, 2: ServerError.ServiceNotReady}
        topic = await broker.topics.get_topic(TopicName.parse(TOPIC))
        assert topic.stats().producers == 0
        assert topic.stats().consumers == 0
        await client_end.aclose()


async def test_lookup_with_a_configured_listener_answers_its_url(fake_clock: FakeClock) -> None:
    config = load_config(overrides={"advertisedListeners": "internal:pulsar://10.1.2.3:6650"})
    async with open_broker(config, clock=fake_clock, listen=False, admin=False) as running:
        connections = Connections(running)
        try:
            client = await connections.open()
            await client.send(
                c.LookupTopic(topic=TOPIC, request_id=1, advertised_listener_name="internal")
            )
            reply = await client.receive_command()
            assert isinstance(reply, c.LookupTopicResponse)
            assert reply.broker_service_url == "pulsar://10.1.2.3:6650"
            assert reply.response is c.LookupType.CONNECT
        finally:
            await connections.aclose()


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.binary(min_size=1, max_size=64))
async def test_any_garbage_ends_at_most_its_own_connection(broker: Broker, garbage: bytes) -> None:
    connections = Connections(broker)
    try:
        with anyio.fail_after(10):
            victim = await connections.open()
            await victim.send_raw(garbage)
            await victim.stream.send_eof()
            # Whatever the bytes were, the broker answers or hangs up; it never crashes.
            with contextlib.suppress(EOFError, RemoteProtocolError):
                while True:
                    await victim.receive()
            witness = await connections.open()
            await witness.send(c.PartitionedTopicMetadata(topic=TOPIC, request_id=1))
            reply = await witness.receive_command()
            assert isinstance(reply, c.PartitionedTopicMetadataResponse)
            assert reply.response is c.MetadataResult.SUCCESS
    finally:
        await connections.aclose()
