"""PRODUCER, SEND, CLOSE_PRODUCER (spec §6): producers of one connection and their SEND FIFOs.

SEND is queued on its producer's FIFO by the reader (no task, no ``await``); one publisher task
per producer publishes whatever the FIFO holds when it wakes with one ``Topic.publish_many``, so
receipts leave in SEND order (§6.2: the client matches them to the head of its queue), a read's
worth of SENDs costs one wake-up and one write, and different producers publish concurrently.
A SEND that cannot be stored for a reason of its own (bad checksum, undecodable metadata) gets
SEND_ERROR ``ChecksumError`` in its place in the FIFO: any other code would make the client drop
the connection (§6.3).
"""

from __future__ import annotations

import logging
from collections import deque
from functools import partial
from typing import TYPE_CHECKING, Final, cast

import anyio

from emubroker.handlers.common import CommandGroup, as_broker_error, topic_name
from emubroker.topics.entry import entry_info_from_entry
from protocol import commands as c
from protocol.errors import BrokerError, RemoteProtocolError, ServerError
from protocol.framing import checksum

if TYPE_CHECKING:
    from emubroker.handlers.common import BrokerServices, SessionPort, StartSoon
    from emubroker.topics import AnyTopic, ProducerHandle
    from emubroker.topics.entry import EntryInfo
    from protocol.framing import Frame

__all__ = ["SCHEMA_VERSION_ZERO", "ProducerCommands"]

log = logging.getLogger(__name__)

SCHEMA_VERSION_ZERO: Final = bytes(8)
"""The first schema version: an 8-byte big-endian 0 (spec §6.1, ``test_schema_version``)."""

INITIAL_SUBSCRIPTION_CONSUMER_ID: Final = -1
"""Consumer id of the throwaway consumer that creates a DLQ producer's initial subscription."""


_Entry = tuple[bytes, "int | None", "EntryInfo"]
"""A SEND to store: ``(entry, checksum, info)``, what ``Topic.publish_many`` takes."""

_Send = tuple[int, "_Entry | str"]
"""A queued SEND: ``(sequence_id, entry to store or why it fails)``."""


class _Producer:
    """A producer of this connection and the FIFO of its SENDs awaiting storage."""

    __slots__ = (
        "closing",
        "detached",
        "done",
        "failed",
        "handle",
        "producer_id",
        "queue",
        "topic",
        "wakeup",
        "woken",
    )

    def __init__(self, producer_id: int, topic: AnyTopic, handle: ProducerHandle) -> None:
        self.producer_id = producer_id
        self.topic = topic
        self.handle = handle
        self.queue: deque[_Send] = deque()
        self.failed = 0  # SENDs in the queue that fail on their own (their error is queued)
        self.wakeup = anyio.Event()
        self.woken = False  # wakeup was set since the publisher last found the queue empty
        self.done = anyio.Event()  # the publisher task has stopped
        self.closing = False  # the client closed it: publish what is queued, then stop
        self.detached = False  # the broker closed it: stop publishing, send nothing more

    def stopped(self) -> bool:
        """Detached (read through a call: it changes while the publisher awaits)."""
        return self.detached


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


