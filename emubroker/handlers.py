"""Command -> service call, per connection; domain errors -> the reply form of spec §4.2, once.

One :class:`ConnectionHandler` serves one session. ``handle_frame`` is called by the session's
reader for every frame and never blocks:

* hot, fire-and-forget commands (FLOW, ACK, REDELIVER) and cheap queries (GET_LAST_MESSAGE_ID,
  CONSUMER_STATS, GET_SCHEMA) are answered inline;
* SEND is queued on its producer's FIFO; one publisher task per producer awaits
  ``Topic.publish`` entry by entry, so receipts leave in SEND order (spec §6.2: the client matches
  them to the head of its queue) while different producers publish concurrently;
* requests that wait on something (lookup, producer, subscribe, seek, close, unsubscribe) run as
  tasks in the handler's task group, so pipelined lookups and subscribes proceed concurrently.

Errors: topics raise ``protocol.errors.BrokerError`` subclasses; the request's task catches them
and answers in the form the client routes back to the request (PARTITIONED_METADATA and LOOKUP
with ``response=Failed`` — an ERROR for them would be ignored and the caller would hang — PRODUCER
and SUBSCRIBE with ERROR, ACK with ACK_RESPONSE ...). Unexpected exceptions are logged and
answered as ``UnknownError`` in the same form; they never end the connection.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVarTuple

import anyio

from emubroker.naming import InvalidNameError, NamespaceName, TopicName
from emubroker.topics.entry import entry_info_from_metadata
from emubroker.topics.sinks import ConsumerSink, ProducerSink
from protocol import commands as c
from protocol.connection import negotiated_version
from protocol.errors import (
    BrokerError,
    ConsumerNotFoundError,
    InvalidTopicNameError,
    RemoteProtocolError,
    ServerError,
    ServiceNotReadyError,
    TopicNotFoundError,
    UnknownError,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from anyio.abc import TaskGroup, TaskStatus

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.ownership import OwnershipTable
    from emubroker.topics import AnyTopic, ConsumerHandle, ProducerHandle, TopicService
    from emubroker.topics.entry import EntryInfo
    from protocol.framing import Frame

__all__ = ["SERVER_VERSION", "BrokerServices", "ConnectionHandler", "SessionPort"]

log = logging.getLogger(__name__)

Ts = TypeVarTuple("Ts")


class SessionPort(ConsumerSink, ProducerSink, Protocol):
    """What a handler needs of its connection (``net.session.Session`` implements it).

    It is also the sink the handler hands to topics for this connection's consumers and
    producers.
    """

    @property
    def peer(self) -> str:
        """The client's address, for logs and CONSUMER_STATS."""
        ...

    def send_command(self, command: c.Command) -> None:
        """Queue a command for the client (non-blocking)."""
        ...

    def close(self, reason: str, *, error: bool = True) -> None:
        """Hang up after flushing what is queued."""
        ...


def _server_version() -> str:
    try:
        return f"emubroker-{version('emubroker')}"
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "emubroker-dev"


SERVER_VERSION: Final = _server_version()
"""``CONNECTED.server_version`` (spec §3.1: any string, but it must be there)."""

SCHEMA_VERSION_ZERO: Final = bytes(8)
"""The first schema version: an 8-byte big-endian 0 (spec §6.1, ``test_schema_version``)."""

INITIAL_SUBSCRIPTION_CONSUMER_ID: Final = -1
"""Consumer id of the throwaway consumer that creates a DLQ producer's initial subscription."""


@dataclass(frozen=True, slots=True)
class BrokerServices:
    """What every connection's handler shares: built once by the app.

    Attributes:
        config: The broker configuration.
        topics: The topic registry.
        ownership: The bundle -> owner table answering lookups.
        namespace_exists: Whether a namespace exists (tenants/namespaces live in the metadata
            store; the app keeps this view current).
        listeners: ``advertisedListeners`` by name, for LOOKUPs naming a listener.
    """

    config: BrokerConfig
    topics: TopicService
    ownership: OwnershipTable
    namespace_exists: Callable[[NamespaceName], bool]
    listeners: dict[str, str] = field(default_factory=dict)


