"""Consumers: subscription, flow permits, batch splitting, acks, negative acks, seek.

Rules (spec §7, §8.2, §9):

1. After every SUBSCRIBE the broker has forgotten our permits: send FLOW = receiver queue size,
   then another FLOW each time half the queue was consumed. Permits count messages; messages the
   client drops itself (filtered batch indexes, corrupt entries, incomplete chunks) are given back
   as if consumed.
2. An entry is a batch iff its metadata has `num_messages_in_batch`; it is split here, indexes
   cleared in `CommandMessage.ack_set` are skipped.
3. Messages before the start id (readers, and after a seek) are dropped: same ledger and an
   entry (or batch index) before it, or equal unless the start is inclusive (as the C++ client).
4. Acks are grouped (`AckGrouper`) and flushed after `ack_group_time` or `ack_group_max` ids,
   and on close. A batched entry is acked once all its delivered messages are.
5. A negative ack becomes REDELIVER after `negative_ack_redelivery_delay`: with the entry ids
   for Shared/Key_Shared, with an empty list (= everything unacked) for Exclusive/Failover.
6. On reattachment the receiver queue is cleared (the broker redelivers); non-durable
   subscriptions restart after the last message handed out (or at a seek's target).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from protocol import commands as c
from protocol.batch import indexes_of, parse_batch
from protocol.client._util import with_deadline
from protocol.client.acks import AckGrouper, BatchTracker, NackTracker, entry_data
from protocol.client.chunks import ChunkAssembler
from protocol.client.handler import Handler, HandlerState
from protocol.client.messages import Message
from protocol.client.receive_queue import ReceiveQueue
from protocol.codec import decode_record
from protocol.errors import (
    ClientClosedError,
    ConsumerClosedError,
    LocalProtocolError,
    RemoteProtocolError,
)
from protocol.framing import Payload
from protocol.ids import LATEST, MessageId

if TYPE_CHECKING:
    from protocol.client.client import Client
    from protocol.client.connection import ClientConnection

__all__ = ["Consumer", "ConsumerConfig"]

logger = logging.getLogger(__name__)

_CHECKSUM_MISMATCH = 2  # CommandAck.ValidationError.ChecksumMismatch (spec §7.3)
_DECOMPRESSION_ERROR = 1


@dataclass(frozen=True, kw_only=True)
class ConsumerConfig:
    """Consumer options (names follow the Python `pulsar-client` where one exists).

    Attributes:
        sub_type: the subscription type.
        initial_position: where a new durable subscription starts.
        receiver_queue_size: messages prefetched at most (FLOW permits).
        consumer_name: a fixed name; None sends a random one, as the C++ client does.
        ack_group_time: seconds acks are grouped for; 0 sends each at once.
        ack_group_max: individual acks that force a flush.
        negative_ack_redelivery_delay: seconds before a nacked message is redelivered.
        batch_index_ack_enabled: ack single messages of a batch (with `ack_set`).
        durable: False for readers' non-durable subscriptions.
        start_message_id: where a non-durable subscription starts.
        start_message_id_inclusive: deliver the start message itself too.
        max_pending_chunked_messages: incomplete chunked messages kept at most.
        properties, subscription_properties, priority_level, read_compacted,
        replicate_subscription_state, key_shared_meta, schema: passed in SUBSCRIBE.
    """

    sub_type: c.SubType = c.SubType.EXCLUSIVE
    initial_position: c.InitialPosition = c.InitialPosition.LATEST
    receiver_queue_size: int = 1000
    consumer_name: str | None = None
    ack_group_time: float = 0.1
    ack_group_max: int = 1000
    negative_ack_redelivery_delay: float = 60.0
    batch_index_ack_enabled: bool = False
    durable: bool = True
    start_message_id: MessageId | None = None
    start_message_id_inclusive: bool = False
    max_pending_chunked_messages: int = 10
    properties: Mapping[str, str] | None = None
    subscription_properties: Mapping[str, str] | None = None
    priority_level: int = 0
    read_compacted: bool = False
    replicate_subscription_state: bool = False
    key_shared_meta: c.KeySharedMeta | None = None
    schema: c.Schema | None = None


def _kv(values: Mapping[str, str] | None) -> tuple[c.KeyValue, ...]:
    return tuple(c.KeyValue(key=k, value=v) for k, v in (values or {}).items())


def _before(message_id: MessageId) -> MessageId:
    """The id just before `message_id` (C++ `clearReceiveQueue`)."""
    if message_id.batch_index >= 0:
        return MessageId(
            message_id.ledger_id,
            message_id.entry_id,
            message_id.partition,
            message_id.batch_index - 1,
            message_id.batch_size,
        )
    return MessageId(message_id.ledger_id, message_id.entry_id - 1, message_id.partition)


class Consumer(Handler):
    """A consumer on one topic or one partition. Create it with `Client.subscribe`."""

    def __init__(
        self,
        client: Client,
        topic: str,
        subscription: str,
        config: ConsumerConfig,
        *,
        partition: int = -1,
        queue: ReceiveQueue | None = None,
        consumer_name: str,
    ) -> None:
        super().__init__(client, topic)
        self.subscription = subscription
        self.consumer_name = consumer_name
        self._config = config
        self.partition = partition
        self.consumer_id = client._new_consumer_id()
        self._queue = queue if queue is not None else ReceiveQueue()
        self._shared_queue = queue is not None
        self._queue_size = config.receiver_queue_size
        self._refill_at = max(self._queue_size // 2, 1)
        self._permits = 0
        self._zero_queue_permit_out = False
        self._start_id = config.start_message_id
        self._inclusive = config.start_message_id_inclusive
        self._last_dequeued: MessageId | None = None
        self._acks = AckGrouper(self.consumer_id, config.ack_group_max)
        self._acks_armed: anyio.Event | None = None
        self._acks_since = 0.0
        self._batches = BatchTracker()
        self._nacks = NackTracker(config.negative_ack_redelivery_delay)
        self._nacks_changed: anyio.Event | None = None
        self._chunks = ChunkAssembler(config.max_pending_chunked_messages)
        self._seek_target: MessageId | int | None = None
        self._seek_state: str | None = None  # None | "in_progress" | "completed"
        self._last_seek_by_time = False
        self.is_active: bool | None = None  # Failover: last ACTIVE_CONSUMER_CHANGE

    def __repr__(self) -> str:
        return f"<Consumer {self.topic} sub={self.subscription} id={self.consumer_id}>"

    async def __aenter__(self) -> Consumer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> Message:
        try:
            return await self.receive()
        except ClientClosedError:
            raise StopAsyncIteration from None

    def _closed_error(self) -> ClientClosedError:
        return ConsumerClosedError(f"consumer on {self.topic} is closed")

    # ---- attaching -----------------------------------------------------------------------------

    async def _attach(self, cnx: ClientConnection, deadline: float) -> None:
        self._reset_for_attach()
        cnx.add_consumer(self.consumer_id, self)
        start = None
        if not self._config.durable and self._start_id is not None:
            start = self._start_id.to_data()
        config = self._config
        command = c.Subscribe(
            topic=self.topic,
            subscription=self.subscription,
            sub_type=config.sub_type,
            consumer_id=self.consumer_id,
            request_id=cnx.new_request_id(),
            consumer_name=self.consumer_name,
            priority_level=config.priority_level,
            durable=config.durable,
            start_message_id=start,
            metadata=_kv(config.properties),
            read_compacted=config.read_compacted,
            schema=config.schema,
            initial_position=config.initial_position,
            replicate_subscription_state=config.replicate_subscription_state,
            key_shared_meta=config.key_shared_meta,
            subscription_properties=_kv(config.subscription_properties),
        )
        await with_deadline(self._clock, deadline, cnx.request(command).wait, "SUBSCRIBE")
        self._permits = 0  # rule 1: the broker starts from zero
        self._zero_queue_permit_out = False
        if self._queue_size > 0:
            cnx.send_command(c.Flow(consumer_id=self.consumer_id, message_permits=self._queue_size))
        if self._seek_state == "completed":
            self._seek_state = None

    def _reset_for_attach(self) -> None:
        """Rule 6 (C++ `clearReceiveQueue`): pick the restart point, drop prefetched messages."""
        if self._seek_state is not None:
            self._start_id = self._seek_target if isinstance(self._seek_target, MessageId) else None
        elif not self._config.durable:
            first = self._queue.peek(lambda m: m._consumer is self)
            if first is not None:
                self._start_id = _before(first.message_id)
            elif self._last_dequeued is not None:
                self._start_id = self._last_dequeued
        self._queue.remove(lambda m: m._consumer is self)
        self._last_dequeued = None
        self._batches.clear()
        self._chunks.clear()

    def _detach_connection(self, cnx: ClientConnection) -> None:
        cnx.remove_consumer(self.consumer_id)

    def _start_loops(self, tg: anyio.abc.TaskGroup) -> None:
        tg.start_soon(self._ack_timer)
        tg.start_soon(self._nack_timer)

    def handle_active_change(self, is_active: bool) -> None:
        self.is_active = is_active

    # ---- receiving (called by the connection's reader task) ------------------------------------

    def handle_message(self, message: c.Message, payload: Payload, cnx: ClientConnection) -> None:
        if cnx is not self._cnx:
            return  # a late frame from a connection we left
        data = message.message_id
        ledger_id, entry_id = data.ledger_id, data.entry_id
        self._zero_queue_permit_out = False
        if not payload.checksum_ok():
            self._discard(ledger_id, entry_id, _CHECKSUM_MISMATCH, 1)
            return
        try:
            metadata = decode_record(c.MessageMetadata, payload.metadata)
        except RemoteProtocolError:
            self._discard(ledger_id, entry_id, _DECOMPRESSION_ERROR, 1)
            return
        count = metadata.num_messages_in_batch
        if metadata.compression:
            # Compressed entries need codecs this client does not ship; never hand out garbage.
            self._discard(ledger_id, entry_id, _DECOMPRESSION_ERROR, count or 1)
            return
        if count is not None:
            if self._acks.is_duplicate(ledger_id, entry_id):
                self._consumed(count)
            else:
                self._receive_batch(message, payload, metadata, count)
            return
        if self._acks.is_duplicate(ledger_id, entry_id) or self._entry_is_prior(
            ledger_id, entry_id
        ):
            self._consumed(count or 1)
            return
        message_id = MessageId(ledger_id, entry_id, self.partition)
        body = bytes(payload.body)
        chunk_ids: tuple[MessageId, ...] = ()
        if metadata.num_chunks_from_msg is not None and metadata.num_chunks_from_msg > 1:
            assembled = self._chunks.add(metadata, body, message_id)
            if assembled is None:
                self._consumed(1)  # rule 1: an incomplete chunk never reaches the application
                return
            body, chunk_ids = assembled
            message_id = chunk_ids[-1]
        self._queue.put(
            Message(
                body,
                message_id,
                self.topic,
                message.redelivery_count,
                metadata,
                None,
                self,
                chunk_ids,
            )
        )

    def _receive_batch(
        self, message: c.Message, payload: Payload, metadata: c.MessageMetadata, count: int
    ) -> None:
        data = message.message_id
        ledger_id, entry_id = data.ledger_id, data.entry_id
        try:
            singles = parse_batch(payload.body, count)
        except RemoteProtocolError:
            self._discard(ledger_id, entry_id, 3, count)  # BatchDeSerializeError
            return
        keep = indexes_of(message.ack_set, count) if message.ack_set else None
        start = self._start_id
        check_start = (
            start is not None and start.ledger_id == ledger_id and start.entry_id == entry_id
        )
        partition = self.partition
        topic = self.topic
        redelivery_count = message.redelivery_count
        delivered: set[int] = set()
        out: list[Message] = []
        for i, (single, body) in enumerate(singles):
            if keep is not None and i not in keep:
                continue
            if check_start and start is not None and self._prior(i, start.batch_index):
                continue
            if single.compacted_out:
                continue
            delivered.add(i)
            out.append(
                Message(
                    body,
                    MessageId(ledger_id, entry_id, partition, i, count),
                    topic,
                    redelivery_count,
                    metadata,
                    single,
                    self,
                )
            )
        if len(out) < count:
            self._consumed(count - len(out))
        if out:
            self._batches.received(ledger_id, entry_id, delivered, count)
            self._queue.put_many(out)

    def _prior(self, index: int, start_index: int) -> bool:
        return index < start_index if self._inclusive else index <= start_index

    def _entry_is_prior(self, ledger_id: int, entry_id: int) -> bool:
        start = self._start_id
        return (
            start is not None
            and start.ledger_id == ledger_id
            and self._prior(entry_id, start.entry_id)
        )

    def _discard(self, ledger_id: int, entry_id: int, validation_error: int, permits: int) -> None:
        logger.warning(
            "discarding entry %d:%d on %s (validation error %d)",
            ledger_id,
            entry_id,
            self.topic,
            validation_error,
        )
        self._send(
            c.Ack(
                consumer_id=self.consumer_id,
                ack_type=c.AckType.INDIVIDUAL,
                message_id=(entry_data(ledger_id, entry_id),),
                validation_error=validation_error,
            )
        )
        self._consumed(permits)

    def _send(self, command: c.Command) -> bool:
        cnx = self._cnx
        if cnx is None or self._state is not HandlerState.READY:
            return False
        cnx.send_command(command)
        return True

    def _consumed(self, count: int) -> None:
        """Rule 1: give permits back once half the queue has been consumed."""
        if self._queue_size <= 0:
            return
        self._permits += count
        if self._permits >= self._refill_at and self._send(
            c.Flow(consumer_id=self.consumer_id, message_permits=self._permits)
        ):
            self._permits = 0

    def _on_dequeued(self, message: Message) -> None:
        self._last_dequeued = message.message_id
        self._consumed(1)

    # ---- the application side ------------------------------------------------------------------

    async def receive(self) -> Message:
        """Wait for the next message (bound the wait with a cancel scope if needed).

        Raises:
            ConsumerClosedError: the consumer is closed.
        """
        self._check_usable()
        if (
            self._queue_size == 0
            and not len(self._queue)
            and not self._zero_queue_permit_out
            # receiver_queue_size=0: one permit per receive (spec §7.1).
            and self._send(c.Flow(consumer_id=self.consumer_id, message_permits=1))
        ):
            self._zero_queue_permit_out = True
        message = await self._queue.get()
        message._consumer._on_dequeued(message)
        return message

    def receive_nowait(self) -> Message | None:
        """The next prefetched message, or None if there is none.

        Raises:
            ConsumerClosedError: the consumer is closed.
        """
        self._check_usable()
        message = self._queue.get_nowait()
        if message is not None:
            message._consumer._on_dequeued(message)
        return message

    def acknowledge(self, message: Message | MessageId) -> None:
        """Acknowledge one message (grouped; see rule 4).

        Raises:
            ConsumerClosedError: the consumer is closed.
        """
        self._check_usable()
        if isinstance(message, Message):
            message_id = message.message_id
            chunk_ids = message._chunk_ids
            if chunk_ids:
                self._chunks.pop_ids(message_id)
        else:
            message_id = message
            chunk_ids = self._chunks.pop_ids(message_id)
        for chunk_id in chunk_ids[:-1]:  # spec §8.4: every chunk's entry is acked
            self._ack_entry(chunk_id.ledger_id, chunk_id.entry_id)
        self._nacks.discard(message_id)
        if message_id.batch_index < 0:
            self._ack_entry(message_id.ledger_id, message_id.entry_id)
            return
        if self._batches.ack(message_id):
            self._ack_entry(message_id.ledger_id, message_id.entry_id)
        elif self._config.batch_index_ack_enabled:
            ack_set = self._batches.outstanding(message_id)
            self._queue_ack(
                c.MessageIdData(
                    ledger_id=message_id.ledger_id,
                    entry_id=message_id.entry_id,
                    ack_set=ack_set,
                    batch_size=len(ack_set) * 64,
                )
            )

    def _ack_entry(self, ledger_id: int, entry_id: int) -> None:
        self._queue_ack(entry_data(ledger_id, entry_id))

    def _queue_ack(self, data: c.MessageIdData) -> None:
        was_empty = not len(self._acks)
        if self._acks.add_individual(data) or self._config.ack_group_time <= 0:
            self.flush_acks()
        elif was_empty:
            self._arm_acks()

    def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        """Acknowledge everything up to and including this message.

        Raises:
            LocalProtocolError: the subscription is Shared or Key_Shared.
            ConsumerClosedError: the consumer is closed.
        """
        self._check_usable()
        if self._config.sub_type in (c.SubType.SHARED, c.SubType.KEY_SHARED):
            raise LocalProtocolError("cumulative acks are not allowed on Shared subscriptions")
        message_id = message.message_id if isinstance(message, Message) else message
        data = self._batches.cumulative(message_id)
        if data is None:
            return
        was_empty = not len(self._acks)
        self._acks.add_cumulative(message_id, data)
        if self._config.ack_group_time <= 0:
            self.flush_acks()
        elif was_empty:
            self._arm_acks()

    def _arm_acks(self) -> None:
        self._acks_since = self._clock.now()
        if self._acks_armed is not None:
            self._acks_armed.set()

    def flush_acks(self) -> None:
        """Send the grouped acks now (kept for later if not attached)."""
        cnx = self._cnx
        if cnx is None or self._state is not HandlerState.READY or not len(self._acks):
            return
        for command in self._acks.take():
            cnx.send_command(command)

    async def _ack_timer(self) -> None:
        while True:
            if not len(self._acks):
                self._acks_armed = anyio.Event()
                await self._acks_armed.wait()
                continue
            await self._clock.sleep_until(self._acks_since + self._config.ack_group_time)
            self.flush_acks()
            if len(self._acks):  # not attached: try again one period later
                self._acks_since = self._clock.now()

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Have the message redelivered after the negative-ack delay (rule 5).

        Raises:
            ConsumerClosedError: the consumer is closed.
        """
        self._check_usable()
        message_id = message.message_id if isinstance(message, Message) else message
        self._nacks.add(message_id, self._clock.now())
        if self._nacks_changed is not None:
            self._nacks_changed.set()

    async def _nack_timer(self) -> None:
        while True:
            deadline = self._nacks.next_deadline()
            if deadline is None:
                self._nacks_changed = anyio.Event()
                await self._nacks_changed.wait()
                continue
            await self._clock.sleep_until(deadline)
            due = self._nacks.pop_due(self._clock.now())
            if due:
                self._redeliver(due)

    def _redeliver(self, ids: list[c.MessageIdData]) -> None:
        if self._config.sub_type in (c.SubType.SHARED, c.SubType.KEY_SHARED):
            self._send(
                c.RedeliverUnacknowledgedMessages(
                    consumer_id=self.consumer_id, message_ids=tuple(ids)
                )
            )
        else:
            self.redeliver_unacknowledged()

    def redeliver_unacknowledged(self) -> None:
        """Ask the broker to redeliver every unacknowledged message of this consumer.

        Prefetched messages are dropped (they come again) and their permits returned, as the
        Java client does; pending acks are flushed first so acked messages stay acked.
        """
        self._check_usable()
        self.flush_acks()
        cleared = self._queue.remove(lambda m: m._consumer is self)
        self._batches.clear()
        if self._send(c.RedeliverUnacknowledgedMessages(consumer_id=self.consumer_id)):
            self._consumed(cleared)

    # ---- requests ------------------------------------------------------------------------------

    async def seek(self, target: MessageId | int) -> None:
        """Reset the subscription to a message id or a publish time (ms since the epoch).

        The broker closes the consumer and it reattaches (spec §7.5); messages before the target
        are then filtered out (rule 3).

        Raises:
            LocalProtocolError: another seek is in progress.
            BrokerError: the broker refused it.
            OperationTimeoutError: no reply within the operation timeout.
        """
        self._check_usable()
        if self._seek_state is not None:
            raise LocalProtocolError("a seek is already in progress")
        previous = self._seek_target
        self._seek_target = target
        self._seek_state = "in_progress"
        if isinstance(target, MessageId):

            def build(rid: int) -> c.Command:
                data = entry_data(target.ledger_id, target.entry_id)  # never a batch index
                return c.Seek(consumer_id=self.consumer_id, request_id=rid, message_id=data)

        else:

            def build(rid: int) -> c.Command:
                return c.Seek(
                    consumer_id=self.consumer_id, request_id=rid, message_publish_time=target
                )

        try:
            await self._request(build, "SEEK")
        except BaseException:
            self._seek_target = previous
            self._seek_state = None
            raise
        self._last_seek_by_time = not isinstance(target, MessageId)
        self.flush_acks()
        self._acks.clear()
        if self.is_connected():  # the broker did not close us: apply the seek here
            self._reset_for_attach()
            self._seek_state = None
            return
        self._seek_state = "completed"  # applied by the reattachment (rule 6)
        deadline = self._clock.now() + self._client.operation_timeout
        await self._wait_connected(deadline, "SEEK reattachment")

    async def get_last_message_id_response(self) -> c.GetLastMessageIdResponse:
        """The broker's GET_LAST_MESSAGE_ID_RESPONSE (last id and mark-delete position)."""
        reply = await self._request(
            lambda rid: c.GetLastMessageId(consumer_id=self.consumer_id, request_id=rid),
            "GET_LAST_MESSAGE_ID",
        )
        assert isinstance(reply, c.GetLastMessageIdResponse)
        return reply

    async def get_last_message_id(self) -> MessageId:
        """The id of the topic's last message (entry id -1 when the topic is empty).

        Raises:
            BrokerError: the broker refused it.
            OperationTimeoutError: no reply within the operation timeout.
        """
        reply = await self.get_last_message_id_response()
        return MessageId.from_data(reply.last_message_id, partition=self.partition)

    async def has_message_available(self) -> bool:
        """Whether a message after the last one handed out exists (C++ `hasMessageAvailable`).

        Without anything received yet from a start at `latest` (or after a seek by time), the
        answer compares the subscription's mark-delete position with the last entry; an
        inclusive start first seeks to that last entry (spec §7.5, §14.3).

        Raises:
            BrokerError: the broker refused GET_LAST_MESSAGE_ID.
            OperationTimeoutError: no reply within the operation timeout.
        """
        self._check_usable()
        if self._queue.peek(lambda m: m._consumer is self) is not None:
            return True
        by_time = self._last_seek_by_time
        start = self._start_id
        reply = await self.get_last_message_id_response()
        last = MessageId.from_data(reply.last_message_id, partition=self.partition)
        if self._last_dequeued is None and (start == LATEST or by_time):
            inclusive = self._inclusive and not by_time
            if inclusive and last.entry_id >= 0:
                await self.seek(last)
            mark = reply.consumer_mark_delete_position
            if mark is None or last.entry_id < 0:
                return False
            ordering = (mark.ledger_id, mark.entry_id), (last.ledger_id, last.entry_id)
            return ordering[0] <= ordering[1] if inclusive else ordering[0] < ordering[1]
        if last.entry_id < 0:
            return False
        if self._last_dequeued is not None:
            return last > self._last_dequeued
        reference = start if start is not None else LATEST
        return last >= reference if self._inclusive else last > reference

    async def unsubscribe(self) -> None:
        """Delete the subscription on the broker, then close the consumer.

        Raises:
            BrokerError: the broker refused it.
            OperationTimeoutError: no reply within the operation timeout.
        """
        await self._request(
            lambda rid: c.Unsubscribe(consumer_id=self.consumer_id, request_id=rid), "UNSUBSCRIBE"
        )
        await self._close(send_close=False)

    async def aclose(self) -> None:
        """Flush acks, CLOSE_CONSUMER and stop; waiting `receive` calls fail."""
        await self._close(send_close=True)

    async def _close(self, *, send_close: bool) -> None:
        if self._state in (HandlerState.CLOSING, HandlerState.CLOSED):
            return
        self.flush_acks()
        self._state = HandlerState.CLOSING
        if send_close:
            await self._close_on_broker(
                lambda rid: c.CloseConsumer(consumer_id=self.consumer_id, request_id=rid),
                "CLOSE_CONSUMER",
            )
        elif self._cnx is not None:
            self._detach_connection(self._cnx)
            self._cnx = None
        self._state = HandlerState.CLOSED
        self._queue.remove(lambda m: m._consumer is self)
        if not self._shared_queue:
            self._queue.close(self._closed_error())
        await self._stop()
        self._client._forget(self)

    def _on_failed(self, error: BaseException) -> None:
        if not self._shared_queue:
            self._queue.close(error if isinstance(error, Exception) else self._closed_error())
