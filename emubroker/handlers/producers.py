"""PRODUCER, SEND, CLOSE_PRODUCER (spec §6): producers of one connection and their SEND FIFOs.

SEND is queued on its producer's FIFO by the reader (no task, no ``await``). After the frames of
a read, ``flush`` publishes each FIFO with one ``Topic.publish_many_nowait`` and one write of
receipts, so receipts leave in SEND order (§6.2: the client matches them to the head of its
queue) and a read's worth of SENDs costs no task switch. One publisher task per producer takes
over when storage has to be awaited, so that different producers still publish concurrently.
A SEND that cannot be stored for a reason of its own (bad checksum, undecodable metadata) gets
SEND_ERROR ``ChecksumError`` in its place in the FIFO: any other code would make the client drop
the connection (§6.3).

Pending publishes (Pulsar's ``ServerCnx.pendingSendRequest`` and the bytes it adds to the
publish buffer): every SEND counts from the read that brought it until its receipt or error is
queued (or it is dropped with its producer). The totals go to the session
(``SessionPort.pending_publishes``), which stops reading past the limits; they are reported only
when they changed since the last report, so a read that storage answers at once reports nothing.
"""

from __future__ import annotations

import logging
from collections import deque
from functools import partial
from operator import itemgetter
from typing import TYPE_CHECKING, Final, cast

import anyio

from emubroker.auth import TopicOperation
from emubroker.handlers.common import CommandGroup, as_broker_error, topic_name
from emubroker.naming import TopicDomain
from emubroker.topics import ProducerRequest, SubscribeRequest
from emubroker.topics.entry import RunInfos, entry_info_from_entry
from emubroker.topics.limits import check_producers
from protocol import commands as c
from protocol.errors import BrokerError, NotAllowedError, RemoteProtocolError, ServerError
from protocol.framing import checksum

if TYPE_CHECKING:
    from emubroker.handlers.access import ConnectionAccess
    from emubroker.handlers.common import (
        BrokerServices,
        ConnectionInfo,
        SessionPort,
        StartSoon,
    )
    from emubroker.naming import AssignedBroker
    from emubroker.topics import ProducerHandle, TopicHandle
    from emubroker.topics.entry import EntryInfo
    from protocol.framing import Frame
    from protocol.runs import SendRun

__all__ = ["SCHEMA_VERSION_ZERO", "ProducerCommands"]

log = logging.getLogger(__name__)

SCHEMA_VERSION_ZERO: Final = bytes(8)
"""The first schema version: an 8-byte big-endian 0 (spec §6.1, ``test_schema_version``)."""

INITIAL_SUBSCRIPTION_CONSUMER_ID: Final = -1
"""Consumer id of the throwaway consumer that creates a DLQ producer's initial subscription."""

INITIAL_SUBSCRIPTION_NOT_ALLOWED: Final = (
    "Could not create the initial subscription due to the auto subscription creation is not"
    " allowed."
)
"""Pulsar's text (``NotAllowedError``) refusing a producer whose initial subscription is missing."""


_Entry = tuple[bytes, "int | None", "EntryInfo"]
"""A SEND to store: ``(entry, checksum, info)``, what ``Topic.publish_many`` takes."""

_Send = tuple[int, "_Entry | str"]
"""A queued SEND: ``(sequence_id, entry to store or why it fails)``."""

_FIRST = itemgetter(0)
_SECOND = itemgetter(1)


class _Producer:
    """A producer of this connection and the FIFO of its SENDs awaiting storage."""

    __slots__ = (
        "blocking",
        "closing",
        "detached",
        "done",
        "failed",
        "handle",
        "infos",
        "producer_id",
        "publishing",
        "queue",
        "queued_bytes",
        "topic",
        "touched",
        "wakeup",
        "woken",
    )

    def __init__(self, producer_id: int, topic: TopicHandle, handle: ProducerHandle) -> None:
        self.producer_id = producer_id
        self.topic = topic
        self.handle = handle
        self.queue: deque[_Send] = deque()
        self.infos = RunInfos()  # reads the entry infos of its runs of SENDs
        self.queued_bytes = 0  # entry bytes of the SENDs in the queue that are to be stored
        self.failed = 0  # SENDs in the queue that fail on their own (their error is queued)
        self.touched = False  # SENDs were queued during the current read (flush publishes them)
        self.publishing = False  # the publisher task is awaiting storage
        # Its topic's storage cannot answer at once (bookie mode; it stays so for the topic):
        # SENDs go straight to the publisher task, not taken and put back first.
        self.blocking = False
        self.wakeup = anyio.Event()
        self.woken = False  # wakeup was set since the publisher last found the queue empty
        self.done = anyio.Event()  # the publisher task has stopped
        self.closing = False  # the client closed it: publish what is queued, then stop
        self.detached = False  # the broker closed it: stop publishing, send nothing more

    def stopped(self) -> bool:
        """Detached (read through a call: it changes while the publisher awaits)."""
        return self.detached

    def wake(self) -> None:
        """Let the publisher task look at the FIFO."""
        if not self.woken:
            self.woken = True
            self.wakeup.set()

    def requeue(self, sequence_ids: list[int], entries: list[_Entry]) -> None:
        """Put SENDs taken from the FIFO back at its head, in their order."""
        self.queue.extendleft(reversed(list(zip(sequence_ids, entries, strict=True))))
        self.queued_bytes += _size(entries)


