"""Fakes and builders shared by the topic-layer tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio

from emubroker.naming import NamespaceName, TopicName
from emubroker.topics import (
    EntryInfo,
    ProducerHandle,
    TopicService,
    TopicSettings,
    entry_info_from_metadata,
)
from protocol.clock import FakeClock
from protocol.codec import encode_record
from protocol.commands import (
    AccessMode,
    InitialPosition,
    KeySharedMeta,
    MessageIdData,
    MessageMetadata,
    SubType,
)
from protocol.framing import build_entry, checksum
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

    def close_consumer(self, consumer_id: int) -> None:
        self.closed.append(consumer_id)

    def active_consumer_change(self, consumer_id: int, is_active: bool) -> None:
        self.active_changes.append((consumer_id, is_active))

    @property
    def entry_ids(self) -> list[int]:
        return [m.entry_id for m in self.messages]

    def take(self) -> list[Delivery]:
        out, self.messages = self.messages, []
        return out


@dataclass
class FakeProducerSink:
    closed: list[int] = field(default_factory=list)

    def close_producer(self, producer_id: int) -> None:
        self.closed.append(producer_id)


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
    args: dict[str, Any] = {
        "producer_name": None,
        "user_provided_name": False,
        "access_mode": AccessMode.SHARED,
        "epoch": 0,
        "topic_epoch": None,
    }
    args.update(kw)
    sink = args.pop("sink", FakeProducerSink())
    handle: ProducerHandle = await topic.add_producer(producer_id, sink, **args)
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
    return await topic.subscribe(
        subscription=subscription,
        sub_type=sub_type,
        consumer_id=consumer_id,
        sink=sink,
        consumer_name=consumer_name or f"c{consumer_id}",
        durable=durable,
        initial_position=initial_position,
        start_message_id=start_message_id,
        priority_level=priority_level,
        key_shared_meta=key_shared_meta,
        read_compacted=False,
        partition=-1,
        metadata=metadata,
    )


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
        ledgers=ledgers or LedgerStore(),
        namespaces=KNOWN_NAMESPACES.__contains__,
        namespace_policies=namespace_policies,
    )
    async with service:
        yield service


def topic_name(local: str = "t", domain: str = "persistent") -> TopicName:
    return TopicName.parse(f"{domain}://public/default/{local}")


def split_section(section: bytes) -> tuple[MessageMetadata, bytes]:
    """The metadata and payload a MESSAGE would carry."""
    from protocol.codec import decode_record

    if section[:2] == b"\x0e\x01":
        section = section[6:]
    size = int.from_bytes(section[:4], "big")
    return decode_record(MessageMetadata, section[4 : 4 + size]), section[4 + size :]