class _Producer:
    """A producer of this connection and the FIFO of its SENDs awaiting storage."""

    __slots__ = ("closing", "detached", "done", "handle", "producer_id", "queue", "topic", "wakeup")

    def __init__(self, producer_id: int, topic: AnyTopic, handle: ProducerHandle) -> None:
        self.producer_id = producer_id
        self.topic = topic
        self.handle = handle
        # (sequence_id, entry, checksum, info, error): info is None for a SEND that fails.
        self.queue: deque[tuple[int, bytes, int | None, EntryInfo | None, str]] = deque()
        self.wakeup = anyio.Event()
        self.done = anyio.Event()  # the publisher task has stopped
        self.closing = False  # the client closed it: publish what is queued, then stop
        self.detached = False  # the broker closed it: stop publishing, send nothing more

    def stopped(self) -> bool:
        """Detached (read through a call: it changes while the publisher awaits)."""
        return self.detached


class _Consumer:
    """A consumer of this connection: the topic's handle and the partition it reads."""

    __slots__ = ("handle", "partition")

    def __init__(self, handle: ConsumerHandle, partition: int) -> None:
        self.handle = handle
        self.partition = partition


class _NullSink:
    """Sink of the throwaway consumer that creates a DLQ producer's initial subscription."""

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
        pass

    def close_consumer(self, consumer_id: int) -> None:
        pass

    def active_consumer_change(self, consumer_id: int, is_active: bool) -> None:
        pass


def _topic_name(name: str) -> TopicName:
    try:
        return TopicName.parse(name)
    except InvalidNameError as exc:
        raise InvalidTopicNameError(str(exc)) from None


def _as_broker_error(exc: Exception, what: str) -> BrokerError:
    if isinstance(exc, BrokerError):
        return exc
    log.exception("unexpected failure handling %s", what)
    return UnknownError(f"{what} failed: {exc!r}")