class ProducerCommands(CommandGroup):
    """The producers of one connection."""

    def __init__(self, services: BrokerServices, session: SessionPort, start: StartSoon) -> None:
        super().__init__(services, session, start)
        self._producers: dict[int, _Producer] = {}
        # Creations in flight: id -> "closed by the client meanwhile" (the client gave up on a
        # slow request and sent CLOSE_PRODUCER: undo the creation when it completes).
        self._pending_producers: dict[int, bool] = {}
        # Producers closed on this connection: SENDs the client had in flight when it learned of
        # the close are expected and dropped (Pulsar's ServerCnx.recentlyClosedProducers).
        self._closed_producers: set[int] = set()

    async def release_all(self) -> None:
        """Remove every producer of the connection (it is going away)."""
        producers, self._producers = self._producers, {}
        for producer in producers.values():
            producer.detached = True
            try:
                await producer.topic.remove_producer(producer.handle)
            except Exception:
                log.exception("removing producer %d failed", producer.producer_id)

    def on_send(self, cmd: c.Send, frame: Frame) -> None:
        """SEND: queue the entry on its producer's FIFO (or close: unknown producer, §2.5)."""
        producer = self._producers.get(cmd.producer_id)
        if producer is None:
            if cmd.producer_id not in self._closed_producers:
                self._session.close(f"SEND for unknown producer {cmd.producer_id}")
            return
        payload = frame.payload
        assert payload is not None  # the framing gives every SEND a payload
        entry = payload.entry
        crc = payload.checksum
        if crc is not None and checksum(entry) != crc:
            producer.queue.append((cmd.sequence_id, "checksum mismatch"))
            producer.failed += 1
        else:
            try:
                info = entry_info_from_entry(entry)
            except RemoteProtocolError as exc:
                # SEND_ERROR with any code but ChecksumError drops the connection and the client
                # would re-send the same bytes forever (§6.3): fail just this message instead.
                producer.queue.append((cmd.sequence_id, f"bad metadata: {exc}"))
                producer.failed += 1
            else:
                producer.queue.append((cmd.sequence_id, (entry, crc, info)))
        if not producer.woken:
            producer.woken = True
            producer.wakeup.set()

    async def _publish_loop(self, producer: _Producer) -> None:
        # Each wake-up publishes every SEND queued meanwhile (all of one read, usually) with one
        # publish_many and answers them with one write of receipts; a SEND that failed on its own
        # splits the run so that its SEND_ERROR keeps its place in the FIFO (§6.2).
        queue = producer.queue
        topic = producer.topic
        handle = producer.handle
        pid = producer.producer_id
        send = self._send
        session = self._session
        try:
            while not producer.detached:
                if not queue:
                    if producer.closing:
                        return
                    producer.wakeup = anyio.Event()
                    producer.woken = False
                    await producer.wakeup.wait()
                    continue
                sequence_id, head = queue[0]
                if isinstance(head, str):
                    queue.popleft()
                    producer.failed -= 1
                    send(
                        c.SendError(
                            producer_id=pid,
                            sequence_id=sequence_id,
                            error=ServerError.ChecksumError,
                            message=head,
                        )
                    )
                    continue
                sequence_ids: list[int] = []
                run: list[_Entry] = []
                if producer.failed:
                    while queue:
                        sequence_id, head = queue[0]
                        if isinstance(head, str):
                            break
                        queue.popleft()
                        sequence_ids.append(sequence_id)
                        run.append(head)
                else:  # nothing failed on its own: take the whole FIFO at C speed
                    sequence_ids = [sequence_id for sequence_id, _ in queue]
                    run = [cast("_Entry", entry) for _, entry in queue]
                    queue.clear()
                try:
                    positions = await topic.publish_many(handle, run)
                except Exception as exc:
                    if producer.stopped():
                        return
                    failure = as_broker_error(exc, "publish")
                    # Not ChecksumError: the client drops the connection and re-sends (§6.3),
                    # which is also what a real broker's storage failure causes.
                    send(
                        c.SendError(
                            producer_id=pid,
                            sequence_id=sequence_ids[0],
                            error=failure.code,
                            message=failure.message or "publish failed",
                        )
                    )
                    queue.extendleft(reversed(list(zip(sequence_ids[1:], run[1:], strict=True))))
                    continue
                if producer.stopped():
                    return  # closed while storing: the client re-sends after reconnecting
                stored = len(positions)
                if stored < len(run):  # storage failed midway: the rest get their own attempt
                    rest = zip(sequence_ids[stored:], run[stored:], strict=True)
                    queue.extendleft(reversed(list(rest)))
                    del sequence_ids[stored:]
                session.send_receipts(pid, sequence_ids, positions)
        finally:
            producer.done.set()

    def on_producer(self, cmd: c.Producer) -> None:
        """PRODUCER: create the producer in a task; PRODUCER_SUCCESS or ERROR (§6.1)."""
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
        self._pending_producers[cmd.producer_id] = False
        self._start(self._create_producer, cmd)

    def _producer_success(self, cmd: c.Producer, handle: ProducerHandle) -> c.ProducerSuccess:
        return c.ProducerSuccess(
            request_id=cmd.request_id,
            producer_name=handle.producer_name,
            last_sequence_id=handle.last_sequence_id,
            schema_version=handle.schema_version,
            topic_epoch=handle.topic_epoch,
        )

    async def _schema_version(self, cmd: c.Producer) -> bytes | None:
        # §6.1/§11: the registry's version of the producer's schema (IncompatibleSchema if it
        # may not be used); without a registry every schema is version 0.
        schemas = self._services.schemas
        if schemas is None:
            return SCHEMA_VERSION_ZERO if cmd.schema is not None else None
        return await schemas.producer_schema(topic_name(cmd.topic), cmd.schema)

    def _producer_waiting(self, cmd: c.Producer) -> None:
        # WaitForExclusive producer queued: producer_ready=false stops the client's request
        # timeout; the real PRODUCER_SUCCESS follows with the same request id (§6.1).
        self._send(
            c.ProducerSuccess(
                request_id=cmd.request_id,
                producer_name=cmd.producer_name or "",
                producer_ready=False,
            )
        )

    async def _create_producer(self, cmd: c.Producer) -> None:
        try:
            name = topic_name(cmd.topic)
            topic = await self._topics.get_topic(name)
            schema_version = await self._schema_version(cmd)
            handle = await topic.add_producer(
                cmd.producer_id,
                self._session,
                producer_name=cmd.producer_name,
                user_provided_name=cmd.user_provided_producer_name,
                access_mode=cmd.producer_access_mode,
                epoch=cmd.epoch,
                topic_epoch=cmd.topic_epoch,
                on_waiting=partial(self._producer_waiting, cmd),
            )
            handle.schema_version = schema_version
        except Exception as exc:
            self._pending_producers.pop(cmd.producer_id, None)
            failure = as_broker_error(exc, "PRODUCER")
            self._send(
                c.Error(request_id=cmd.request_id, error=failure.code, message=failure.message)
            )
            return
        if self._pending_producers.pop(cmd.producer_id, False):
            await topic.remove_producer(handle)
            self._send(
                c.Error(
                    request_id=cmd.request_id,
                    error=ServerError.ServiceNotReady,
                    message="Closed producer before creation was complete",
                )
            )
            return
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

    async def on_close_producer(self, cmd: c.CloseProducer) -> None:
        """CLOSE_PRODUCER: receipt what is queued, remove the producer, SUCCESS."""
        producer = self._producers.pop(cmd.producer_id, None)
        self._closed_producers.add(cmd.producer_id)
        if cmd.producer_id in self._pending_producers:
            self._pending_producers[cmd.producer_id] = True
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

    def closed_by_broker(self, producer_id: int) -> None:
        """The topics closed this producer: stop publishing its queue; the client re-sends it."""
        producer = self._producers.pop(producer_id, None)
        self._closed_producers.add(producer_id)
        if producer is not None:
            producer.detached = True
            producer.queue.clear()  # the client re-sends everything not receipted (§9 step 4)
            producer.failed = 0
            producer.wakeup.set()
