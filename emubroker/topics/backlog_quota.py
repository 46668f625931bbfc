"""Backlog quotas enforced: Pulsar's ``BacklogQuotaManager`` and the checks around it.

Rules (Pulsar 4.0's ``BrokerService.monitorBacklogQuota``, ``PersistentTopic`` and
``BacklogQuotaManager``; which quota applies is ``policies.backlog_quota``):

1. A topic's *backlog* is what its slowest durable subscription has not consumed: the entries
   after the lowest mark-delete position. Its size is their bytes (``limitSize``: exceeded when
   ``size >= limit``, a negative limit never); its age is that of the oldest of them, by
   publish time (``limitTime``: exceeded when ``now > publish_time + limit``, a limit <= 0
   never). A topic without durable subscriptions has no backlog.
2. Every ``backlogQuotaCheckIntervalInSeconds`` (when ``backlogQuotaCheckEnabled``), each loaded
   persistent topic is checked: the size quota first, and only when it holds, the age quota.
   The exceeded quota's retention policy then acts:

   * ``producer_request_hold`` and ``producer_exception``: every producer of the topic is
     disconnected (CLOSE_PRODUCER). They come back through rule 3.
   * ``consumer_backlog_eviction``, size: while the backlog is larger than 90 % of the limit,
     the slowest subscription skips ``(size - target) / size`` of its backlog entries (the
     oldest ones); it stops when the same subscription is the slowest twice in a row or there
     is nothing to skip.
   * ``consumer_backlog_eviction``, age: every subscription expires the entries older than
     90 % of the limit (Pulsar's ``preciseTimeBasedBacklogQuotaCheck`` way; see
     docs/broker-behaviour.md for the ledger-granular default this stands for).

3. A PRODUCER on a topic whose backlog exceeds a quota whose policy is ``producer_*`` is
   refused, "Cannot create producer on topic with backlog quota exceeded":
   ``ProducerBlockedQuotaExceededError`` for ``producer_request_hold`` (the client retries),
   ``ProducerBlockedQuotaExceededException`` for ``producer_exception`` (it gives up). So a
   held producer's sends wait, unacknowledged, until the backlog drops or the client's send
   timeout fails them. SENDs of a connected producer are never refused: only the check
   disconnects it.
4. Topic stats report the quotas in force (``backlogQuotaLimitSize``, ``backlogQuotaLimitTime``)
   and the age of the oldest backlog message as of the last check (or producer check),
   ``oldestBacklogMessageAgeSeconds`` (-1 before one found a backlog), with the subscription
   holding it (``oldestBacklogMessageSubscriptionName``).

Nothing here runs on the publish path: the sizes are summed when a check or a PRODUCER asks
(whole ledgers by their sizes, ``ManagedLedger.bytes_from``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from emubroker.policies.backlog_quota import (
    BYTES_IN_GIGABYTE,
    BacklogQuota,
    RetentionPolicy,
    quota_of,
)
from emubroker.topics.expiry import find_expired
from protocol.errors import (
    ProducerBlockedQuotaExceededError,
    ProducerBlockedQuotaExceededException,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from emubroker.naming import NamespaceName, TopicName
    from emubroker.policies import Policies, TopicPolicies
    from emubroker.topics.managed_ledger import ManagedLedger
    from emubroker.topics.settings import TopicSettings
    from emubroker.topics.subscription import Subscription
    from protocol.clock import Clock

__all__ = [
    "EVICTION_TARGET",
    "BacklogQuotas",
    "OldestBacklog",
    "QuotaTopic",
    "default_quota",
]

log = logging.getLogger(__name__)

EVICTION_TARGET = 0.9
"""``BacklogQuotaManager``'s ``reductionFactor``: eviction brings a backlog down to 90 %."""

_REFUSAL = "Cannot create producer on topic with backlog quota exceeded"


class OldestBacklog:
    """The oldest backlog message a check found (rule 4)."""

    __slots__ = ("publish_time", "subscription")

    def __init__(self, publish_time: int, subscription: str) -> None:
        self.publish_time = publish_time
        self.subscription = subscription


class QuotaTopic(Protocol):
    """What the checks read and ask of a persistent topic (``topic.Topic``)."""

    @property
    def name(self) -> TopicName: ...

    @property
    def closed(self) -> bool: ...

    @property
    def ledger(self) -> ManagedLedger: ...

    oldest_backlog: OldestBacklog | None

    def durable_subscriptions(self) -> list[Subscription]:
        """Its durable subscriptions (the cursors a backlog is measured from)."""
        ...

    def disconnect_producers(self) -> None:
        """Send every producer CLOSE_PRODUCER and detach it."""
        ...

    def expire_to(self, index: int, now_ms: int) -> None:
        """Expire every expirable subscription up to ``index``."""
        ...


