"""Consumers: subscription, flow permits, the receiver queue, seek and position queries.

Rules (spec §7.1, §7.5, §7.6, §9); decoding MESSAGE frames is `incoming`'s job, acknowledging
`acknowledger`'s:

Seek and the position queries are `positions`' (its `PositionQueries` is the base class).

1. After every SUBSCRIBE the broker has forgotten our permits: send FLOW = receiver queue size,
   then another FLOW each time half the queue was consumed. Permits count messages; messages the
   client drops itself (filtered batch indexes, corrupt entries, incomplete chunks) are given back
   as if consumed. `receiver_queue_size=0` sends one permit per `receive`.
2. On reattachment the receiver queue is cleared (the broker redelivers); non-durable
   subscriptions restart after the last message handed out, or at a seek's target
   (C++ `clearReceiveQueue`).
3. A seek is answered by the broker closing the consumer, then SUCCESS; the seek completes once
   the consumer has reattached, and messages before the target are filtered from then on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from protocol import commands as c
from protocol.client._util import with_deadline
from protocol.client.acknowledger import REDELIVER_MIN_PROTOCOL, Acknowledger
from protocol.client.acks import entry_data
from protocol.client.config import ConsumerConfig
from protocol.client.handler import ENDED_STATES, HandlerState
from protocol.client.incoming import Incoming
from protocol.client.positions import PositionQueries, before
from protocol.client.receive_queue import ReceiveQueue
from protocol.client.received import Message
from protocol.errors import (
    ClientClosedError,
    ConsumerClosedError,
)
from protocol.framing import Payload
from protocol.ids import MessageId

if TYPE_CHECKING:
    from protocol.client.connection import ClientConnection
    from protocol.client.host import HandlerHost

__all__ = ["Consumer"]

logger = logging.getLogger(__name__)


def _kv(values: Mapping[str, str] | None) -> tuple[c.KeyValue, ...]:
    return tuple(c.KeyValue(key=k, value=v) for k, v in (values or {}).items())


class Consumer(PositionQueries):
    """A consumer on one topic or one partition. Create it with `Client.subscribe`."""

    def __init__(
        self,
        client: HandlerHost,
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
        self.consumer_id = client.new_consumer_id()
        self._queue = queue if queue is not None else ReceiveQueue()
        self._shared_queue = queue is not None
        self._queue_size = config.receiver_queue_size
        # Never reached without a queue (0 below 1), so the per-message check need not ask.
        self._refill_at = max(self._queue_size // 2, 1) if self._queue_size > 0 else 0
        self._permits = 0
        self._zero_queue_permit_out = False
        self._last_dequeued: Message | None = None  # its id is made only if needed
        self._acker = Acknowledger(
            self.consumer_id, config, self._clock, self._attached, self._redeliver_all
        )
        self._incoming = Incoming(
            topic,
            partition,
            self,
            self._acker.batches,
            self._acker.chunks,
            self._acker.grouper.is_duplicate,
        )
        self._incoming.start_id = config.start_message_id
        self._incoming.inclusive = config.start_message_id_inclusive
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
        if not self._config.durable and self._incoming.start_id is not None:
            start = self._incoming.start_id.to_data()
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
        """Rule 2: pick the restart point, drop prefetched messages."""
        if self._seek_state is not None:
            self._incoming.start_id = (
                self._seek_target if isinstance(self._seek_target, MessageId) else None
            )
        elif not self._config.durable:
            first = self._queue.peek(lambda m: m._consumer is self)
            if first is not None:
                self._incoming.start_id = before(first.message_id)
            elif self._last_dequeued is not None:
                self._incoming.start_id = self._last_dequeued.message_id
        self._queue.remove(lambda m: m._consumer is self)
        self._last_dequeued = None
        self._acker.reset_deliveries()

    def _detach_connection(self, cnx: ClientConnection) -> None:
        cnx.remove_consumer(self.consumer_id)

    def _start_loops(self, tg: anyio.abc.TaskGroup) -> None:
        tg.start_soon(self._acker.run_ack_timer)
        tg.start_soon(self._acker.run_nack_timer)

    def handle_active_change(self, is_active: bool) -> None:
        """ACTIVE_CONSUMER_CHANGE: whether this consumer is now the active one (Failover)."""
        self.is_active = is_active

    # ---- receiving (called by the connection's reader task) ------------------------------------

    def handle_message(self, message: c.Message, payload: Payload, cnx: ClientConnection) -> None:
        """A MESSAGE frame for this consumer from `cnx` (ignored from a connection it left)."""
        if cnx is not self._cnx:
            return  # a late frame from a connection we left
        self._zero_queue_permit_out = False
        messages, skipped, validation_error = self._incoming.decode(message, payload)
        if validation_error is not None:
            data = message.message_id
            self._discard(data.ledger_id, data.entry_id, validation_error)
        if skipped:
            self._consumed(skipped)  # rule 1
        if messages:
            self._queue.put_many(messages)

    def _discard(self, ledger_id: int, entry_id: int, validation_error: int) -> None:
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

    def _send(self, command: c.Command) -> bool:
        """Send if attached; False (nothing sent) otherwise."""
        cnx = self._attached()
        if cnx is None:
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
        self._last_dequeued = message
        permits = self._permits + 1
        if permits < self._refill_at:
            self._permits = permits  # `_consumed(1)` below the refill threshold, inline
        else:
            self._consumed(1)

    # ---- the application side ------------------------------------------------------------------

    async def receive(self) -> Message:
        """Wait for the next message (bound the wait with a cancel scope if needed).

        Raises:
            ConsumerClosedError: the consumer is closed.
        """
        if self._state in ENDED_STATES:
            self._check_usable()
        prefetched = self._queue.items
        if prefetched:
            message = prefetched.popleft()  # the hot path: no other call, no other coroutine
        else:
            if (
                self._queue_size == 0
                and not self._zero_queue_permit_out
                # receiver_queue_size=0: one permit per receive (spec §7.1).
                and self._send(c.Flow(consumer_id=self.consumer_id, message_permits=1))
            ):
                self._zero_queue_permit_out = True
            taken = self._queue.get_nowait()  # raises the error the queue was closed with
            message = taken if taken is not None else await self._queue.get()
        # `_on_dequeued`, inline: this runs once per message.
        consumer = message._entry.consumer_ref()
        consumer._last_dequeued = message
        permits = consumer._permits + 1
        if permits < consumer._refill_at:
            consumer._permits = permits
        else:
            consumer._consumed(1)
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
        """Acknowledge one message (grouped; see `acknowledger`).

        Raises:
            ConsumerClosedError: the consumer is closed.
        """
        if self._state in ENDED_STATES:
            self._check_usable()
        if isinstance(message, Message):
            if message._chunk_ids:
                self._acker.acknowledge(message.message_id, message._chunk_ids)
            else:  # the per-message path: its position, without making its id
                self._acker.ack_position(message._entry.key, message._index)
        else:
            self._acker.acknowledge(message, None)

    def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        """Acknowledge everything up to and including this message.

        Raises:
            LocalProtocolError: the subscription is Shared or Key_Shared.
            ConsumerClosedError: the consumer is closed.
        """
        self._check_usable()
        self._acker.acknowledge_cumulative(
            message.message_id if isinstance(message, Message) else message
        )

    def flush_acks(self) -> None:
        """Send the grouped acks now (kept for later if not attached)."""
        self._acker.flush()

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Have the message redelivered after the negative-ack delay.

        Raises:
            ConsumerClosedError: the consumer is closed.
        """
        self._check_usable()
        self._acker.negative_acknowledge(
            message.message_id if isinstance(message, Message) else message
        )

    def redeliver_unacknowledged(self) -> None:
        """Ask the broker to redeliver every unacknowledged message of this consumer.

        Prefetched messages are dropped (they come again) and their permits returned, as the
        Java client does; pending acks are flushed first so acked messages stay acked.
        """
        self._check_usable()
        self._redeliver_all()

    def _redeliver_all(self) -> None:
        self.flush_acks()
        cleared = self._queue.remove(lambda m: m._consumer is self)
        self._acker.batches.clear()
        cnx = self._attached()
        if cnx is not None and cnx.protocol_version >= REDELIVER_MIN_PROTOCOL:
            cnx.send_command(c.RedeliverUnacknowledgedMessages(consumer_id=self.consumer_id))
            self._consumed(cleared)

    # ---- requests ------------------------------------------------------------------------------

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
        self._client.forget(self)

    def _on_failed(self, error: BaseException) -> None:
        if not self._shared_queue:
            self._queue.close(error if isinstance(error, Exception) else self._closed_error())
