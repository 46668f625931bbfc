"""A tiny scripted Pulsar broker over in-memory transports, for `protocol.client` tests.

It speaks the broker side through `protocol.connection.Connection(Role.BROKER)` and keeps just
enough state to make a client's life realistic: one ledger per topic (id 7, entries from 0),
durable and non-durable subscriptions with cursors, permits, acks, redelivery counts, seek and
GET_LAST_MESSAGE_ID. Every received command is recorded; tests script anything else with
`on(CommandType, hook)` (a hook returning True replaces the default handling), hold receipts,
push frames (`session.send`) or drop connections (`session.drop()`).

    async with fake_broker() as broker:
        async with open_client(broker.url, connector=broker.connect, clock=clock) as client:
            ...
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from protocol import commands as c
from protocol.client.transport import StreamTransport, memory_transport_pair
from protocol.codec import decode_record
from protocol.connection import CLOSED, Connection, Role, negotiated_version
from protocol.errors import ProtocolError, ServerError
from protocol.framing import DEFAULT_MAX_MESSAGE_SIZE, Payload, encode_section_frame
from protocol.framing import payload_section as make_section
from protocol.ids import MAX_I64

LEDGER = 7

Hook = Callable[["Session", Any, Payload | None], bool | None]


@dataclass
class Entry:
    section: bytes  # [0x0e01 crc] | metadata_size | metadata | payload, replayed in MESSAGE
    metadata: c.MessageMetadata

    @property
    def messages(self) -> int:
        return self.metadata.num_messages_in_batch or 1


@dataclass
class Topic:
    name: str
    entries: list[Entry] = field(default_factory=list)

    @property
    def partition(self) -> int:
        _, sep, tail = self.name.rpartition("-partition-")
        return int(tail) if sep and tail.isdigit() else -1


@dataclass
class SubConsumer:
    session: Session
    consumer_id: int
    permits: int = 0
    unacked: set[int] = field(default_factory=set)


@dataclass
class Subscription:
    topic: Topic
    name: str
    durable: bool
    cursor: int = 0  # next entry to read
    acked: set[int] = field(default_factory=set)
    redeliver: list[int] = field(default_factory=list)
    redelivery_counts: dict[int, int] = field(default_factory=dict)
    consumers: list[SubConsumer] = field(default_factory=list)
    next_consumer: int = 0


class Session:
    """One client connection, broker side."""

    def __init__(self, broker: FakeBroker, url: str, transport: StreamTransport) -> None:
        self.broker = broker
        self.url = url
        self.transport = transport
        self.conn = Connection(Role.BROKER, max_frame_size=64 * 1024 * 1024)
        self.scope = anyio.CancelScope()
        self._outbox: list[bytes] = []
        self._wakeup = anyio.Event()
        self.closed = False
        self.producers: dict[int, str] = {}  # producer id -> topic
        self._ended = anyio.Event()

    def send(self, command: c.Command) -> None:
        """Queue a command to the client."""
        self.write(self.conn.send(command))

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        self._outbox.append(data)
        self._wakeup.set()

    def drop(self) -> None:
        """Cut the connection (the client sees end of stream)."""
        self.closed = True
        self.scope.cancel()

    async def disconnect(self) -> None:
        """`drop()` and wait until both ends have noticed."""
        self.drop()
        await self._ended.wait()
        await anyio.wait_all_tasks_blocked()

    async def serve(self) -> None:
        try:
            with self.scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._write_loop)
                    await self._read_loop()
                    tg.cancel_scope.cancel()
        finally:
            self.closed = True
            self.broker._session_ended(self)
            with anyio.CancelScope(shield=True):
                await self.transport.aclose()
            self._ended.set()

    async def _write_loop(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup = anyio.Event()
            out, self._outbox = self._outbox, []
            await self.transport.send(b"".join(out))

    async def _read_loop(self) -> None:
        try:
            while True:
                data = await self.transport.receive(65536)
                self.conn.receive_data(data)
                while True:
                    frame = self.conn.next_frame()
                    if frame is None:
                        break
                    if frame is CLOSED:
                        return
                    self.broker._handle(self, frame.command, frame.payload)
        except (ProtocolError, Exception) as exc:  # a test broker: record and hang up
            self.broker.errors.append(exc)


class FakeBroker:
    """See the module docstring.

    Args:
        url: the URL lookups answer with (every connection is accepted whatever its address).
        max_message_size: announced in CONNECTED (None leaves the field out).
        protocol_version: the highest version announced.
    """

    def __init__(
        self,
        tg: anyio.abc.TaskGroup,
        *,
        url: str = "pulsar://fake:6650",
        max_message_size: int | None = DEFAULT_MAX_MESSAGE_SIZE,
        protocol_version: int = 20,
    ) -> None:
        self._tg = tg
        self.url = url
        self.max_message_size = max_message_size
        self.protocol_version = protocol_version
        self.sessions: list[Session] = []
        self.connects: list[str] = []  # URL of every connection, in order
        self.received: list[tuple[Session, c.Command]] = []
        self.errors: list[BaseException] = []
        self.partitions: dict[str, int] = {}
        self.namespaces = {"public/default"}
        self.topics: dict[str, Topic] = {}
        self.subscriptions: dict[tuple[str, str], Subscription] = {}
        self.hooks: dict[type, list[Hook]] = {}
        self.hold_receipts = False
        self.held_receipts: list[tuple[Session, c.SendReceipt]] = []
        self._producer_names = itertools.count()

    # ---- scripting -----------------------------------------------------------------------------

    async def connect(self, host: str, port: int) -> StreamTransport:
        """The client's connector: a fresh in-memory connection served by this broker."""
        client_side, broker_side = memory_transport_pair()
        url = f"pulsar://{host}:{port}"
        session = Session(self, url, broker_side)
        self.sessions.append(session)
        self.connects.append(url)
        self._tg.start_soon(session.serve)
        return client_side

    def on(self, kind: type, hook: Hook) -> None:
        """Run `hook(session, command, payload)` for each `kind` received, before the default.

        A hook that returns True replaces the default handling.
        """
        self.hooks.setdefault(kind, []).append(hook)

    def fail_next(self, kind: type, error: ServerError, times: int = 1) -> None:
        """Answer the next `times` requests of `kind` with ERROR `error`."""
        remaining = [times]

        def hook(session: Session, command: Any, payload: Payload | None) -> bool:
            if remaining[0] <= 0:
                return False
            remaining[0] -= 1
            session.send(c.Error(request_id=command.request_id, error=error, message="scripted"))
            return True

        self.on(kind, hook)

    def of_type(self, kind: type[Any]) -> list[Any]:
        """Every received command of `kind`, in order."""
        return [command for _, command in self.received if isinstance(command, kind)]

    def release_receipts(self) -> None:
        held, self.held_receipts = self.held_receipts, []
        for session, receipt in held:
            session.send(receipt)

    def topic(self, name: str) -> Topic:
        if name not in self.topics:
            self.topics[name] = Topic(name)
        return self.topics[name]

    def append(self, topic: str, metadata: c.MessageMetadata, section: bytes) -> int:
        """Store an entry (as if produced) and dispatch it; returns its entry id."""
        t = self.topic(topic)
        t.entries.append(Entry(section, metadata))
        for sub in self.subscriptions.values():
            if sub.topic is t:
                self._dispatch(sub)
        return len(t.entries) - 1

    def _session_ended(self, session: Session) -> None:
        for sub in list(self.subscriptions.values()):
            for consumer in list(sub.consumers):
                if consumer.session is session:
                    self._remove_consumer(sub, consumer)

    # ---- command handling ----------------------------------------------------------------------

    def _handle(self, session: Session, command: c.Command, payload: Payload | None) -> None:
        self.received.append((session, command))
        for hook in self.hooks.get(type(command), ()):
            if hook(session, command, payload):
                return
        handler = getattr(self, "_on_" + type(command).__name__, None)
        if handler is not None:
            handler(session, command, payload)

    def _on_Connect(self, s: Session, cmd: c.Connect, _: Any) -> None:
        s.send(
            c.Connected(
                server_version="fake-broker",
                protocol_version=min(
                    negotiated_version(cmd.protocol_version), self.protocol_version
                ),
                max_message_size=self.max_message_size,
            )
        )

    def _on_Ping(self, s: Session, cmd: c.Ping, _: Any) -> None:
        s.send(c.Pong())

    def _namespace_ok(self, topic: str) -> bool:
        rest = topic.split("://", 1)[-1]
        return rest.rsplit("/", 1)[0] in self.namespaces

    def _on_PartitionedTopicMetadata(
        self, s: Session, cmd: c.PartitionedTopicMetadata, _: Any
    ) -> None:
        if not self._namespace_ok(cmd.topic):
            s.send(
                c.PartitionedTopicMetadataResponse(
                    request_id=cmd.request_id,
                    response=c.MetadataResult.FAILED,
                    error=ServerError.TopicNotFound,
                    message="namespace does not exist",
                )
            )
            return
        s.send(
            c.PartitionedTopicMetadataResponse(
                request_id=cmd.request_id,
                partitions=self.partitions.get(cmd.topic, 0),
                response=c.MetadataResult.SUCCESS,
            )
        )

    def _on_LookupTopic(self, s: Session, cmd: c.LookupTopic, _: Any) -> None:
        s.send(
            c.LookupTopicResponse(
                request_id=cmd.request_id,
                broker_service_url=self.url,
                response=c.LookupType.CONNECT,
                authoritative=True,
            )
        )

    def _on_GetTopicsOfNamespace(self, s: Session, cmd: c.GetTopicsOfNamespace, _: Any) -> None:
        names = tuple(n for n in self.topics if n.split("://")[-1].startswith(cmd.namespace + "/"))
        s.send(c.GetTopicsOfNamespaceResponse(request_id=cmd.request_id, topics=names))

    def _on_Producer(self, s: Session, cmd: c.Producer, _: Any) -> None:
        self.topic(cmd.topic)
        name = cmd.producer_name or f"fake-{next(self._producer_names)}"
        s.producers[cmd.producer_id] = cmd.topic
        s.send(c.ProducerSuccess(request_id=cmd.request_id, producer_name=name))

    def _on_Send(self, s: Session, cmd: c.Send, payload: Payload | None) -> None:
        assert payload is not None
        topic = s.producers[cmd.producer_id]
        metadata = decode_record(c.MessageMetadata, payload.metadata)
        entry_id = self.append(topic, metadata, make_section(payload.entry, payload.checksum))
        receipt = c.SendReceipt(
            producer_id=cmd.producer_id,
            sequence_id=cmd.sequence_id,
            message_id=c.MessageIdData(ledger_id=LEDGER, entry_id=entry_id),
        )
        if self.hold_receipts:
            self.held_receipts.append((s, receipt))
        else:
            s.send(receipt)

    def _on_CloseProducer(self, s: Session, cmd: c.CloseProducer, _: Any) -> None:
        s.send(c.Success(request_id=cmd.request_id))

    def _on_Subscribe(self, s: Session, cmd: c.Subscribe, _: Any) -> None:
        if not self._namespace_ok(cmd.topic):
            s.send(
                c.Error(request_id=cmd.request_id, error=ServerError.TopicNotFound, message="ns")
            )
            return
        topic = self.topic(cmd.topic)
        key = (cmd.topic, cmd.subscription)
        sub = self.subscriptions.get(key)
        if sub is None:
            end = len(topic.entries)
            if cmd.durable:
                cursor = 0 if cmd.initial_position is c.InitialPosition.EARLIEST else end
            else:
                start = cmd.start_message_id
                if start is None or start.entry_id == MAX_I64:
                    cursor = end
                elif start.entry_id < 0:
                    cursor = 0
                else:
                    cursor = start.entry_id  # deliver the start entry itself (spec §7.1)
            sub = Subscription(topic, cmd.subscription, cmd.durable, cursor)
            self.subscriptions[key] = sub
        elif sub.consumers and cmd.sub_type is c.SubType.EXCLUSIVE:
            s.send(
                c.Error(request_id=cmd.request_id, error=ServerError.ConsumerBusy, message="busy")
            )
            return
        sub.consumers.append(SubConsumer(s, cmd.consumer_id))
        s.send(c.Success(request_id=cmd.request_id))

    def _find(self, s: Session, consumer_id: int) -> tuple[Subscription, SubConsumer] | None:
        for sub in self.subscriptions.values():
            for consumer in sub.consumers:
                if consumer.session is s and consumer.consumer_id == consumer_id:
                    return sub, consumer
        return None

    def _remove_consumer(self, sub: Subscription, consumer: SubConsumer) -> None:
        sub.consumers.remove(consumer)
        sub.redeliver.extend(sorted(consumer.unacked))
        for entry_id in consumer.unacked:
            sub.redelivery_counts[entry_id] = sub.redelivery_counts.get(entry_id, 0) + 1
        consumer.unacked.clear()
        if not sub.consumers and not sub.durable:
            self.subscriptions.pop((sub.topic.name, sub.name), None)
        else:
            self._dispatch(sub)

    def _on_Flow(self, s: Session, cmd: c.Flow, _: Any) -> None:
        found = self._find(s, cmd.consumer_id)
        if found is not None:
            found[1].permits += cmd.message_permits
            self._dispatch(found[0])

    def _dispatch(self, sub: Subscription) -> None:
        while sub.consumers:
            ready = [x for x in sub.consumers if x.permits > 0 and not x.session.closed]
            if not ready:
                return
            if sub.redeliver:
                entry_id = sub.redeliver.pop(0)
                if entry_id in sub.acked:
                    continue
            elif sub.cursor < len(sub.topic.entries):
                entry_id = sub.cursor
                sub.cursor += 1
                if entry_id in sub.acked:
                    continue
            else:
                return
            consumer = ready[sub.next_consumer % len(ready)]
            sub.next_consumer += 1
            entry = sub.topic.entries[entry_id]
            consumer.permits -= entry.messages
            consumer.unacked.add(entry_id)
            message = c.Message(
                consumer_id=consumer.consumer_id,
                message_id=c.MessageIdData(
                    ledger_id=LEDGER, entry_id=entry_id, partition=sub.topic.partition
                ),
                redelivery_count=sub.redelivery_counts.get(entry_id, 0),
            )
            consumer.session.write(encode_section_frame(message, entry.section))

    def _on_Ack(self, s: Session, cmd: c.Ack, _: Any) -> None:
        found = self._find(s, cmd.consumer_id)
        if found is None or cmd.validation_error is not None:
            return
        sub = found[0]
        for data in cmd.message_id:
            if data.ack_set:
                continue  # partial batch ack: the entry stays unacked
            if cmd.ack_type is c.AckType.CUMULATIVE:
                done = set(range(data.entry_id + 1))
            else:
                done = {data.entry_id}
            sub.acked |= done
            for x in sub.consumers:
                x.unacked -= done

    def _on_RedeliverUnacknowledgedMessages(
        self, s: Session, cmd: c.RedeliverUnacknowledgedMessages, _: Any
    ) -> None:
        found = self._find(s, cmd.consumer_id)
        if found is None:
            return
        sub, consumer = found
        ids = [d.entry_id for d in cmd.message_ids] if cmd.message_ids else sorted(consumer.unacked)
        for entry_id in ids:
            if entry_id in consumer.unacked:
                consumer.unacked.discard(entry_id)
                sub.redelivery_counts[entry_id] = sub.redelivery_counts.get(entry_id, 0) + 1
                sub.redeliver.append(entry_id)
        sub.redeliver.sort()
        self._dispatch(sub)

    def _on_Seek(self, s: Session, cmd: c.Seek, _: Any) -> None:
        found = self._find(s, cmd.consumer_id)
        if found is None:
            s.send(
                c.Error(request_id=cmd.request_id, error=ServerError.ConsumerNotFound, message="")
            )
            return
        sub, _consumer = found
        entries = sub.topic.entries
        if cmd.message_id is not None:
            entry_id = cmd.message_id.entry_id
            sub.cursor = len(entries) if entry_id == MAX_I64 else max(entry_id, 0)
        else:
            when = cmd.message_publish_time or 0
            sub.cursor = next(
                (i for i, e in enumerate(entries) if e.metadata.publish_time >= when), len(entries)
            )
        sub.acked = {e for e in sub.acked if e < sub.cursor}
        sub.redeliver.clear()
        for consumer in list(sub.consumers):  # spec §7.5: disconnect, then SUCCESS
            consumer.unacked.clear()
            consumer.session.send(c.CloseConsumer(consumer_id=consumer.consumer_id, request_id=0))
            sub.consumers.remove(consumer)
        s.send(c.Success(request_id=cmd.request_id))

    def _on_GetLastMessageId(self, s: Session, cmd: c.GetLastMessageId, _: Any) -> None:
        found = self._find(s, cmd.consumer_id)
        topic = found[0].topic if found else None
        entries = topic.entries if topic else []
        partition = topic.partition if topic else -1
        if entries:
            last = entries[-1]
            batch = last.metadata.num_messages_in_batch
            last_id = c.MessageIdData(
                ledger_id=LEDGER,
                entry_id=len(entries) - 1,
                partition=partition,
                batch_index=batch - 1 if batch is not None else -1,
            )
        else:
            last_id = c.MessageIdData(ledger_id=LEDGER, entry_id=-1, partition=partition)
        mark = found[0].cursor - 1 if found else -1
        s.send(
            c.GetLastMessageIdResponse(
                last_message_id=last_id,
                request_id=cmd.request_id,
                consumer_mark_delete_position=c.MessageIdData(ledger_id=LEDGER, entry_id=mark),
            )
        )

    def _on_Unsubscribe(self, s: Session, cmd: c.Unsubscribe, _: Any) -> None:
        found = self._find(s, cmd.consumer_id)
        if found is not None:
            self.subscriptions.pop((found[0].topic.name, found[0].name), None)
        s.send(c.Success(request_id=cmd.request_id))

    def _on_CloseConsumer(self, s: Session, cmd: c.CloseConsumer, _: Any) -> None:
        found = self._find(s, cmd.consumer_id)
        if found is not None:
            self._remove_consumer(*found)
        s.send(c.Success(request_id=cmd.request_id))


@asynccontextmanager
async def fake_broker(**options: Any) -> AsyncIterator[FakeBroker]:
    """Run a `FakeBroker` for the duration of the block."""
    async with anyio.create_task_group() as tg:
        broker = FakeBroker(tg, **options)
        try:
            yield broker
        finally:
            tg.cancel_scope.cancel()
