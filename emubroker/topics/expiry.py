"""Message TTL: expiring old messages by moving subscriptions' mark-delete positions.

Pulsar's ``PersistentMessageExpiryMonitor``, ``PersistentMessageFinder`` and
``PersistentTopic.checkMessageExpiry``, reduced to what the emulator stores. Rules:

1. The TTL of a topic is the namespace's ``message_ttl_in_seconds`` when set (0 included: it
   disables), else the broker's ``ttlDurationDefaultInSeconds`` (0: no TTL). Pulsar's
   ``PolicyHierarchyValue``; the emulator has no topic-level TTL.
2. An entry has expired when its timestamp is older than ``now - ttl``: strictly
   ``timestamp < cutoff`` (``MessageImpl.isEntryPublishedEarlierThan``). The timestamp is the
   entry's ``publish_time`` (Pulsar uses the broker-entry-metadata time when an interceptor adds
   one; the emulator adds none), so a batch entry is judged as one, by its batch's publish time.
3. Which entry is the newest expired one is found as ``OpFindNewest`` finds it: a binary search
   over every stored entry (``SearchAllAvailableEntries``) that first checks the first and the
   last entry, so publish times out of order give Pulsar's answer, not a linear scan's
   (:func:`newest_matching`).
4. Expiring is a mark-delete to that entry (``ManagedCursor.asyncMarkDelete``): nothing happens
   when it is not after the current mark-delete position; otherwise individual acks and batch
   acks up to it are dropped and the individually acked entries right after it are folded in
   (``setAcknowledgedPosition``). Entries delivered and unacked are settled as a cumulative ack
   settles them. The expired count is the backlog before minus the backlog after, in entries.
5. The periodic check (every ``messageExpiryCheckIntervalInMinutes``, and on a namespace
   policies change) finds the position once per topic and applies it to every subscription,
   readers' non-durable ones included; only Pulsar's ``__compaction`` subscription is skipped
   (:func:`is_expirable`). Each subscription's ``lastExpireTimestamp`` is set whenever a position
   was found.
6. ``expireMessages/{seconds}`` (REST) expires one subscription: refused (409) when its backlog is
   empty, or when it has consumers, fewer than 1000 entries of backlog and its oldest entry is
   not older than 1.5 times the given time (``PersistentSubscription.expireMessages``).

This module decides (which index, whether an expiry is issued); the topic and its subscriptions
apply the decision (``Topic.expire_to``, ``Subscription.expire_to``), and their
acknowledgement state moves the mark-delete position (``Acknowledgements.expire_to``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from emubroker.naming import NamespaceName, TopicName
    from emubroker.topics.managed_ledger import ManagedLedger
    from emubroker.topics.settings import TopicSettings
    from protocol.clock import Clock

__all__ = [
    "ExpiringTopic",
    "ExpiryCounters",
    "MessageExpiry",
    "expiry_issued",
    "find_expired",
    "is_expirable",
    "newest_matching",
]

COMPACTION_SUBSCRIPTION: Final = "__compaction"
"""Pulsar's ``Compactor.COMPACTION_SUBSCRIPTION``: never expired."""

MINIMUM_BACKLOG_FOR_EXPIRY_CHECK: Final = 1000
"""``PersistentSubscription``: below this backlog a connected subscription is checked only when its
oldest entry is well past the TTL (rule 6)."""

MESSAGE_EXPIRY_THRESHOLD: Final = 1.5
"""``PersistentTopic.MESSAGE_EXPIRY_THRESHOLD``: "well past" in rule 6."""


class ExpiryCounters:
    """One subscription's expiry statistics (Pulsar's ``totalMsgExpired``, ``lastExpireTimestamp``).

    Like Pulsar's expiry monitor they belong to the subscription object and start again at 0
    when the topic is reloaded.
    """

    __slots__ = ("last_expire", "total")

    def __init__(self) -> None:
        self.total = 0
        self.last_expire = 0


