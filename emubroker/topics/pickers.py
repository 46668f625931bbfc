"""Which consumer of a subscription gets an entry: one picker class per subscription type.

Every type chooses behind one interface, :class:`ConsumerPicker`; ``subtypes.RULES`` names the
class of each type (spec/wire-protocol.md §7.1):

* :class:`ExclusivePicker`: the one consumer; a second one is refused.
* :class:`FailoverPicker`: one *active* consumer among those of the best (lowest)
  ``priority_level``, ordered by ``consumer_name`` (Pulsar's ``pickAndScheduleActiveConsumer``):
  on a partition the one at index ``partition % len(them)``; on a non-partitioned topic the one
  whose point follows the topic name's hash on a ring of ``FAILOVER_RING_POINTS`` points per
  consumer at ``hash(consumer_name + str(j))`` (Murmur3-32 masked to 31 bits). Every consumer
  hears ACTIVE_CONSUMER_CHANGE when the active one changes (from the persistent subscription,
  ``activeConsumerFailoverDelayTimeMillis`` later; Pulsar's non-persistent dispatcher never tells
  a change), and a joining consumer that changes nothing hears its own state at once.
* :class:`SharedPicker`: round-robin over consumers with permits.
* :class:`KeySharedPicker`: the key's consumer from the selector (``keyshared``); consumers of
  one subscription must agree on the mode and on ``allowOutOfOrderDelivery``. AUTO_SPLIT without
  ``allowOutOfOrderDelivery`` also keeps the order of keys that move to a joining consumer
  (``drains_hashes``; the dispatcher does that with ``draining``).

A consumer can take an entry while its permits are > 0 (a batch may overshoot, §7.1) and, where
unacked messages are tracked, while it is not *blocked* on them (``acks``). With
``writable_only`` it also needs a *writable* connection (``ConsumerSink.writable``): Pulsar's
non-persistent dispatchers check ``isWritable()`` and drop; the persistent dispatcher holds the
entries in the ledger until the connection drains (docs/reliability.md), and then counts an
unwritable consumer's permits as none.
The picker shares the subscription's list of consumers (join order) and is the one that adds to
it and removes from it.
"""

from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar

from emubroker.ratelimit.readsize import multiple_consumers_permits
from emubroker.topics.entry import NONE_KEY
from emubroker.topics.keyshared import StickySelector, sticky_key_hash
from protocol.commands import KeySharedMeta, KeySharedMode
from protocol.errors import ConsumerBusyError

if TYPE_CHECKING:
    from collections.abc import Callable

    from emubroker.topics.entry import EntryInfo
    from emubroker.topics.keyshared import KeySelector
    from emubroker.topics.sinks import ConsumerSink

__all__ = [
    "FAILOVER_RING_POINTS",
    "ConsumerPicker",
    "ExclusivePicker",
    "FailoverPicker",
    "KeySharedPicker",
    "Member",
    "PickerContext",
    "SharedPicker",
    "failover_ring_pick",
    "key_hash",
]

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
    """What a picker reads from a consumer."""

    consumer_id: int
    name: str
    priority_level: int
    permits: int
    unacked: int
    blocked: bool
    sink: ConsumerSink


M = TypeVar("M", bound=Member)


class PickerContext(NamedTuple):
    """Where a subscription's picker works.

    Attributes:
        topic: The full topic name (a non-partitioned Failover topic picks its active by it).
        partition: The topic's partition index, -1 when not a partition.
        auto_split: Makes the selector of a Key_Shared AUTO_SPLIT subscription
            (``TopicSettings.key_shared_auto_split``).
        writable_only: Pick only consumers whose connection is writable.
    """

    topic: str
    partition: int
    auto_split: Callable[[], KeySelector[Any]]
    writable_only: bool = False


