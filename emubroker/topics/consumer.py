"""A consumer attached to a persistent subscription: permits, unacked deliveries, the handle API.

The consumer is a small record that the dispatcher reads and updates on every delivery; the
handle methods delegate to the subscription, which owns the rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emubroker.topics.selection import SINGLE_ACTIVE
from emubroker.topics.stats import ConsumerActivity
from protocol.commands import AckType

if TYPE_CHECKING:
    from collections.abc import Sequence

    from emubroker.topics.sinks import ConsumerSink
    from emubroker.topics.stats import ConsumerStats
    from emubroker.topics.subscription import Subscription
    from protocol.commands import MessageIdData

__all__ = ["Consumer"]


class Consumer(ConsumerActivity):
    """One consumer of a persistent subscription (implements ``ConsumerHandle``).

    Attributes:
        consumer_id: The client-chosen id.
        name: The consumer name (Failover ordering, Key_Shared ring points).
        sink: Where its frames go.
        priority_level: Failover priority (lower wins).
        permits: Messages it may still receive; may go negative by a batch's overshoot (§7.1).
        unacked: Messages delivered to it and not yet acknowledged.
        pending: Index -> messages charged, for every entry delivered to it and not acked.
        closed: Set once it is detached.

    Its counters and timestamps for admin stats are those of ``ConsumerActivity``.
    """

    __slots__ = (
        "_subscription",
        "blocked",
        "closed",
        "consumer_id",
        "name",
        "pending",
        "permits",
        "priority_level",
        "sink",
        "unacked",
    )

    def __init__(
        self,
        consumer_id: int,
        name: str,
        sink: ConsumerSink,
        priority_level: int,
        subscription: Subscription,
    ) -> None:
        super().__init__()
        self.consumer_id = consumer_id
        self.name = name
        self.sink = sink
        self.priority_level = priority_level
        self.permits = 0  # a new subscribe starts from zero (§7.1, checklist item 10)
        self.unacked = 0
        self.blocked = False  # on unacked messages (``selection``; kept by the dispatcher)
        self.pending: dict[int, int] = {}
        self.closed = False
        self._subscription = subscription

    def __repr__(self) -> str:
        return f"Consumer({self.consumer_id}, {self.name!r}, permits={self.permits})"

    @property
    def subscription(self) -> Subscription:
        """The subscription it belongs to."""
        return self._subscription

    def flow(self, permits: int) -> None:
        """Add permits (FLOW) and let the dispatcher use them."""
        if self.closed or permits <= 0:
            return
        subscription = self._subscription
        # Pulsar's Consumer.flowPermits / PersistentSubscription.consumerFlow timestamps.
        self.flowed(subscription.wall_ms())
        subscription.last_flow = self.last_flow
        self.permits += permits
        subscription.wake()

    def resume_delivery(self) -> None:
        """Its connection is writable again: run a dispatch round (it skipped this consumer)."""
        if not self.closed:
            self._subscription.wake()

    def ack(self, ack_type: AckType, ids: Sequence[MessageIdData]) -> None:
        """Apply an ACK to the subscription."""
        if self.closed:
            return
        subscription = self._subscription
        self.last_acked = subscription.wall_ms()
        if ack_type is AckType.CUMULATIVE:
            subscription.ack(ack_type, ids)
            self.msg_acked += 1  # Pulsar's Consumer.messageAcked records 1 per cumulative ACK
            return
        # The messages this ACK settled, whichever consumer they were delivered to (Pulsar
        # records them on the acking consumer too).
        dispatcher = subscription.dispatcher
        before = dispatcher.acked_messages
        subscription.ack(ack_type, ids)
        self.msg_acked += dispatcher.acked_messages - before

    def redeliver(self, ids: Sequence[MessageIdData] | None) -> None:
        """Redeliver this consumer's unacked messages (all of them when ``ids`` is empty)."""
        if self.closed:
            return
        before = self.unacked
        self._subscription.redeliver(self, ids)
        if self._subscription.dispatcher.sub_type not in SINGLE_ACTIVE:
            # Pulsar tracks pending acks, hence redeliveries, for Shared and Key_Shared only.
            self.msg_redeliver += before - self.unacked

    async def seek(
        self, *, message_id: MessageIdData | None = None, publish_time: int | None = None
    ) -> None:
        """Reset the subscription and close all its consumers (§7.5).

        Raises:
            NotAllowedError: This consumer is already closed, or no target was given.
        """
        await self._subscription.seek(self, message_id=message_id, publish_time=publish_time)

    def last_message_id(self) -> tuple[tuple[int, int, int], tuple[int, int]]:
        """Topic's last entry (with batch index) and the subscription's mark-delete position."""
        return self._subscription.last_message_id()

    def stats(self, *, unacked_tracked: bool = True) -> ConsumerStats:
        """A snapshot for metrics and admin.

        ``unacked_tracked`` False reports 0 unacked messages, as Pulsar does on Exclusive and
        Failover subscriptions.
        """
        unacked = self.unacked if unacked_tracked else 0
        return self.snapshot(
            self.name, self.consumer_id, self.permits, unacked, blocked_on_unacked=self.blocked
        )

    async def close(self) -> None:
        """Detach; its unacked messages go to the other consumers (not counted as redelivered)."""
        if not self.closed:
            self._subscription.remove_consumer(self)

    async def unsubscribe(self) -> None:
        """Delete the subscription.

        Raises:
            MetadataError: Other consumers are attached.
        """
        self._subscription.unsubscribe(self)