def default_quota(settings: TopicSettings) -> BacklogQuota:
    """The broker's quota for topics whose policies set none (``BacklogQuotaManager``)."""
    gb = settings.backlog_quota_default_limit_gb
    size = int(gb * BYTES_IN_GIGABYTE) if gb > 0 else settings.backlog_quota_default_limit_bytes
    return BacklogQuota(
        limit=size,
        limitSize=size,
        limitTime=settings.backlog_quota_default_limit_second,
        policy=RetentionPolicy(settings.backlog_quota_default_retention_policy),
    )


def _slowest(topic: QuotaTopic) -> Subscription | None:
    return min(topic.durable_subscriptions(), key=lambda s: s.cursor.mark_delete, default=None)


def backlog_size(topic: QuotaTopic) -> int:
    """Bytes of the entries after the slowest durable mark-delete position (rule 1)."""
    slowest = _slowest(topic)
    if slowest is None:
        return 0
    return topic.ledger.bytes_from(slowest.cursor.mark_delete + 1)


def find_oldest(topic: QuotaTopic) -> OldestBacklog | None:
    """The oldest backlog entry's publish time and its subscription (rule 1)."""
    slowest = _slowest(topic)
    if slowest is None:
        return None
    ledger = topic.ledger
    index = max(slowest.cursor.mark_delete + 1, ledger.first_index)
    if index >= ledger.count:
        return None
    return OldestBacklog(ledger.info(index).publish_time, slowest.name)


