"""The acknowledgement side of one consumer: acks, cumulative acks, negative acks, their timers.

Rules (spec §7.3, §7.4, §8.3, §8.4):

1. Acks are grouped (`AckGrouper`) and sent after `ack_group_time` (on the Clock) or once
   `ack_group_max` ids are pending; `ack_group_time=0` sends each at once. While detached they
   wait for the next attachment.
2. A batched message acks its entry once every delivered message of the batch is acked; with
   `batch_index_ack_enabled` a partial ack carries the bitmap of the indexes still outstanding.
   A chunked message acks every chunk's entry.
3. A negative ack becomes REDELIVER_UNACKNOWLEDGED_MESSAGES after the negative-ack delay: with
   the entry ids on Shared/Key_Shared, as "redeliver everything unacked" (an empty list, like
   the C++ client) on Exclusive/Failover.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from protocol import commands as c
from protocol.client.acks import AckGrouper, BatchTracker, NackTracker
from protocol.client.chunks import ChunkAssembler
from protocol.client.config import ConsumerConfig
from protocol.clock import Clock
from protocol.errors import LocalProtocolError
from protocol.ids import MessageId

if TYPE_CHECKING:
    from protocol.client.connection import ClientConnection

__all__ = ["REDELIVER_MIN_PROTOCOL", "Acknowledger"]

_SHARED = (c.SubType.SHARED, c.SubType.KEY_SHARED)

REDELIVER_MIN_PROTOCOL = 2
"""The C++ client sends REDELIVER_UNACKNOWLEDGED_MESSAGES only to v2+ brokers (spec §12)."""


class Acknowledger:
    """Acknowledgement state and timers of one consumer.

    Args:
        consumer_id: the consumer's id on the wire.
        config: the consumer's options.
        clock: for the grouping and negative-ack delays.
        attached: the connection to write on, or None while detached.
        redeliver_all: what "redeliver everything unacked" means for the consumer (rule 3).
    """

    def __init__(
        self,
        consumer_id: int,
        config: ConsumerConfig,
        clock: Clock,
        attached: Callable[[], ClientConnection | None],
        redeliver_all: Callable[[], None],
    ) -> None:
        self._consumer_id = consumer_id
        self._config = config
        self._clock = clock
        self._attached = attached
        self._redeliver_all = redeliver_all
        self.grouper = AckGrouper(consumer_id, config.ack_group_max)
        self.batches = BatchTracker()
        self.nacks = NackTracker(config.negative_ack_redelivery_delay)
        self.chunks = ChunkAssembler(config.max_pending_chunked_messages)
        # Set by the first ack of a group to its flush time, without waking the timer task.
        self._group_due = clock.timer(self._on_group_due)
        self._nacks_changed: anyio.Event | None = None

    # ---- acks ----------------------------------------------------------------------------------

    def acknowledge(self, message_id: MessageId, chunk_ids: tuple[MessageId, ...] | None) -> None:
        """Ack one message; `chunk_ids` None means "look them up by id" (rule 2)."""
        if chunk_ids is None:
            chunk_ids = self.chunks.pop_ids(message_id)
        elif chunk_ids:
            self.chunks.pop_ids(message_id)
        if chunk_ids:
            for chunk_id in chunk_ids[:-1]:
                self._queue_entry((chunk_id.ledger_id, chunk_id.entry_id))
        self.ack_position((message_id.ledger_id, message_id.entry_id), message_id.batch_index)

    def ack_position(self, key: tuple[int, int], batch_index: int) -> None:
        """Ack message `batch_index` (-1: not batched) of entry `key` (rule 2); not for chunks.

        The consumer's per-message path: it calls this directly, without making the message's
        id, for a message that is not chunked (`acknowledge` otherwise).
        """
        if self.nacks.due:
            self.nacks.discard(key)
        if batch_index < 0 or self.batches.ack(key, batch_index):
            self._queue_entry(key)
        elif self._config.batch_index_ack_enabled:
            ack_set = self.batches.outstanding(key)
            self._queue(
                c.MessageIdData(
                    ledger_id=key[0],
                    entry_id=key[1],
                    ack_set=ack_set,
                    batch_size=len(ack_set) * 64,
                )
            )

    def _queue_entry(self, key: tuple[int, int]) -> None:
        """`_queue(entry_data(*key))`, from the key the grouper files it under."""
        grouper = self.grouper
        was_empty = not len(grouper)
        if grouper.add_entry(key) or self._config.ack_group_time <= 0:
            self.flush()
        elif was_empty:
            self._arm()

    def _queue(self, data: c.MessageIdData) -> None:
        was_empty = not len(self.grouper)
        if self.grouper.add_individual(data) or self._config.ack_group_time <= 0:
            self.flush()
        elif was_empty:
            self._arm()

    def acknowledge_cumulative(self, message_id: MessageId) -> None:
        """Ack everything up to and including `message_id`.

        Raises:
            LocalProtocolError: the subscription is Shared or Key_Shared.
        """
        if self._config.sub_type in _SHARED:
            raise LocalProtocolError("cumulative acks are not allowed on Shared subscriptions")
        data = self.batches.cumulative(message_id)
        if data is None:
            return
        was_empty = not len(self.grouper)
        self.grouper.add_cumulative(message_id, data)
        if self._config.ack_group_time <= 0:
            self.flush()
        elif was_empty:
            self._arm()

    def _arm(self) -> None:
        self._group_due.set(self._clock.now() + self._config.ack_group_time)

    def flush(self) -> None:
        """Send the grouped acks now, if attached (else they wait, rule 1)."""
        cnx = self._attached()
        if cnx is None or not len(self.grouper):
            return
        for command in self.grouper.take():
            cnx.send_command(command)

    async def run_ack_timer(self) -> None:
        """Flush grouped acks `ack_group_time` after the first of them; runs until cancelled."""
        # A group flushed early (full, or by `flush`) leaves the timer set: it then finds no
        # acks to send, or a newer group has moved it on.
        await self._group_due.run()

    def _on_group_due(self) -> None:
        self.flush()
        if len(self.grouper):  # not attached: try again one period later
            self._arm()

    # ---- negative acks -------------------------------------------------------------------------

    def negative_acknowledge(self, message_id: MessageId) -> None:
        """Schedule the message's entry for redelivery (rule 3)."""
        self.nacks.add(message_id, self._clock.now())
        if self._nacks_changed is not None:
            self._nacks_changed.set()

    async def run_nack_timer(self) -> None:
        """Send the redeliveries as their delays pass; runs until cancelled."""
        while True:
            deadline = self.nacks.next_deadline()
            if deadline is None:
                self._nacks_changed = anyio.Event()
                await self._nacks_changed.wait()
                continue
            await self._clock.sleep_until(deadline)
            due = self.nacks.pop_due(self._clock.now())
            if not due:
                continue
            if self._config.sub_type not in _SHARED:
                self._redeliver_all()
                continue
            cnx = self._attached()
            if cnx is not None and cnx.protocol_version >= REDELIVER_MIN_PROTOCOL:
                cnx.send_command(
                    c.RedeliverUnacknowledgedMessages(
                        consumer_id=self._consumer_id, message_ids=tuple(due)
                    )
                )

    # ---- resets --------------------------------------------------------------------------------

    def reset_deliveries(self) -> None:
        """Forget batches and chunks in flight (the broker delivers them again)."""
        self.batches.clear()
        self.chunks.clear()
