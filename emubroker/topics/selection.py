"""Which consumer of a subscription gets an entry: the per-type rules, shared by both topic kinds.

* Exclusive: the one consumer. Failover: one *active* consumer among those of the best (lowest)
  ``priority_level``, ordered by ``consumer_name`` (Pulsar's ``pickAndScheduleActiveConsumer``):
  on a partition the one at index ``partition % len(them)``; on a non-partitioned topic the one
  whose point follows the topic name's hash on a ring of ``FAILOVER_RING_POINTS`` points per
  consumer at ``hash(consumer_name + str(j))`` (Murmur3-32 masked to 31 bits). Every
  consumer hears ACTIVE_CONSUMER_CHANGE when the active one changes, and a joining consumer
  always hears its own state (spec/wire-protocol.md §7.1).
* Shared: round-robin over consumers with permits.
* Key_Shared: the key's consumer from the selector (``keyshared``). AUTO_SPLIT without
  ``allowOutOfOrderDelivery`` also keeps the order of keys that move to a joining consumer
  (``drains_hashes``; the dispatcher does that with ``draining``).

A consumer can take an entry while its permits are > 0 (a batch may overshoot, §7.1) and, for
Shared and Key_Shared, while it is not *blocked* on unacked messages, Pulsar's
``blockedConsumerOnUnackedMsgs``: it blocks once it holds ``maxUnackedMessagesPerConsumer``
(0: no limit) or more, and unblocks only when it is down to half of that, or asks for
redelivery. The dispatcher keeps the flag (``block_at`` / ``unblock_at``), as it keeps the count.
With ``writable_only`` a consumer also needs a *writable* connection (``ConsumerSink.writable``):
Pulsar's non-persistent dispatchers check ``isWritable()`` and drop; the persistent dispatcher
holds the entries until the connection drains (docs/reliability.md).
"""

from __future__ import annotations

import bisect
import sys
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from emubroker.topics.entry import NONE_KEY
from emubroker.topics.keyshared import (
    AutoSplitSelector,
    KeySelector,
    StickySelector,
    sticky_key_hash,
)
from protocol.commands import KeySharedMeta, KeySharedMode, SubType
from protocol.errors import ConsumerBusyError

if TYPE_CHECKING:
    from emubroker.topics.entry import EntryInfo
    from emubroker.topics.sinks import ConsumerSink

__all__ = [
    "FAILOVER_RING_POINTS",
    "SINGLE_ACTIVE",
    "SUB_TYPE_NAMES",
    "ConsumerSet",
    "Member",
    "failover_ring_pick",
    "key_hash",
]

SINGLE_ACTIVE = (SubType.EXCLUSIVE, SubType.FAILOVER)
"""Types that deliver to one active consumer only."""

SUB_TYPE_NAMES = {
    SubType.EXCLUSIVE: "Exclusive",
    SubType.SHARED: "Shared",
    SubType.FAILOVER: "Failover",
    SubType.KEY_SHARED: "Key_Shared",
}
"""Pulsar's names of the subscription types (stats, error messages)."""


FAILOVER_RING_POINTS = 100
"""Pulsar's ``CONSUMER_CONSISTENT_HASH_REPLICAS``: ring points per Failover consumer."""


def failover_ring_pick(topic: str, names: list[str]) -> int:
    """The index in ``names`` of the active Failover consumer of non-partitioned ``topic``.

    Pulsar's ring: each consumer ``i`` puts points at ``hash(names[i] + str(j))``, a later
    consumer taking a point two share; the topic goes to the first point at or after its own
    hash, wrapping around to the lowest.
    """
    ring: dict[int, int] = {}
    for i, name in enumerate(names):
        for j in range(FAILOVER_RING_POINTS):
            ring[sticky_key_hash(f"{name}{j}".encode())] = i
    points = sorted(ring)
    at = bisect.bisect_left(points, sticky_key_hash(topic.encode()))
    return ring[points[at % len(points)]]


def key_hash(info: EntryInfo) -> int:
    """The sticky-key hash Key_Shared routes an entry by (key-less entries share ``NONE_KEY``)."""
    return sticky_key_hash(info.key or NONE_KEY)


