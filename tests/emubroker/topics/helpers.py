"""Fakes and builders shared by the topic-layer tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio

from emubroker.naming import AssignedBroker, NamespaceName, TopicName
from emubroker.policies import Policies
from emubroker.ratelimit.quotas import DispatchThrottlingConfig
from emubroker.storage import MemoryBackend
from emubroker.topics import (
    EntryInfo,
    ProducerHandle,
    ProducerRequest,
    SubscribeRequest,
    TopicService,
    TopicSettings,
    entry_info_from_metadata,
)
from emubroker.topics.sinks import send_each
from emubroker.topics.throttling import DispatchThrottling
from protocol.clock import FakeClock
from protocol.codec import decode_record, encode_record
from protocol.commands import (
    AckType,
    InitialPosition,
    KeySharedMeta,
    MessageIdData,
    MessageMetadata,
    SubType,
)
from protocol.framing import build_entry, checksum, decode_payload_section
from storage_stub.ledger import LedgerStore

KNOWN_NAMESPACES = {NamespaceName("public", "default"), NamespaceName("public", "default-2")}


@dataclass(frozen=True)
class Delivery:
    consumer_id: int
    ledger_id: int
    entry_id: int
    partition: int
    redelivery_count: int
    ack_set: tuple[int, ...]
    section: bytes


@dataclass
class FakeConsumerSink:
    """Records what a topic pushes to one session."""

    messages: list[Delivery] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)
    active_changes: list[tuple[int, bool]] = field(default_factory=list)
    ended: list[int] = field(default_factory=list)
    assigned: list[AssignedBroker | None] = field(default_factory=list)
    writable: bool = True

    def send_message(
        self,
        consumer_id: int,
        ledger_id: int,
        entry_id: int,
        partition: int,
        redelivery_count: int,
        ack_set: tuple[int, ...],
        section: bytes,
    ) -> None:
        self.messages.append(
            Delivery(
                consumer_id, ledger_id, entry_id, partition, redelivery_count, ack_set, section
            )
        )

    def send_messages(
        self, consumer_id: int, ledger_id: int, entry_id: int, partition: int, sections: list[bytes]
    ) -> int:
        return send_each(self, consumer_id, ledger_id, entry_id, partition, sections)

    def close_consumer(self, consumer_id: int, assigned: AssignedBroker | None = None) -> None:
        self.closed.append(consumer_id)
        self.assigned.append(assigned)

    def active_consumer_change(self, consumer_id: int, is_active: bool) -> None:
        self.active_changes.append((consumer_id, is_active))

    def reached_end_of_topic(self, consumer_id: int) -> None:
        self.ended.append(consumer_id)

    @property
    def entry_ids(self) -> list[int]:
        return [m.entry_id for m in self.messages]

    def take(self) -> list[Delivery]:
        out, self.messages = self.messages, []
        return out


@dataclass
class FakeProducerSink:
    closed: list[int] = field(default_factory=list)
    assigned: list[AssignedBroker | None] = field(default_factory=list)
    held: list[int] = field(default_factory=list)

    def close_producer(self, producer_id: int, assigned: AssignedBroker | None = None) -> None:
        self.closed.append(producer_id)
        self.assigned.append(assigned)

    def hold_producer(self, producer_id: int) -> None:
        self.held.append(producer_id)


def make_entry(
    payload: bytes = b"x",
    *,
    sequence_id: int = 0,
    publish_time: int = 1_000,
    batch: int | None = None,
    key: str | None = None,
    ordering_key: bytes | None = None,
    deliver_at_time: int | None = None,
    producer_name: str = "p",
) -> tuple[bytes, int, EntryInfo]:
    """An entry as a SEND carries it: bytes, CRC and the info the handler would decode."""
    meta = MessageMetadata(
        producer_name=producer_name,
        sequence_id=sequence_id,
        publish_time=publish_time,
        partition_key=key,
        ordering_key=ordering_key,
        num_messages_in_batch=batch,
        deliver_at_time=deliver_at_time,
    )
    meta_bytes = encode_record(meta)
    entry = build_entry(meta_bytes, payload)
    return entry, checksum(entry), entry_info_from_metadata(meta_bytes, size=len(entry))


async def publish(
    topic: Any, producer: ProducerHandle, payload: bytes = b"x", **kw: Any
) -> tuple[int, int]:
    entry, crc, info = make_entry(payload, **kw)
    position: tuple[int, int] = await topic.publish(producer, entry, crc, info)
    return position


async def add_producer(topic: Any, producer_id: int = 1, **kw: Any) -> ProducerHandle:
    sink = kw.pop("sink", FakeProducerSink())
    on_waiting = kw.pop("on_waiting", None)
    kw.pop("user_provided_name", None)  # the broker reads only the name itself
    request = ProducerRequest(producer_id=producer_id, **kw)
    handle: ProducerHandle = await topic.add_producer(request, sink, on_waiting=on_waiting)
    return handle


async def subscribe(
    topic: Any,
    sink: FakeConsumerSink,
    *,
    subscription: str = "sub",
    sub_type: SubType = SubType.EXCLUSIVE,
    consumer_id: int = 1,
    consumer_name: str | None = None,
    durable: bool = True,
    initial_position: InitialPosition = InitialPosition.EARLIEST,
    start_message_id: MessageIdData | None = None,
    priority_level: int = 0,
    key_shared_meta: KeySharedMeta | None = None,
    metadata: dict[str, str] | None = None,
) -> Any:
    request = SubscribeRequest(
        subscription=subscription,
        sub_type=sub_type,
        consumer_id=consumer_id,
        consumer_name=consumer_name or f"c{consumer_id}",
        durable=durable,
        initial_position=initial_position,
        start_message_id=start_message_id,
        priority_level=priority_level,
        key_shared_meta=key_shared_meta,
        metadata=metadata or {},
    )
    return await topic.subscribe(request, sink)


def mid(ledger_id: int, entry_id: int, ack_set: tuple[int, ...] = ()) -> MessageIdData:
    return MessageIdData(ledger_id=ledger_id, entry_id=entry_id, ack_set=ack_set)


async def settle() -> None:
    """Let every dispatcher run its round."""
    await anyio.wait_all_tasks_blocked()


@contextlib.asynccontextmanager
async def open_service(
    clock: FakeClock | None = None,
    *,
    ledgers: LedgerStore | None = None,
    namespace_policies: Any = None,
    **settings: Any,
) -> AsyncIterator[TopicService]:
    service = TopicService(
        config=TopicSettings(**settings),
        clock=clock or FakeClock(),
        ledgers=MemoryBackend(ledgers or LedgerStore()),
        namespaces=KNOWN_NAMESPACES.__contains__,
        namespace_policies=namespace_policies,
    )
    async with service.running():
        yield service


def topic_name(local: str = "t", domain: str = "persistent") -> TopicName:
    return TopicName.parse(f"{domain}://public/default/{local}")


def split_section(section: bytes) -> tuple[MessageMetadata, bytes]:
    """The metadata and payload a MESSAGE would carry."""
    stored = decode_payload_section(section)
    return decode_record(MessageMetadata, stored.metadata), bytes(stored.body)


BACKOFF = 1.001
"""The throttling backoff of the topic-layer tests. The token bucket refills only *strictly* more
than a period after its last refill, and Pulsar retries a throttled read exactly 1000 ms later; on
a FakeClock that retry would land exactly on the boundary (see ``readsize``'s docstring)."""


@contextlib.asynccontextmanager
async def throttled(
    clock: FakeClock,
    *,
    namespace: Policies | None = None,
    trace: Any = None,
    **config: Any,
) -> AsyncIterator[tuple[TopicService, DispatchThrottling]]:
    """A TopicService with dispatch throttling configured by ``config`` (Pulsar's key names)."""
    throttling = DispatchThrottling(
        DispatchThrottlingConfig(**config),
        clock=clock,
        namespace_policies=lambda ns: namespace,
        trace=trace,
        backoff=BACKOFF,
    )
    service = TopicService(
        config=TopicSettings(),
        clock=clock,
        ledgers=MemoryBackend(LedgerStore()),
        namespaces=KNOWN_NAMESPACES.__contains__,
        throttling=throttling,
    )
    async with service.running():
        yield service, throttling


async def backlog(
    topic: Any, count: int, *, batch: int | None = None, payload: bytes = b"x"
) -> None:
    """Publish ``count`` entries from a new producer."""
    producer = await add_producer(topic)
    for i in range(count):
        entry, crc, info = make_entry(payload, sequence_id=i, batch=batch)
        await topic.publish(producer, entry, crc, info)


class PacedConsumer(FakeConsumerSink):
    """A client consumer on a FakeClock that spends ``per_message`` seconds on each message.

    As the official client does: it takes messages in arrival order, returns a permit for each
    one it takes and sends them in a FLOW once half its receiver queue is due
    (``ConsumerImpl::increaseAvailablePermits``); it acknowledges a message after working on it,
    grouping acks for ``ack_group_time`` seconds (``ackGroupingTimeMs``, 100 ms by default; 0:
    one ACK per message). Acks still grouped are sent when it runs out of messages.

    Attributes:
        times: The clock's time at each delivery, in order.
        flows: FLOWs sent after the first one.
    """

    def __init__(
        self,
        clock: FakeClock,
        *,
        per_message: float,
        receiver_queue: int = 1000,
        ack_group_time: float = 0.1,
    ):
        super().__init__()
        self.clock = clock
        self.per_message = per_message
        self.receiver_queue = receiver_queue
        self.ack_group_time = ack_group_time
        self.times: list[float] = []
        self.flows = 0
        self._arrived = anyio.Event()

    def send_message(self, *args: Any) -> None:
        super().send_message(*args)
        self.times.append(self.clock.now())
        self._arrived.set()

    async def run(self, consumer: Any, grant: bool = True) -> None:
        """Grant the receiver queue (unless done), then take, work on and ack messages forever."""
        if grant:
            consumer.flow(self.receiver_queue)
        clock = self.clock
        taken = due = 0
        grouped: list[MessageIdData] = []
        flush_at = 0.0
        while True:
            if taken == len(self.messages):
                if grouped:
                    consumer.ack(AckType.INDIVIDUAL, grouped)
                    grouped = []
                while taken == len(self.messages):
                    self._arrived = anyio.Event()
                    await self._arrived.wait()
            delivery = self.messages[taken]
            taken += 1
            due += 1
            if due >= self.receiver_queue // 2:
                consumer.flow(due)
                self.flows += 1
                due = 0
            await clock.sleep(self.per_message)
            if not grouped:
                flush_at = clock.now() + self.ack_group_time
            grouped.append(mid(delivery.ledger_id, delivery.entry_id))
            if clock.now() >= flush_at:
                consumer.ack(AckType.INDIVIDUAL, grouped)
                grouped = []