def _size(entries: list[_Entry]) -> int:
    """Entry bytes of a run of SENDs."""
    return sum(len(entry[0]) for entry in entries)


_Run = tuple[list[int], list[_Entry], int]
"""SENDs taken from a FIFO to store: ``(sequence ids, entries, their bytes)``."""


async def _create_initial_subscription(topic: TopicHandle, subscription: str) -> None:
    """Create a producer's initial subscription (DLQ producers) before the producer, if missing.

    As ``ServerCnx.handleProducer`` does with ``CommandProducer.initial_subscription_name``:
    only on a persistent topic, durable, at the earliest position, and only where a SUBSCRIBE
    could create it (``isAllowAutoSubscriptionCreationAsync``: topic policy, namespace override,
    broker key); otherwise the producer itself is refused.

    Raises:
        NotAllowedError: Subscription auto-creation is off for the topic.
    """
    if topic.name.domain is not TopicDomain.PERSISTENT or subscription in topic.subscriptions():
        return
    if not topic.limits().allow_auto_subscription_creation:
        raise NotAllowedError(INITIAL_SUBSCRIPTION_NOT_ALLOWED)
    try:
        request = SubscribeRequest(
            subscription=subscription,
            sub_type=c.SubType.SHARED,
            consumer_id=INITIAL_SUBSCRIPTION_CONSUMER_ID,
            initial_position=c.InitialPosition.EARLIEST,
        )
        handle = await topic.subscribe(request, _NullSink())
        await handle.close()
    except BrokerError as exc:
        log.warning("cannot create initial subscription %r: %s", subscription, exc)


class _NullSink:
    """Sink of the throwaway consumer that creates a DLQ producer's initial subscription."""

    writable = True

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

    def send_messages(
        self, consumer_id: int, ledger_id: int, entry_id: int, partition: int, sections: list[bytes]
    ) -> int:
        return len(sections)

    def close_consumer(self, consumer_id: int, assigned: AssignedBroker | None = None) -> None:
        pass

    def active_consumer_change(self, consumer_id: int, is_active: bool) -> None:
        pass

    def reached_end_of_topic(self, consumer_id: int) -> None:
        pass