class Member(Protocol):
    """What the choice reads from a consumer."""

    consumer_id: int
    name: str
    priority_level: int
    permits: int
    unacked: int
    blocked: bool
    sink: ConsumerSink


M = TypeVar("M", bound=Member)


class ConsumerSet(Generic[M]):
    """The consumers of one subscription and the rules of its type.

    Args:
        topic: The full topic name (a non-partitioned Failover topic picks its active by it).
        partition: The topic's partition index, -1 when not a partition.
        max_unacked: ``maxUnackedMessagesPerConsumer`` for Shared and Key_Shared; 0 disables.
        hash_points: Ring points per consumer for Key_Shared AUTO_SPLIT.
        writable_only: Pick only consumers whose connection is writable.
    """

    def __init__(
        self,
        *,
        topic: str,
        partition: int,
        max_unacked: int,
        hash_points: int,
        writable_only: bool = False,
    ) -> None:
        self._topic = topic
        self._writable_only = writable_only
        self._partition = partition
        self._max_unacked = max_unacked
        self._hash_points = hash_points
        self.consumers: list[M] = []
        self.sub_type = SubType.EXCLUSIVE
        self.key_shared_mode: KeySharedMode | None = None
        self.allow_out_of_order = False
        self.selector: KeySelector[M] | None = None
        self.active: M | None = None
        self._rr = 0

    def configure(self, sub_type: SubType, key_shared_meta: KeySharedMeta | None) -> None:
        """Set the type; only while no consumer is attached."""
        assert not self.consumers, "the type of a subscription with consumers cannot change"
        self.sub_type = sub_type
        self.active = None
        self.selector = None
        self.key_shared_mode = None
        self.allow_out_of_order = False
        if sub_type is SubType.KEY_SHARED:
            meta = key_shared_meta or KeySharedMeta(key_shared_mode=KeySharedMode.AUTO_SPLIT)
            self.key_shared_mode = meta.key_shared_mode
            self.allow_out_of_order = meta.allow_out_of_order_delivery
            if meta.key_shared_mode is KeySharedMode.STICKY:
                self.selector = StickySelector()
            else:
                self.selector = AutoSplitSelector(self._hash_points)

    def check_join(
        self, subscription: str, sub_type: SubType, key_shared_meta: KeySharedMeta | None
    ) -> None:
        """Refuse a consumer the subscription's current consumers exclude; else set the type.

        A subscription keeps its type while it has consumers; without consumers the newcomer
        sets it (Pulsar behaves the same).

        Raises:
            ConsumerBusyError: A second Exclusive consumer, or another type or Key_Shared mode.
        """
        if not self.consumers:
            self.configure(sub_type, key_shared_meta)
            return
        if sub_type != self.sub_type:
            raise ConsumerBusyError(
                f"Subscription '{subscription}' is of type {SUB_TYPE_NAMES[self.sub_type]}, "
                f"not {SUB_TYPE_NAMES[sub_type]}"
            )
        if sub_type is SubType.EXCLUSIVE:
            raise ConsumerBusyError(
                f"Exclusive consumer is already connected to subscription '{subscription}'"
            )
        if sub_type is SubType.KEY_SHARED:
            mode = key_shared_meta.key_shared_mode if key_shared_meta else KeySharedMode.AUTO_SPLIT
            if mode != self.key_shared_mode:
                raise ConsumerBusyError(
                    f"Subscription '{subscription}' uses another Key_Shared mode"
                )
            ooo = key_shared_meta is not None and key_shared_meta.allow_out_of_order_delivery
            if ooo != self.allow_out_of_order:
                # Pulsar's AbstractSubscription.checkForConsumerCompatibilityErrorWithDispatcher.
                raise ConsumerBusyError(
                    "Subscription is of different type. Active subscription "
                    + ("allows" if self.allow_out_of_order else "does not allow")
                    + " out of order delivery while the connecting consumer "
                    + ("does not allow it." if self.allow_out_of_order else "allows it.")
                )

    def add(self, consumer: M, key_shared_meta: KeySharedMeta | None) -> M | None:
        """Attach a consumer.

        Returns:
            The previous active consumer when it lost that role but stays attached.

        Raises:
            ConsumerAssignError: Its Key_Shared STICKY ranges overlap taken ones.
        """
        if self.selector is not None:
            ranges = key_shared_meta.hash_ranges if key_shared_meta is not None else ()
            self.selector.add(consumer, consumer.name, ranges)
        self.consumers.append(consumer)
        return self._update_active(joined=consumer)

    def remove(self, consumer: M) -> M | None:
        """Detach a consumer (unknown ones are ignored).

        Returns:
            The previous active consumer when it lost that role but stays attached.
        """
        if consumer not in self.consumers:
            return None
        self.consumers.remove(consumer)
        if self.selector is not None:
            self.selector.remove(consumer)
        return self._update_active()

    def _pick_active(self) -> M | None:
        if not self.consumers:
            return None
        if self.sub_type is SubType.EXCLUSIVE:
            return self.consumers[0]
        ordered = sorted(self.consumers, key=lambda c: (c.priority_level, c.name))
        best = [c for c in ordered if c.priority_level == ordered[0].priority_level]
        if self._partition >= 0:
            return best[self._partition % len(best)]
        return best[failover_ring_pick(self._topic, [c.name for c in best])]

    def _update_active(self, joined: M | None = None) -> M | None:
        if self.sub_type not in SINGLE_ACTIVE:
            return None
        active = self._pick_active()
        failover = self.sub_type is SubType.FAILOVER
        if active is self.active:
            if failover and joined is not None:
                joined.sink.active_consumer_change(joined.consumer_id, joined is active)
            return None
        old, self.active = self.active, active
        if failover:
            for c in self.consumers:
                c.sink.active_consumer_change(c.consumer_id, c is active)
        return old if old is not None and old in self.consumers else None

    @property
    def drains_hashes(self) -> bool:
        """Whether hashes that move away from a consumer drain first.

        Pulsar's ``drainingHashesRequired``: AUTO_SPLIT without ``allowOutOfOrderDelivery``.
        STICKY ranges never move between attached consumers (they cannot overlap).
        """
        return self.key_shared_mode is KeySharedMode.AUTO_SPLIT and not self.allow_out_of_order

    def owner(self, key_hash: int) -> M | None:
        """The consumer a Key_Shared hash is assigned to, whatever its permits."""
        return None if self.selector is None else self.selector.select(key_hash)

    @property
    def block_at(self) -> int:
        """Unacked messages at which a consumer blocks.

        ``sys.maxsize`` (never) without a limit and for the single-active-consumer types, whose
        unacked messages Pulsar does not track.
        """
        limit = self._max_unacked
        return sys.maxsize if limit <= 0 or self.sub_type in SINGLE_ACTIVE else limit

    @property
    def unblock_at(self) -> int:
        """Unacked messages a blocked consumer must be down to, to unblock (half the limit)."""
        return self._max_unacked // 2

    def has_capacity(self) -> bool:
        """Whether any consumer could take an entry now."""
        writable = self._writable_only
        if self.sub_type in SINGLE_ACTIVE:
            active = self.active
            return (
                active is not None and active.permits > 0 and (not writable or active.sink.writable)
            )
        return any(
            c.permits > 0 and not c.blocked and (not writable or c.sink.writable)
            for c in self.consumers
        )

    def select(self, info: EntryInfo) -> M | None:
        """The consumer that takes this entry now, or None if the one it must go to cannot."""
        need_writable = self._writable_only
        if self.sub_type in SINGLE_ACTIVE:
            active = self.active
            if active is None or active.permits <= 0:
                return None
            return None if need_writable and not active.sink.writable else active
        if self.selector is not None:
            chosen = self.selector.select(sticky_key_hash(info.key or NONE_KEY))
            if chosen is None or chosen.permits <= 0 or chosen.blocked:
                return None
            return None if need_writable and not chosen.sink.writable else chosen
        consumers = self.consumers
        n = len(consumers)
        for k in range(n):
            c = consumers[(self._rr + k) % n]
            if c.permits > 0 and not c.blocked and (not need_writable or c.sink.writable):
                self._rr = (self._rr + k + 1) % n
                return c
        return None

    def routes_nowhere(self, info: EntryInfo) -> bool:
        """Key_Shared only: no consumer's range covers the entry's key (STICKY gaps)."""
        selector = self.selector
        return selector is not None and selector.select(key_hash(info)) is None