class ConnectionHandler:
    """The command handler of one connection (see the module docstring).

    Args:
        services: The broker's shared services.
        session: The connection: where replies go, and the sink handed to topics.
    """

    def __init__(self, services: BrokerServices, session: SessionPort) -> None:
        self._services = services
        self._topics = services.topics
        self._session = session
        self._send = session.send_command
        self._tg: TaskGroup | None = None
        self._producers: dict[int, _Producer] = {}
        self._consumers: dict[int, _Consumer] = {}
        self._pending_producers: set[int] = set()
        self._pending_consumers: set[int] = set()
        # Producers closed on this connection: SENDs the client had in flight when it learned of
        # the close are expected and dropped (Pulsar's ServerCnx.recentlyClosedProducers).
        self._closed_producers: set[int] = set()

    # ---- lifetime ----------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run the request tasks until cancelled, then release the connection's handles.

        Closing its producers and consumers makes their unacknowledged messages redeliverable
        (spec §9 step 5).
        """
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                task_status.started()
                await anyio.Event().wait()  # requests start in tg; we live until cancelled
        finally:
            with anyio.CancelScope(shield=True):
                await self._release_all()

    async def _release_all(self) -> None:
        producers, self._producers = self._producers, {}
        consumers, self._consumers = self._consumers, {}
        for producer in producers.values():
            producer.detached = True
            try:
                await producer.topic.remove_producer(producer.handle)
            except Exception:
                log.exception("removing producer %d failed", producer.producer_id)
        for consumer_id, consumer in consumers.items():
            try:
                await consumer.handle.close()
            except Exception:
                log.exception("closing consumer %d failed", consumer_id)

    def _start(self, fn: Callable[[*Ts], Coroutine[Any, Any, None]], *args: *Ts) -> None:
        assert self._tg is not None, "handle_frame before run() started"
        self._tg.start_soon(fn, *args)

    # ---- dispatch ----------------------------------------------------------------------------

    def handle_frame(self, frame: Frame) -> None:
        """Handle one frame from the client (never blocks)."""
        command = frame.command
        # Hot commands first: each case is an isinstance check.
        match command:
            case c.Send():
                self._on_send(command, frame)
            case c.Flow():
                consumer = self._consumers.get(command.consumer_id)
                if consumer is not None:
                    consumer.handle.flow(command.message_permits)
            case c.Ack():
                self._on_ack(command)
            case c.RedeliverUnacknowledgedMessages():
                consumer = self._consumers.get(command.consumer_id)
                if consumer is not None:
                    consumer.handle.redeliver(command.message_ids or None)
            case c.LookupTopic():
                self._start(self._on_lookup, command)
            case c.PartitionedTopicMetadata():
                self._start(self._on_partitioned_metadata, command)
            case c.Producer():
                self._on_producer(command)
            case c.Subscribe():
                self._on_subscribe(command)
            case c.CloseProducer():
                self._start(self._on_close_producer, command)
            case c.CloseConsumer():
                self._start(self._on_close_consumer, command)
            case c.Seek():
                self._start(self._on_seek, command)
            case c.Unsubscribe():
                self._start(self._on_unsubscribe, command)
            case c.GetLastMessageId():
                self._on_get_last_message_id(command)
            case c.GetTopicsOfNamespace():
                self._on_get_topics(command)
            case c.ConsumerStats():
                self._on_consumer_stats(command)
            case c.GetSchema():
                # Schemas are not kept yet: TopicNotFound is not retried and makes the Python
                # Avro decoder fall back to the reader schema (spec §11).
                self._send(
                    c.GetSchemaResponse(
                        request_id=command.request_id,
                        error_code=ServerError.TopicNotFound,
                        error_message=f"no schema for {command.topic}",
                    )
                )
            case c.GetOrCreateSchema():
                self._send(
                    c.GetOrCreateSchemaResponse(
                        request_id=command.request_id,
                        error_code=ServerError.NotAllowedError,
                        error_message="the schema registry is not emulated",
                    )
                )
            case c.Connect():
                self._send(
                    c.Connected(
                        server_version=SERVER_VERSION,
                        protocol_version=negotiated_version(command.protocol_version),
                        max_message_size=self._services.config.maxMessageSize,
                    )
                )
            case _:
                # Reached only by commands the core admits but we do not serve.
                self._session.close(f"unexpected {type(command).__name__}")

    # ---- producers (spec §6) -----------------------------------------------------------------

    def _on_send(self, cmd: c.Send, frame: Frame) -> None:
        producer = self._producers.get(cmd.producer_id)
        if producer is None:
            if cmd.producer_id not in self._closed_producers:
                self._session.close(f"SEND for unknown producer {cmd.producer_id}")
            return
        payload = frame.payload
        assert payload is not None  # the framing gives every SEND a payload
        entry = payload.entry
        if not payload.checksum_ok():
            producer.queue.append((cmd.sequence_id, entry, None, None, "checksum mismatch"))
        else:
            try:
                info = entry_info_from_metadata(payload.metadata, size=len(entry))
            except RemoteProtocolError as exc:
                # SEND_ERROR with any code but ChecksumError drops the connection and the client
                # would re-send the same bytes forever (§6.3): fail just this message instead.
                producer.queue.append((cmd.sequence_id, entry, None, None, f"bad metadata: {exc}"))
            else:
                producer.queue.append((cmd.sequence_id, entry, payload.checksum, info, ""))
        if not producer.wakeup.is_set():
            producer.wakeup.set()

    async def _publish_loop(self, producer: _Producer) -> None:
        queue = producer.queue
        topic = producer.topic
        handle = producer.handle
        pid = producer.producer_id
        send = self._send
        try:
            while not producer.detached:
                if not queue:
                    if producer.closing:
                        return
                    if producer.wakeup.is_set():
                        producer.wakeup = anyio.Event()
                        continue
                    await producer.wakeup.wait()
                    continue
                sequence_id, entry, checksum, info, error = queue.popleft()
                if info is None:
                    send(
                        c.SendError(
                            producer_id=pid,
                            sequence_id=sequence_id,
                            error=ServerError.ChecksumError,
                            message=error,
                        )
                    )
                    continue
                try:
                    ledger_id, entry_id = await topic.publish(handle, entry, checksum, info)
                except Exception as exc:
                    if producer.stopped():
                        return
                    failure = _as_broker_error(exc, "publish")
                    # Not ChecksumError: the client drops the connection and re-sends (§6.3),
                    # which is also what a real broker's storage failure causes.
                    send(
                        c.SendError(
                            producer_id=pid,
                            sequence_id=sequence_id,
                            error=failure.code,
                            message=failure.message or "publish failed",
                        )
                    )
                    continue
                if producer.stopped():
                    return  # closed while storing: the client re-sends after reconnecting
                send(
                    c.SendReceipt(
                        producer_id=pid,
                        sequence_id=sequence_id,
                        message_id=c.MessageIdData(ledger_id=ledger_id, entry_id=entry_id),
                    )
                )
        finally:
            producer.done.set()

    def _on_producer(self, cmd: c.Producer) -> None:
        existing = self._producers.get(cmd.producer_id)
        if existing is not None:
            # A retried PRODUCER for a producer that exists: same answer again (Pulsar does too).
            self._send(self._producer_success(cmd, existing.handle))
            return
        if cmd.producer_id in self._pending_producers:
            self._send(
                c.Error(
                    request_id=cmd.request_id,
                    error=ServerError.ServiceNotReady,
                    message="Producer is already present on the connection",
                )
            )
            return
        self._pending_producers.add(cmd.producer_id)
        self._start(self._create_producer, cmd)

    def _producer_success(self, cmd: c.Producer, handle: ProducerHandle) -> c.ProducerSuccess:
        return c.ProducerSuccess(
            request_id=cmd.request_id,
            producer_name=handle.producer_name,
            last_sequence_id=handle.last_sequence_id,
            schema_version=SCHEMA_VERSION_ZERO if cmd.schema is not None else None,
            topic_epoch=handle.topic_epoch,
        )

    async def _create_producer(self, cmd: c.Producer) -> None:
        try:
            name = _topic_name(cmd.topic)
            topic = await self._topics.get_topic(name)
            handle = await topic.add_producer(
                cmd.producer_id,
                self._session,
                producer_name=cmd.producer_name,
                user_provided_name=cmd.user_provided_producer_name,
                access_mode=cmd.producer_access_mode,
                epoch=cmd.epoch,
                topic_epoch=cmd.topic_epoch,
            )
        except Exception as exc:
            self._pending_producers.discard(cmd.producer_id)
            failure = _as_broker_error(exc, "PRODUCER")
            self._send(
                c.Error(request_id=cmd.request_id, error=failure.code, message=failure.message)
            )
            return
        self._pending_producers.discard(cmd.producer_id)
        producer = _Producer(cmd.producer_id, topic, handle)
        self._producers[cmd.producer_id] = producer
        self._closed_producers.discard(cmd.producer_id)
        self._start(self._publish_loop, producer)
        if cmd.initial_subscription_name:
            await self._create_initial_subscription(topic, cmd.initial_subscription_name)
        self._send(self._producer_success(cmd, handle))

    async def _create_initial_subscription(self, topic: AnyTopic, subscription: str) -> None:
        # CommandProducer.initial_subscription_name (DLQ producers): create the durable
        # subscription at the earliest position if missing, as ServerCnx.handleProducer does.
        if subscription in topic.subscriptions():
            return
        try:
            handle = await topic.subscribe(
                subscription=subscription,
                sub_type=c.SubType.SHARED,
                consumer_id=INITIAL_SUBSCRIPTION_CONSUMER_ID,
                sink=_NullSink(),
                consumer_name="",
                durable=True,
                initial_position=c.InitialPosition.EARLIEST,
                start_message_id=None,
                priority_level=0,
                key_shared_meta=None,
                read_compacted=False,
                partition=topic.name.partition_index,
            )
            await handle.close()
        except BrokerError as exc:
            log.warning("cannot create initial subscription %r: %s", subscription, exc)

    async def _on_close_producer(self, cmd: c.CloseProducer) -> None:
        producer = self._producers.pop(cmd.producer_id, None)
        self._closed_producers.add(cmd.producer_id)
        if producer is not None:
            # Receipts for every SEND before the close go out first (§6.2).
            producer.closing = True
            producer.wakeup.set()
            await producer.done.wait()
            try:
                await producer.topic.remove_producer(producer.handle)
            except Exception:
                log.exception("removing producer %d failed", cmd.producer_id)
        self._send(c.Success(request_id=cmd.request_id))

    def producer_closed_by_broker(self, producer_id: int) -> None:
        """See ``FrameHandler.producer_closed_by_broker``."""
        producer = self._producers.pop(producer_id, None)
        self._closed_producers.add(producer_id)
        if producer is not None:
            producer.detached = True
            producer.queue.clear()  # the client re-sends everything not receipted (§9 step 4)
            producer.wakeup.set()

    # ---- consumers (spec §7) -----------------------------------------------------------------

    def _on_subscribe(self, cmd: c.Subscribe) -> None:
        if cmd.consumer_id in self._consumers:
            self._send(c.Success(request_id=cmd.request_id))
            return
        if cmd.consumer_id in self._pending_consumers:
            self._send(
                c.Error(
                    request_id=cmd.request_id,
                    error=ServerError.ServiceNotReady,
                    message="Consumer is already present on the connection",
                )
            )
            return
        self._pending_consumers.add(cmd.consumer_id)
        self._start(self._create_consumer, cmd)

    async def _create_consumer(self, cmd: c.Subscribe) -> None:
        try:
            name = _topic_name(cmd.topic)
            topic = await self._topics.get_topic(name, create=cmd.force_topic_creation)
            handle = await topic.subscribe(
                subscription=cmd.subscription,
                sub_type=cmd.sub_type,
                consumer_id=cmd.consumer_id,
                sink=self._session,
                consumer_name=cmd.consumer_name or "",
                durable=cmd.durable,
                initial_position=cmd.initial_position,
                start_message_id=cmd.start_message_id,
                priority_level=cmd.priority_level or 0,
                key_shared_meta=cmd.key_shared_meta,
                read_compacted=cmd.read_compacted,
                partition=name.partition_index,
            )
        except Exception as exc:
            self._pending_consumers.discard(cmd.consumer_id)
            failure = _as_broker_error(exc, "SUBSCRIBE")
            self._send(
                c.Error(request_id=cmd.request_id, error=failure.code, message=failure.message)
            )
            return
        self._pending_consumers.discard(cmd.consumer_id)
        self._consumers[cmd.consumer_id] = _Consumer(handle, name.partition_index)
        self._send(c.Success(request_id=cmd.request_id))

    def consumer_closed_by_broker(self, consumer_id: int) -> None:
        """See ``FrameHandler.consumer_closed_by_broker``."""
        self._consumers.pop(consumer_id, None)

    def _on_ack(self, cmd: c.Ack) -> None:
        consumer = self._consumers.get(cmd.consumer_id)
        error: BrokerError | None = None
        if consumer is None:
            error = ConsumerNotFoundError(f"consumer {cmd.consumer_id} not found")
        else:
            if cmd.validation_error is not None:
                log.warning(
                    "consumer %d discarded %s (validation error %d)",
                    cmd.consumer_id,
                    cmd.message_id,
                    cmd.validation_error,
                )
            try:
                consumer.handle.ack(cmd.ack_type, cmd.message_id)
            except Exception as exc:
                error = _as_broker_error(exc, "ACK")
        if cmd.request_id is not None:
            self._send(
                c.AckResponse(
                    consumer_id=cmd.consumer_id,
                    request_id=cmd.request_id,
                    error=None if error is None else error.code,
                    message=None if error is None else error.message,
                )
            )

    async def _on_close_consumer(self, cmd: c.CloseConsumer) -> None:
        consumer = self._consumers.pop(cmd.consumer_id, None)
        if consumer is not None:
            try:
                await consumer.handle.close()
            except Exception:
                log.exception("closing consumer %d failed", cmd.consumer_id)
        # Unknown ids get SUCCESS too: the client only wants to stop waiting (§7.7).
        self._send(c.Success(request_id=cmd.request_id))

    async def _on_seek(self, cmd: c.Seek) -> None:
        consumer = self._consumers.get(cmd.consumer_id)
        try:
            if consumer is None:
                raise ConsumerNotFoundError(f"consumer {cmd.consumer_id} not found")
            # The topic resets the cursor and closes every consumer of the subscription (CLOSE_
            # CONSUMER goes out before our SUCCESS, §7.5 steps 1-3).
            await consumer.handle.seek(
                message_id=cmd.message_id, publish_time=cmd.message_publish_time
            )
        except Exception as exc:
            failure = _as_broker_error(exc, "SEEK")
            self._send(
                c.Error(request_id=cmd.request_id, error=failure.code, message=failure.message)
            )
            return
        self._send(c.Success(request_id=cmd.request_id))

    async def _on_unsubscribe(self, cmd: c.Unsubscribe) -> None:
        consumer = self._consumers.get(cmd.consumer_id)
        try:
            if consumer is None:
                raise ConsumerNotFoundError(f"consumer {cmd.consumer_id} not found")
            await consumer.handle.unsubscribe()
        except Exception as exc:
            failure = _as_broker_error(exc, "UNSUBSCRIBE")
            self._send(
                c.Error(request_id=cmd.request_id, error=failure.code, message=failure.message)
            )
            return
        self._consumers.pop(cmd.consumer_id, None)
        self._send(c.Success(request_id=cmd.request_id))

    def _on_get_last_message_id(self, cmd: c.GetLastMessageId) -> None:
        consumer = self._consumers.get(cmd.consumer_id)
        if consumer is None:
            self._send(
                c.Error(
                    request_id=cmd.request_id,
                    error=ServerError.ConsumerNotFound,
                    message=f"consumer {cmd.consumer_id} not found",
                )
            )
            return
        (ledger_id, entry_id, batch_index), (md_ledger, md_entry) = (
            consumer.handle.last_message_id()
        )
        self._send(
            c.GetLastMessageIdResponse(
                request_id=cmd.request_id,
                # §7.6: partition index for partitions, batch index for a batched last entry,
                # entry -1 for an empty topic.
                last_message_id=c.MessageIdData(
                    ledger_id=ledger_id,
                    entry_id=entry_id,
                    partition=consumer.partition,
                    batch_index=batch_index,
                ),
                consumer_mark_delete_position=c.MessageIdData(
                    ledger_id=md_ledger, entry_id=md_entry
                ),
            )
        )

    def _on_consumer_stats(self, cmd: c.ConsumerStats) -> None:
        consumer = self._consumers.get(cmd.consumer_id)
        if consumer is None:
            self._send(
                c.ConsumerStatsResponse(
                    request_id=cmd.request_id,
                    error_code=ServerError.ConsumerNotFound,
                    error_message=f"consumer {cmd.consumer_id} not found",
                )
            )
            return
        # §7.8: any numeric fields will do; rates are not tracked per consumer yet.
        self._send(
            c.ConsumerStatsResponse(
                request_id=cmd.request_id,
                msg_rate_out=0.0,
                msg_throughput_out=0.0,
                msg_rate_redeliver=0.0,
                consumer_name="",
                available_permits=0,
                unacked_messages=0,
                blocked_consumer_on_unacked_msgs=False,
                address=self._session.peer,
                connected_since="",
                type="",
                msg_rate_expired=0.0,
                msg_backlog=0,
                message_ack_rate=0.0,
            )
        )

    # ---- discovery (spec §5) -----------------------------------------------------------------

    async def _on_partitioned_metadata(self, cmd: c.PartitionedTopicMetadata) -> None:
        try:
            partitions = await self._topics.partitioned_metadata(_topic_name(cmd.topic))
        except Exception as exc:
            failure = _as_broker_error(exc, "PARTITIONED_METADATA")
            # §4.2: the failure form is this response with response=Failed, never ERROR.
            self._send(
                c.PartitionedTopicMetadataResponse(
                    request_id=cmd.request_id,
                    response=c.MetadataResult.FAILED,
                    error=failure.code,
                    message=failure.message,
                )
            )
            return
        self._send(
            c.PartitionedTopicMetadataResponse(
                request_id=cmd.request_id,
                partitions=partitions,
                response=c.MetadataResult.SUCCESS,
            )
        )

    async def _on_lookup(self, cmd: c.LookupTopic) -> None:
        services = self._services
        try:
            name = _topic_name(cmd.topic)
            listener = cmd.advertised_listener_name or ""
            if listener and listener not in services.listeners:
                # Pulsar's wording; the client turns "the broker do not have test listener"
                # into a non-retried ConnectError (§4.3, test_listener_name_client).
                raise ServiceNotReadyError(f"the broker do not have {listener} listener")
            if not services.namespace_exists(name.namespace):
                raise TopicNotFoundError(f"Namespace {name.namespace} does not exist")
            owner = await services.ownership.owner_of(name)
        except Exception as exc:
            failure = _as_broker_error(exc, "LOOKUP")
            self._send(
                c.LookupTopicResponse(
                    request_id=cmd.request_id,
                    response=c.LookupType.FAILED,
                    error=failure.code,
                    message=failure.message,
                )
            )
            return
        url = owner.service_url
        if listener and owner == services.ownership.me:
            url = services.listeners[listener]
        self._send(
            c.LookupTopicResponse(
                request_id=cmd.request_id,
                broker_service_url=url,
                response=c.LookupType.CONNECT,
                authoritative=True,
            )
        )

    def _on_get_topics(self, cmd: c.GetTopicsOfNamespace) -> None:
        try:
            try:
                namespace = NamespaceName.parse(cmd.namespace)
            except InvalidNameError as exc:
                raise InvalidTopicNameError(str(exc)) from None
            if not self._services.namespace_exists(namespace):
                raise TopicNotFoundError(f"Namespace {namespace} does not exist")
            topics = self._topics.topics_of_namespace(namespace, cmd.mode)
        except Exception as exc:
            failure = _as_broker_error(exc, "GET_TOPICS_OF_NAMESPACE")
            self._send(
                c.Error(request_id=cmd.request_id, error=failure.code, message=failure.message)
            )
            return
        self._send(c.GetTopicsOfNamespaceResponse(request_id=cmd.request_id, topics=tuple(topics)))
