"""A consumer attached to a persistent subscription: permits, unacked deliveries, the handle API.

The consumer is a small record: the dispatcher spends its permits and counts what it sent, the
acknowledgement state (``acks``) keeps its pending deliveries, and the handle methods the session
calls hand each command to the subscription, which owns the rules. The consumer knows the
subscription only as :class:`ConsumerOwner`, so the two modules do not import each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from emubroker.topics.stats import ConsumerActivity

if TYPE_CHECKING:
    from collections.abc import Sequence

    from emubroker.topics.requests import SubscribeRequest
    from emubroker.topics.sinks import ConsumerSink
    from emubroker.topics.stats import ConsumerStats
    from protocol.commands import AckType, MessageIdData

__all__ = ["Consumer", "ConsumerOwner", "ConsumerRecord"]


class ConsumerOwner(Protocol):
    """What a consumer's commands go to: its subscription (``subscription.Subscription``)."""

    def flow(self, consumer: Consumer, permits: int) -> None: ...

    def ack(self, consumer: Consumer, ack_type: AckType, ids: Sequence[MessageIdData]) -> None: ...

    def redeliver(self, consumer: Consumer, ids: Sequence[MessageIdData] | None) -> None: ...

    def resume_delivery(self, consumer: Consumer) -> None: ...

    async def seek(
        self,
        consumer: Consumer,
        *,
        message_id: MessageIdData | None = None,
        publish_time: int | None = None,
    ) -> None: ...

    def last_message_id(self) -> tuple[tuple[int, int, int], tuple[int, int]]: ...

    def remove_consumer(self, consumer: Consumer) -> None: ...

    def unsubscribe(self, consumer: Consumer) -> None: ...


class ConsumerRecord(ConsumerActivity):
    """What every consumer is, of either topic kind: what the pickers read (``pickers.Member``).

    Made from the SUBSCRIBE that asked for it and the session it goes to; its stats key comes
    from the topic's counters.

    Attributes:
        consumer_id: The client-chosen id.
        name: The consumer name (Failover ordering, Key_Shared ring points).
        sink: Where its frames go.
        priority_level: Failover priority (lower wins).
        permits: Messages it may still receive; may go negative by a batch's overshoot (§7.1).
        unacked: Messages delivered to it and not yet acknowledged (kept by ``acks``).
        blocked: Held by the unacked limit (kept by ``acks``; ``selection`` rule 3).
        closed: Set once it is detached.

    Its counters and timestamps for admin stats are those of ``ConsumerActivity``.
    """

    __slots__ = (
        "blocked",
        "closed",
        "consumer_id",
        "name",
        "permits",
        "priority_level",
        "sink",
        "unacked",
    )

    def __init__(self, request: SubscribeRequest, sink: ConsumerSink, stats_key: int) -> None:
        super().__init__()
        self.consumer_id = request.consumer_id
        self.name = request.consumer_name
        self.sink = sink
        self.priority_level = request.priority_level
        self.metadata = dict(request.metadata)
        self.client = request.client
        self.stats_key = stats_key
        self.permits = 0  # a new subscribe starts from zero (§7.1, checklist item 10)
        self.unacked = 0
        self.blocked = False
        self.closed = False


class Consumer(ConsumerRecord):
    """One consumer of a persistent subscription (implements ``ConsumerHandle``).

    Attributes:
        pending: Index -> messages charged, for every entry delivered to it and not acked
            (kept by ``acks``).
    """

    __slots__ = ("_owner", "pending")

    def __init__(
        self, request: SubscribeRequest, sink: ConsumerSink, stats_key: int, owner: ConsumerOwner
    ) -> None:
        super().__init__(request, sink, stats_key)
        self.pending: dict[int, int] = {}
        self._owner = owner

    def __repr__(self) -> str:
        return f"Consumer({self.consumer_id}, {self.name!r}, permits={self.permits})"

    def flow(self, permits: int) -> None:
        """Add permits (FLOW) and let the dispatcher use them."""
        if not self.closed and permits > 0:
            self._owner.flow(self, permits)

    def resume_delivery(self) -> None:
        """Its connection is writable again: run a dispatch round (it skipped this consumer)."""
        if not self.closed:
            self._owner.resume_delivery(self)

    def ack(self, ack_type: AckType, ids: Sequence[MessageIdData]) -> None:
        """Apply an ACK to the subscription."""
        if not self.closed:
            self._owner.ack(self, ack_type, ids)

    def redeliver(self, ids: Sequence[MessageIdData] | None) -> None:
        """Redeliver this consumer's unacked messages (all of them when ``ids`` is empty)."""
        if not self.closed:
            self._owner.redeliver(self, ids)

    async def seek(
        self, *, message_id: MessageIdData | None = None, publish_time: int | None = None
    ) -> None:
        """Reset the subscription and close all its consumers (§7.5).

        Raises:
            NotAllowedError: This consumer is already closed, or no target was given.
        """
        await self._owner.seek(self, message_id=message_id, publish_time=publish_time)

    def last_message_id(self) -> tuple[tuple[int, int, int], tuple[int, int]]:
        """Topic's last entry (with batch index) and the subscription's mark-delete position."""
        return self._owner.last_message_id()

    def stats(
        self, *, unacked_tracked: bool = True, draining: tuple[int, int, int] = (0, 0, 0)
    ) -> ConsumerStats:
        """A snapshot for metrics and admin.

        ``unacked_tracked`` False reports 0 unacked messages, as Pulsar does on Exclusive and
        Failover subscriptions; ``draining`` is its dispatcher's ``DrainingHashes.summary``.
        """
        unacked = self.unacked if unacked_tracked else 0
        return self.snapshot(
            self.name,
            self.consumer_id,
            self.permits,
            unacked,
            blocked_on_unacked=self.blocked,
            draining=draining,
        )

    async def close(self) -> None:
        """Detach; its unacked messages go to the other consumers (not counted as redelivered)."""
        if not self.closed:
            self._owner.remove_consumer(self)

    async def unsubscribe(self) -> None:
        """Delete the subscription.

        Raises:
            MetadataError: Other consumers are attached.
        """
        self._owner.unsubscribe(self)