def newest_matching(first: int, last: int, matches: Callable[[int], bool]) -> int | None:
    """The newest index in ``[first, last]`` that ``matches``, searched as ``OpFindNewest`` does.

    The search assumes ``matches`` holds for a prefix: it returns None when the first index does
    not match, ``last`` when the last one does, else the result of Pulsar's binary search (the
    same probes, so out-of-order timestamps give Pulsar's answer).

    Args:
        first: The first stored index.
        last: The last stored index.
        matches: The condition (here: the entry is older than the cutoff).

    Returns:
        The index found, or None.
    """
    count = last - first + 1
    if count <= 0 or not matches(first):
        return None
    if matches(last):
        return last
    found, low, high = first, 0, count
    mid = low + max((high - low) // 2, 1)
    while True:
        probe = first + mid  # ``getPositionAfterN(start, mid, startExcluded)``
        if probe > last:  # beyond the last entry: ``find`` ends with what it has
            return found
        if matches(probe):
            found, low = probe, mid
        else:
            high = mid - 1
        mid = low + max((high - low) // 2, 1)
        if high <= low:
            return found


def find_expired(ledger: ManagedLedger, ttl_seconds: int, now_ms: int) -> int | None:
    """The newest stored entry published before ``now - ttl`` (rules 2 and 3), else None."""
    cutoff = now_ms - ttl_seconds * 1000
    info = ledger.info
    return newest_matching(
        ledger.first_index, ledger.count - 1, lambda index: info(index).publish_time < cutoff
    )


def expiry_issued(
    backlog: int, consumers: bool, oldest: int | None, seconds: int, now_ms: int
) -> bool:
    """Whether ``expireMessages/{seconds}`` is issued for a subscription (rule 6).

    Args:
        backlog: The subscription's backlog in entries.
        consumers: Whether it has consumers.
        oldest: Publish time of the entry after its mark-delete position (individually acked
            or not: ``PersistentTopic.isOldestMessageExpired``), None when there is none.
        seconds: The expiry time asked for.
        now_ms: The wall time, epoch ms.
    """
    if backlog == 0:
        return False
    if not consumers or backlog >= MINIMUM_BACKLOG_FOR_EXPIRY_CHECK:
        return True
    threshold = int(seconds * MESSAGE_EXPIRY_THRESHOLD)
    return oldest is not None and threshold != 0 and now_ms > oldest + threshold * 1000


def is_expirable(subscription: str) -> bool:
    """Whether a topic-wide expiry applies to a subscription of this name (rule 5)."""
    return subscription != COMPACTION_SUBSCRIPTION


class ExpiringTopic(Protocol):
    """What the periodic check reads and asks of a persistent topic (``topic.Topic``)."""

    @property
    def name(self) -> TopicName: ...

    @property
    def closed(self) -> bool: ...

    @property
    def ledger(self) -> ManagedLedger: ...

    def expire_to(self, index: int, now_ms: int) -> None:
        """Expire every expirable subscription up to ``index`` (rules 4 and 5)."""
        ...


class MessageExpiry:
    """The broker's periodic TTL check (``BrokerService.startMessageExpiryMonitor``).

    Args:
        clock: Time for the period and for message ages (wall clock).
        settings: The current topic settings (TTL default and check interval).
        namespace_ttl: A namespace's ``message_ttl_in_seconds`` (None: not set).
    """

    def __init__(
        self,
        *,
        clock: Clock,
        settings: Callable[[], TopicSettings],
        namespace_ttl: Callable[[NamespaceName], int | None],
    ) -> None:
        self._clock = clock
        self._settings = settings
        self._namespace_ttl = namespace_ttl

    def ttl_of(self, name: TopicName) -> int:
        """The effective TTL of a topic in seconds, 0 for none (rule 1)."""
        ttl = self._namespace_ttl(name.namespace)
        return self._settings().ttl_duration_default_in_seconds if ttl is None else ttl

    def check_topic(self, topic: ExpiringTopic, *, now_ms: int | None = None) -> None:
        """``PersistentTopic.checkMessageExpiry`` (rule 5)."""
        ttl = self.ttl_of(topic.name)
        if ttl <= 0:
            return
        now = self._clock.wall_ms() if now_ms is None else now_ms
        index = find_expired(topic.ledger, ttl, now)
        if index is not None:
            topic.expire_to(index, now)

    def check_all(self, topics: Iterable[ExpiringTopic], *, now_ms: int | None = None) -> None:
        """Check every given topic once (``BrokerService.checkMessageExpiry``)."""
        for topic in topics:
            if not topic.closed:
                self.check_topic(topic, now_ms=now_ms)

    async def run(self, topics: Callable[[], Iterable[ExpiringTopic]]) -> None:
        """Check every ``messageExpiryCheckIntervalInMinutes`` until cancelled (fixed rate)."""
        deadline = self._clock.now()
        while True:
            deadline += self._settings().message_expiry_check_interval_in_minutes * 60.0
            await self._clock.sleep_until(deadline)
            self.check_all(list(topics()))