class BacklogQuotas:
    """The quotas of every topic, their checks and what exceeding them does.

    Args:
        clock: The period of the check and message ages (wall clock).
        settings: The current topic settings (the defaults, the check's switch and period).
        namespace_policies: A namespace's ``Policies`` (None: unknown); None: none.
        topic_policies: A topic's ``TopicPolicies`` (None: none); None: none.
    """

    def __init__(
        self,
        *,
        clock: Clock,
        settings: Callable[[], TopicSettings],
        namespace_policies: Callable[[NamespaceName], Policies | None] | None = None,
        topic_policies: Callable[[TopicName], TopicPolicies | None] | None = None,
    ) -> None:
        self._clock = clock
        self._settings = settings
        self._namespace_policies = namespace_policies
        self._topic_policies = topic_policies
        # The broker's quota, made again only when the settings or their configuration are
        # replaced (dynamic configuration replaces them; a periodic check asks per topic).
        self._default: tuple[object, object, BacklogQuota] | None = None

    def _default_quota(self) -> BacklogQuota:
        settings = self._settings()
        made = self._default
        if made is None or made[0] is not settings or made[1] is not settings.config:
            made = self._default = (settings, settings.config, default_quota(settings))
        return made[2]

    def quota(self, topic: TopicName, kind: str) -> BacklogQuota:
        """The quota of ``kind`` in force on ``topic``: topic, namespace, then the broker's."""
        if self._topic_policies is not None:
            policies = self._topic_policies(topic)
            if policies is not None and (found := quota_of(policies.backLogQuotaMap.get(kind))):
                return found
        if self._namespace_policies is not None:
            ns = self._namespace_policies(topic.namespace)
            if ns is not None and (found := quota_of(ns.backlog_quota_map.get(kind))):
                return found
        return self._default_quota()

    def _size_exceeded(self, topic: QuotaTopic, quota: BacklogQuota) -> bool:
        return quota.limitSize >= 0 and backlog_size(topic) >= quota.limitSize

    def _age_exceeded(self, topic: QuotaTopic, quota: BacklogQuota, now_ms: int) -> bool:
        oldest = topic.oldest_backlog = find_oldest(topic)
        if quota.limitTime <= 0 or oldest is None:
            return False
        return now_ms > oldest.publish_time + quota.limitTime * 1000

    def check_producer(self, topic: QuotaTopic) -> None:
        """Refuse a producer while a ``producer_*`` quota is exceeded (rule 3).

        Raises:
            ProducerBlockedQuotaExceededError: ``producer_request_hold``.
            ProducerBlockedQuotaExceededException: ``producer_exception``.
        """
        now = self._clock.wall_ms()
        for kind in ("destination_storage", "message_age"):
            quota = self.quota(topic.name, kind)
            if quota.policy not in _PRODUCER_REFUSALS:
                continue
            exceeded = (
                self._size_exceeded(topic, quota)
                if kind == "destination_storage"
                else self._age_exceeded(topic, quota, now)
            )
            if exceeded:
                raise _PRODUCER_REFUSALS[quota.policy](_REFUSAL)

    def check_topic(self, topic: QuotaTopic, now: int | None = None) -> None:
        """One topic's periodic check (rule 2), at ``now`` (wall ms; None: the clock's)."""
        if now is None:
            now = self._clock.wall_ms()
        size_quota = self.quota(topic.name, "destination_storage")
        if self._size_exceeded(topic, size_quota):
            self._exceeded(topic, size_quota, evict=_evict_size)
            topic.oldest_backlog = find_oldest(topic)
            return
        age_quota = self.quota(topic.name, "message_age")
        if self._age_exceeded(topic, age_quota, now):
            self._exceeded(topic, age_quota, evict=lambda t, q: _evict_age(t, q, now))

    def _exceeded(
        self,
        topic: QuotaTopic,
        quota: BacklogQuota,
        *,
        evict: Callable[[QuotaTopic, BacklogQuota], None],
    ) -> None:
        log.info("backlog quota exceeded on %s: %s", topic.name, quota.policy)
        if quota.policy is RetentionPolicy.consumer_backlog_eviction:
            evict(topic, quota)
        elif quota.policy is not None:
            topic.disconnect_producers()

    def stats(self, topic: QuotaTopic | None) -> dict[str, Any]:
        """The ``TopicStats`` fields of rule 4 (a non-persistent topic: None, Pulsar's zeros)."""
        if topic is None:
            return {
                "backlogQuotaLimitSize": 0,
                "backlogQuotaLimitTime": 0,
                "oldestBacklogMessageAgeSeconds": -1,
            }
        oldest = topic.oldest_backlog
        doc: dict[str, Any] = {
            "backlogQuotaLimitSize": self.quota(topic.name, "destination_storage").limitSize,
            "backlogQuotaLimitTime": self.quota(topic.name, "message_age").limitTime,
            "oldestBacklogMessageAgeSeconds": -1
            if oldest is None
            else (self._clock.wall_ms() - oldest.publish_time) // 1000,
        }
        if oldest is not None:  # Pulsar's null is left out of its JSON
            doc["oldestBacklogMessageSubscriptionName"] = oldest.subscription
        return doc

    def check_all(self, topics: Iterable[QuotaTopic]) -> None:
        """Check every given topic once."""
        now = self._clock.wall_ms()
        for topic in topics:
            if not topic.closed:
                self.check_topic(topic, now)

    async def run(self, topics: Callable[[], Iterable[QuotaTopic]]) -> None:
        """Check every ``backlogQuotaCheckIntervalInSeconds`` until cancelled (fixed rate).

        Without ``backlogQuotaCheckEnabled`` nothing is checked (Pulsar schedules no task).
        """
        if not self._settings().backlog_quota_check_enabled:
            await anyio.sleep_forever()
        deadline = self._clock.now()
        while True:
            deadline += self._settings().backlog_quota_check_interval
            await self._clock.sleep_until(deadline)
            self.check_all(list(topics()))


_PRODUCER_REFUSALS: dict[RetentionPolicy | None, type[Exception]] = {
    RetentionPolicy.producer_request_hold: ProducerBlockedQuotaExceededError,
    RetentionPolicy.producer_exception: ProducerBlockedQuotaExceededException,
}


def _evict_size(topic: QuotaTopic, quota: BacklogQuota) -> None:
    """``dropBacklogForSizeLimit`` (rule 2)."""
    target = EVICTION_TARGET * quota.limitSize
    size = backlog_size(topic)
    previous: Subscription | None = None
    while size > target:
        slowest = _slowest(topic)
        if slowest is None or slowest is previous:
            break
        skip = int((size - target) / size * slowest.acks.backlog())
        if skip == 0:
            break
        slowest.skip(skip)
        size = backlog_size(topic)
        previous = slowest


def _evict_age(topic: QuotaTopic, quota: BacklogQuota, now_ms: int) -> None:
    """``dropBacklogForTimeLimit``, precisely (rule 2)."""
    index = find_expired(topic.ledger, int(EVICTION_TARGET * quota.limitTime), now_ms)
    if index is not None:
        topic.expire_to(index, now_ms)