class ProducerCommands(CommandGroup):
    """The producers of one connection."""

    def __init__(
        self,
        services: BrokerServices,
        session: SessionPort,
        start: StartSoon,
        access: ConnectionAccess | None = None,
        info: ConnectionInfo | None = None,
    ) -> None:
        super().__init__(services, session, start, access, info)
        self._producers: dict[int, _Producer] = {}
        # Creations in flight: id -> "closed by the client meanwhile" (the client gave up on a
        # slow request and sent CLOSE_PRODUCER: undo the creation when it completes).
        self._pending_producers: dict[int, bool] = {}
        # Producers closed on this connection: SENDs the client had in flight when it learned of
        # the close are expected and dropped (Pulsar's ServerCnx.recentlyClosedProducers).
        self._closed_producers: set[int] = set()
        self._touched: list[_Producer] = []  # producers with SENDs from the current read
        # Pending publishes: SENDs (and entry bytes) read and not yet answered.
        self._pending = 0
        self._pending_bytes = 0
        self._reported = (0, 0)

    async def release_all(self) -> None:
        """Remove every producer of the connection (it is going away)."""
        producers, self._producers = self._producers, {}
        self._pending = self._pending_bytes = 0  # what is queued goes with the connection
        self._report()
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
        self._pending += 1
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
                producer.queued_bytes += len(entry)
                self._pending_bytes += len(entry)
        if not producer.touched:
            producer.touched = True
            self._touched.append(producer)

    def on_send_run(self, run: SendRun) -> None:
        """SENDs of one producer read as a run (``protocol.runs``): ``on_send`` of each, at once.

        The same FIFO entries, failures and counts as one ``on_send`` per SEND, with the entry
        infos read against the producer's last metadata (``RunInfos``).
        """
        producer = self._producers.get(run.producer_id)
        if producer is None:
            if run.producer_id not in self._closed_producers:
                self._session.close(f"SEND for unknown producer {run.producer_id}")
            return
        infos = producer.infos.read(run)
        entries = run.entries
        if list(map(checksum, entries)) == run.checksums and None not in infos:
            # Every SEND is good (the usual run): queued without a Python loop.
            good = cast("list[EntryInfo]", infos)  # None is not in it
            producer.queue.extend(
                zip(run.sequence_ids, zip(entries, run.checksums, good, strict=True), strict=True)
            )
            size, failed = sum(map(len, entries)), 0
        else:
            size, failed = self._queue_each(producer, run, infos)
        self._pending += len(infos)
        self._pending_bytes += size
        producer.queued_bytes += size
        producer.failed += failed
        if not producer.touched:
            producer.touched = True
            self._touched.append(producer)

    def _queue_each(
        self, producer: _Producer, run: SendRun, infos: list[EntryInfo | None]
    ) -> tuple[int, int]:
        """Queue a run's SENDs one by one, failing those that fail; ``(bytes, failed)``."""
        append = producer.queue.append
        size = failed = 0
        for sequence_id, entry, crc, info in zip(
            run.sequence_ids, run.entries, run.checksums, infos, strict=True
        ):
            if checksum(entry) != crc:
                append((sequence_id, "checksum mismatch"))
                failed += 1
                continue
            if info is None:
                try:
                    info = entry_info_from_entry(entry)
                except RemoteProtocolError as exc:
                    append((sequence_id, f"bad metadata: {exc}"))  # as in on_send
                    failed += 1
                    continue
            append((sequence_id, (entry, crc, info)))
            size += len(entry)
        return size, failed

    def flush(self) -> None:
        """After the frames of one read: publish what their SENDs queued (spec §6.2).

        Storage that answers at once (the in-memory ledger) is written right here, so a read's
        SENDs cost no task switch: one ``publish_many_nowait`` per producer and one write of
        receipts. A producer's publisher task takes over while it awaits storage itself, or
        when storage would block; the FIFO keeps the order either way.
        """
        touched, self._touched = self._touched, []
        for producer in touched:
            producer.touched = False
            if producer.detached:
                continue
            if not (producer.publishing or producer.blocking):
                try:
                    self._drain(producer)
                    continue
                except anyio.WouldBlock:
                    pass
            producer.wake()
        if self._reported != (self._pending, self._pending_bytes):
            self._report()

    def _done(self, count: int, size: int) -> None:
        """``count`` SENDs of ``size`` entry bytes were answered (or dropped)."""
        self._pending -= count
        self._pending_bytes -= size

    def _report(self) -> None:
        """Tell the session how many SENDs wait for storage (its back-pressure), if it changed."""
        pending = (self._pending, self._pending_bytes)
        if pending != self._reported:
            self._reported = pending
            self._session.pending_publishes(*pending)

    def _drain(self, producer: _Producer) -> None:
        """Publish the whole FIFO in order, without waiting.

        Raises:
            WouldBlock: Storage cannot answer at once; the unpublished SENDs stay queued.
        """
        queue = producer.queue
        while queue and not producer.detached:
            run = self._next_run(producer)
            if run is None:
                continue
            sequence_ids, entries, _ = run
            try:
                positions = producer.topic.publish_many_nowait(producer.handle, entries)
            except anyio.WouldBlock:
                producer.blocking = True  # before anything was admitted (publish_many_nowait)
                producer.requeue(sequence_ids, entries)
                raise
            except Exception as exc:
                self._failed(producer, run, exc)
                continue
            self._stored(producer, run, positions)

    def _next_run(self, producer: _Producer) -> _Run | None:
        """Take the FIFO's head: the run of SENDs to store, or None after failing one SEND."""
        queue = producer.queue
        sequence_id, head = queue[0]
        if isinstance(head, str):
            queue.popleft()
            producer.failed -= 1
            self._done(1, 0)
            self._send(
                c.SendError(
                    producer_id=producer.producer_id,
                    sequence_id=sequence_id,
                    error=ServerError.ChecksumError,
                    message=head,
                )
            )
            return None
        if not producer.failed:  # nothing failed on its own: take the whole FIFO at C speed
            sequence_ids = list(map(_FIRST, queue))
            entries = cast("list[_Entry]", list(map(_SECOND, queue)))  # one cast, not one each
            queue.clear()
            size, producer.queued_bytes = producer.queued_bytes, 0
            return sequence_ids, entries, size
        sequence_ids = []
        entries = []
        while queue:
            sequence_id, head = queue[0]
            if isinstance(head, str):
                break
            queue.popleft()
            sequence_ids.append(sequence_id)
            entries.append(head)
        size = _size(entries)
        producer.queued_bytes -= size
        return sequence_ids, entries, size

    def _failed(self, producer: _Producer, run: _Run, exc: Exception) -> None:
        sequence_ids, entries, size = run
        if producer.stopped():
            self._done(len(entries), size)  # dropped: the client re-sends after reconnecting
            return
        failure = as_broker_error(exc, "publish")
        # Not ChecksumError: the client drops the connection and re-sends (§6.3), which is also
        # what a real broker's storage failure causes. The others get their own attempt.
        self._send(
            c.SendError(
                producer_id=producer.producer_id,
                sequence_id=sequence_ids[0],
                error=failure.code,
                message=failure.message or "publish failed",
            )
        )
        self._done(1, len(entries[0][0]))
        producer.requeue(sequence_ids[1:], entries[1:])

    def _stored(self, producer: _Producer, run: _Run, positions: list[tuple[int, int]]) -> None:
        sequence_ids, entries, size = run
        stored = len(positions)
        if stored < len(entries):  # storage failed midway: the rest get their own attempt
            size -= _size(entries[stored:])
            producer.requeue(sequence_ids[stored:], entries[stored:])
            del sequence_ids[stored:]
        self._done(stored, size)
        self._session.send_receipts(producer.producer_id, sequence_ids, positions)

    async def _publish_loop(self, producer: _Producer) -> None:
        # Publishes what flush() left: SENDs queued while storage was awaited, or all of them
        # when storage cannot answer at once.
        queue = producer.queue
        try:
            while not producer.detached:
                if not queue:
                    if producer.closing:
                        return
                    producer.wakeup = anyio.Event()
                    producer.woken = False
                    await producer.wakeup.wait()
                    continue
                if not producer.blocking:
                    try:
                        self._drain(producer)
                        self._report()
                        continue
                    except anyio.WouldBlock:
                        pass
                run = self._next_run(producer)
                if run is None:
                    self._report()
                    continue
                producer.publishing = True
                try:
                    positions = await producer.topic.publish_many(producer.handle, run[1])
                except Exception as exc:
                    self._failed(producer, run, exc)
                    self._report()
                    continue
                finally:
                    producer.publishing = False
                if producer.stopped():
                    # Closed while storing: the client re-sends after reconnecting.
                    self._done(len(run[1]), run[2])
                    self._report()
                    return
                self._stored(producer, run, positions)
                self._report()
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
            # Pulsar always sets the field: a producer without a schema gets the empty version,
            # and the Java client reads it unconditionally (unset, it drops the connection).
            schema_version=b"" if handle.schema_version is None else handle.schema_version,
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
                schema_version=b"",
                producer_ready=False,
            )
        )

    async def _create_producer(self, cmd: c.Producer) -> None:
        try:
            name = topic_name(cmd.topic)
            if self._access is not None:
                await self._access.require_topic(name, TopicOperation.PRODUCE, "Produce")
                if cmd.initial_subscription_name:
                    await self._access.require_topic(
                        name,
                        TopicOperation.SUBSCRIBE,
                        "Produce",
                        subscription=cmd.initial_subscription_name,
                    )
            await self._check_serving(name)
            topic = await self._topics.get_topic(name)
            # Before the schema, as ServerCnx.handleProducer checks it (``limits``).
            check_producers(topic.limits(), topic.name, topic.producer_count)
            schema_version = await self._schema_version(cmd)
            if cmd.initial_subscription_name:
                await _create_initial_subscription(topic, cmd.initial_subscription_name)
            request = ProducerRequest(
                producer_id=cmd.producer_id,
                producer_name=cmd.producer_name,
                access_mode=cmd.producer_access_mode,
                epoch=cmd.epoch,
                topic_epoch=cmd.topic_epoch,
                metadata={kv.key: kv.value for kv in cmd.metadata},
                client=self._client(),
            )
            handle = await topic.add_producer(
                request, self._session, on_waiting=partial(self._producer_waiting, cmd)
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
        self._send(self._producer_success(cmd, handle))

    async def on_close_producer(self, cmd: c.CloseProducer) -> None:
        """CLOSE_PRODUCER: receipt what is queued, remove the producer, SUCCESS."""
        producer = self._producers.pop(cmd.producer_id, None)
        self._closed_producers.add(cmd.producer_id)
        if cmd.producer_id in self._pending_producers:
            self._pending_producers[cmd.producer_id] = True
        if producer is not None:
            # Receipts for every SEND before the close go out first (§6.2).
            producer.closing = True
            producer.wake()
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
            self._done(len(producer.queue), producer.queued_bytes)
            producer.queue.clear()  # the client re-sends everything not receipted (§9 step 4)
            producer.queued_bytes = 0
            producer.failed = 0
            producer.wake()
            self._report()