class ConsumerPicker(ABC, Generic[M]):
    """The interface every type's picker implements, with what most of them share.

    Args:
        consumers: The subscription's consumers, in join order (the picker adds and removes).
        context: Where the subscription is.
        key_shared_meta: The first consumer's Key_Shared settings (Key_Shared only).
    """

    active: M | None = None
    """The one consumer a single-active-consumer type delivers to; None for the others."""

    change_unannounced = False
    """Failover: the active consumer changed and the consumers have not been told yet."""

    drains_hashes = False
    """Whether hashes that move away from a consumer drain first (``draining``)."""

    def __init__(
        self, consumers: list[M], context: PickerContext, key_shared_meta: KeySharedMeta | None
    ) -> None:
        del key_shared_meta
        self._consumers = consumers
        self._context = context

    def check_join(self, subscription: str, key_shared_meta: KeySharedMeta | None) -> None:
        """Refuse a consumer of this type that the attached ones exclude (same type).

        Raises:
            ConsumerBusyError: This type takes no more consumers like it.
        """
        del subscription, key_shared_meta

    def add(self, consumer: M, key_shared_meta: KeySharedMeta | None) -> M | None:
        """Attach a consumer.

        Returns:
            The previous active consumer when it lost that role but stays attached.

        Raises:
            ConsumerAssignError: Its Key_Shared STICKY ranges overlap taken ones.
        """
        del key_shared_meta
        self._consumers.append(consumer)
        return None

    def remove(self, consumer: M) -> M | None:
        """Detach an attached consumer.

        Returns:
            The previous active consumer when it lost that role but stays attached.
        """
        self._consumers.remove(consumer)
        return None

    @abstractmethod
    def select(self, info: EntryInfo) -> M | None:
        """The consumer that takes this entry now, or None if the one it must go to cannot."""

    @abstractmethod
    def has_capacity(self) -> bool:
        """Whether any consumer could take an entry now."""

    @abstractmethod
    def permits(self) -> int:
        """The permits a read may be sized by (spec/pulsar-behaviour.md §1.2 step 1)."""

    def announce_active(self) -> None:
        """Tell every consumer whether it is the active one (ACTIVE_CONSUMER_CHANGE)."""
        self.change_unannounced = False
        active = self.active
        if active is None:
            return
        for c in self._consumers:
            c.sink.active_consumer_change(c.consumer_id, c is active)

    def owner(self, key_hash: int) -> M | None:
        """The consumer a Key_Shared hash is assigned to, whatever its permits."""
        del key_hash
        return None

    def routes_nowhere(self, info: EntryInfo) -> bool:
        """Key_Shared only: no consumer's range covers the entry's key (STICKY gaps)."""
        del info
        return False

    def _takes(self, consumer: M | None) -> M | None:
        """``consumer`` if it may take an entry now (permits, not blocked, writable)."""
        if consumer is None or consumer.permits <= 0 or consumer.blocked:
            return None
        return consumer if self._writable(consumer) else None

    def _writable(self, consumer: M) -> bool:
        """Whether the consumer's connection may be sent to (always, without ``writable_only``)."""
        return not self._context.writable_only or consumer.sink.writable


class _SingleActivePicker(ConsumerPicker[M]):
    """Exclusive and Failover: everything goes to one active consumer."""

    announces = False
    """Whether consumers hear ACTIVE_CONSUMER_CHANGE (Failover)."""

    def add(self, consumer: M, key_shared_meta: KeySharedMeta | None) -> M | None:
        super().add(consumer, key_shared_meta)
        return self._update_active(joined=consumer)

    def remove(self, consumer: M) -> M | None:
        super().remove(consumer)
        return self._update_active()

    @abstractmethod
    def _pick_active(self) -> M | None:
        """The consumer that should be active now (there is at least one)."""

    def _update_active(self, joined: M | None = None) -> M | None:
        consumers = self._consumers
        active = self._pick_active() if consumers else None
        if active is self.active:
            if self.announces and joined is not None:
                joined.sink.active_consumer_change(joined.consumer_id, joined is active)
            return None
        old, self.active = self.active, active
        if self.announces and active is not None:
            # Told later by the subscription (``announce_active``): Pulsar notifies a change
            # activeConsumerFailoverDelayTimeMillis after it, so after the SUBSCRIBE's SUCCESS.
            self.change_unannounced = True
        return old if old is not None and old in consumers else None

    def select(self, info: EntryInfo) -> M | None:
        return self._takes(self.active)

    def has_capacity(self) -> bool:
        return self.permits() > 0

    def permits(self) -> int:
        active = self.active
        if active is None or not self._writable(active):
            return 0
        return active.permits


class ExclusivePicker(_SingleActivePicker[M]):
    """Exclusive: the one consumer; a second one is refused."""

    def check_join(self, subscription: str, key_shared_meta: KeySharedMeta | None) -> None:
        raise ConsumerBusyError(
            f"Exclusive consumer is already connected to subscription '{subscription}'"
        )

    def _pick_active(self) -> M | None:
        return self._consumers[0]


class FailoverPicker(_SingleActivePicker[M]):
    """Failover: the best priority level's consumer for this partition (module docstring)."""

    announces = True

    def _pick_active(self) -> M | None:
        ordered = sorted(self._consumers, key=lambda c: (c.priority_level, c.name))
        best = [c for c in ordered if c.priority_level == ordered[0].priority_level]
        context = self._context
        if context.partition >= 0:
            return best[context.partition % len(best)]
        return best[failover_ring_pick(context.topic, [c.name for c in best])]


class _MultiplePicker(ConsumerPicker[M]):
    """Shared and Key_Shared: entries spread over every consumer that has room."""

    def has_capacity(self) -> bool:
        return any(c.permits > 0 and not c.blocked and self._writable(c) for c in self._consumers)

    def permits(self) -> int:
        # Pulsar's getFirstAvailableConsumerPermits: a read only while some consumer not
        # blocked on unacked messages has permits; the total counts every consumer's. With
        # ``writable_only`` an unwritable consumer counts none (Pulsar reads one entry then;
        # the persistent dispatcher holds its entries until it drains, ``resume_delivery``).
        total = first = 0
        for consumer in self._consumers:
            if consumer.permits > 0 and self._writable(consumer):
                total += consumer.permits
                if not first and not consumer.blocked:
                    first = consumer.permits
        return multiple_consumers_permits(total, first)


class SharedPicker(_MultiplePicker[M]):
    """Shared: round-robin over the consumers that can take an entry."""

    _next = 0

    def select(self, info: EntryInfo) -> M | None:
        consumers = self._consumers
        n = len(consumers)
        for k in range(n):
            chosen = self._takes(consumers[(self._next + k) % n])
            if chosen is not None:
                self._next = (self._next + k + 1) % n
                return chosen
        return None


class KeySharedPicker(_MultiplePicker[M]):
    """Key_Shared: the consumer the key's hash is assigned to (module docstring)."""

    def __init__(
        self, consumers: list[M], context: PickerContext, key_shared_meta: KeySharedMeta | None
    ) -> None:
        super().__init__(consumers, context, key_shared_meta)
        meta = key_shared_meta or KeySharedMeta(key_shared_mode=KeySharedMode.AUTO_SPLIT)
        self.mode = meta.key_shared_mode
        self.allow_out_of_order = meta.allow_out_of_order_delivery
        self._selector: KeySelector[M] = (
            StickySelector()
            if meta.key_shared_mode is KeySharedMode.STICKY
            else context.auto_split()
        )
        # Pulsar's drainingHashesRequired: AUTO_SPLIT without allowOutOfOrderDelivery. STICKY
        # ranges never move between attached consumers (they cannot overlap).
        self.drains_hashes = self.mode is KeySharedMode.AUTO_SPLIT and not self.allow_out_of_order

    def check_join(self, subscription: str, key_shared_meta: KeySharedMeta | None) -> None:
        mode = key_shared_meta.key_shared_mode if key_shared_meta else KeySharedMode.AUTO_SPLIT
        if mode != self.mode:
            raise ConsumerBusyError(f"Subscription '{subscription}' uses another Key_Shared mode")
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
        ranges = key_shared_meta.hash_ranges if key_shared_meta is not None else ()
        self._selector.add(consumer, consumer.name, ranges)
        return super().add(consumer, key_shared_meta)

    def remove(self, consumer: M) -> M | None:
        super().remove(consumer)
        self._selector.remove(consumer)
        return None

    def select(self, info: EntryInfo) -> M | None:
        return self._takes(self._selector.select(sticky_key_hash(info.key or NONE_KEY)))

    def owner(self, key_hash: int) -> M | None:
        return self._selector.select(key_hash)

    def routes_nowhere(self, info: EntryInfo) -> bool:
        return self._selector.select(key_hash(info)) is None
