"""The broker settings the topic layer reads: snake_case names over ``BrokerConfig``'s keys.

:class:`TopicSettings` declares no setting of its own: each attribute reads one ``broker.conf``
key of the ``BrokerConfig`` it wraps (``dispatcher_max_read_batch_size`` is
``dispatcherMaxReadBatchSize``), so types, defaults and validation live in one place
(``emubroker.config``). The app builds one from its configuration and passes it down; the topic
layer never reads configuration anywhere else (STYLE.md §5, no globals).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final, Generic, TypeVar, overload

import msgspec

from emubroker.config import BrokerConfig
from emubroker.topics.keyshared import AutoSplitSelector, KeySelector, RangeSplitSelector

__all__ = ["TopicSettings"]

T = TypeVar("T")

UNIT_DEFAULTS: Final = BrokerConfig(managedLedgerMinLedgerRolloverTimeMinutes=0.0)
"""What ``TopicSettings()`` reads: Pulsar's defaults, except that a ledger may roll over at any
age (Pulsar waits 10 minutes), so that tests of small ledgers need not move a clock that far."""


class _Key(Generic[T]):
    """An attribute that reads one ``BrokerConfig`` key, converted by ``read``."""

    __slots__ = ("key", "name", "read", "write")

    def __init__(
        self,
        key: str,
        read: Callable[[Any], T] | None = None,
        write: Callable[[T], Any] | None = None,
    ) -> None:
        self.key = key
        self.name = key
        self.read = read
        self.write = write  # an override's value -> the key's (the inverse of ``read``)

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Key[T]: ...

    @overload
    def __get__(self, obj: TopicSettings, owner: type | None = None) -> T: ...

    def __get__(self, obj: TopicSettings | None, owner: type | None = None) -> T | _Key[T]:
        if obj is None:
            return self
        value = getattr(obj.config, self.key)
        return value if self.read is None else self.read(value)


class TopicSettings:
    """Topic-layer settings, read from a ``BrokerConfig`` (every default is Pulsar's).

    Args:
        config: The broker configuration; None: :data:`UNIT_DEFAULTS`.
        broker_id: The middle part of generated producer names (Pulsar's distributed id
            generator gives each broker a unique number; one broker is ``0``).
        **overrides: Attribute values to use instead of ``config``'s, by attribute name
            (``TopicSettings(max_producers_per_topic=2)``).

    Raises:
        TypeError: An override names no attribute.
    """

    __slots__ = ("broker_id", "config")

    cluster_name = _Key[str]("clusterName")
    """Prefixes generated producer names (``standalone-0-3``)."""
    allow_auto_topic_creation = _Key[bool]("allowAutoTopicCreation")
    allow_auto_topic_creation_type = _Key[str]("allowAutoTopicCreationType")
    allow_auto_subscription_creation = _Key[bool]("allowAutoSubscriptionCreation")
    default_num_partitions = _Key[int]("defaultNumPartitions")
    dispatcher_max_read_batch_size = _Key[int]("dispatcherMaxReadBatchSize")
    """Entries read from storage per read call of a dispatch round."""
    max_unacked_messages_per_consumer = _Key[int]("maxUnackedMessagesPerConsumer")
    """Shared and Key_Shared consumers holding this many unacked messages get nothing more until
    they ack (0 disables)."""
    managed_ledger_max_entries_per_ledger = _Key[int]("managedLedgerMaxEntriesPerLedger")
    managed_ledger_max_size_per_ledger_mbytes = _Key[int]("managedLedgerMaxSizePerLedgerMbytes")
    managed_ledger_min_ledger_rollover_time_minutes = _Key[float](
        "managedLedgerMinLedgerRolloverTimeMinutes"
    )
    managed_ledger_max_ledger_rollover_time_minutes = _Key[float](
        "managedLedgerMaxLedgerRolloverTimeMinutes"
    )
    managed_ledger_cache_size_mb = _Key[int]("managedLedgerCacheSizeMB")
    cursor_flush_interval = _Key[float](
        "managedLedgerDefaultMarkDeleteRateLimit", lambda rate: 1.0 / rate, lambda s: 1.0 / s
    )
    """Seconds between cursor persistence rounds (1 / the mark-delete rate limit)."""
    delayed_delivery_enabled = _Key[bool]("delayedDeliveryEnabled")
    key_shared_hash_points = _Key[int]("subscriptionKeySharedConsistentHashingReplicaPoints")
    """Ring points per consumer for Key_Shared AUTO_SPLIT."""
    key_shared_use_consistent_hashing = _Key[bool]("subscriptionKeySharedUseConsistentHashing")
    stats_update_frequency = _Key[float]("statsUpdateFrequencyInSecs", float)
    """How often topic publish rates are refreshed (relative-to-publish-rate dispatch limits)."""
    max_producers_per_topic = _Key[int]("maxProducersPerTopic")
    max_consumers_per_topic = _Key[int]("maxConsumersPerTopic")
    max_consumers_per_subscription = _Key[int]("maxConsumersPerSubscription")
    max_subscriptions_per_topic = _Key[int]("maxSubscriptionsPerTopic")
    max_topics_per_namespace = _Key[int]("maxTopicsPerNamespace")
    """Persistent topics a namespace may hold (0: no limit; ``namespace_limits``)."""
    ttl_duration_default_in_seconds = _Key[int]("ttlDurationDefaultInSeconds")
    """The message TTL of namespaces whose policies set none (0: no TTL; ``expiry``)."""
    message_expiry_check_interval_in_minutes = _Key[int]("messageExpiryCheckIntervalInMinutes")
    backlog_quota_check_enabled = _Key[bool]("backlogQuotaCheckEnabled")
    backlog_quota_check_interval = _Key[float]("backlogQuotaCheckIntervalInSeconds", float)
    """Seconds between backlog quota checks (``backlog_quota``)."""
    backlog_quota_default_limit_bytes = _Key[int]("backlogQuotaDefaultLimitBytes")
    backlog_quota_default_limit_gb = _Key[float]("backlogQuotaDefaultLimitGB")
    backlog_quota_default_limit_second = _Key[int]("backlogQuotaDefaultLimitSecond")
    backlog_quota_default_retention_policy = _Key[str]("backlogQuotaDefaultRetentionPolicy")
    active_consumer_failover_delay = _Key[float](
        "activeConsumerFailoverDelayTimeMillis", lambda ms: ms / 1000, lambda s: round(s * 1000)
    )
    """Seconds after a Failover active-consumer change before its consumers hear of it."""
    batch_index_acks = _Key[bool]("acknowledgmentAtBatchIndexLevelEnabled")
    """A partly acknowledged batch keeps its acknowledged indexes (false: it comes back whole)."""

    def __init__(
        self, config: BrokerConfig | None = None, *, broker_id: int = 0, **overrides: Any
    ) -> None:
        base = UNIT_DEFAULTS if config is None else config
        changes: dict[str, Any] = {}
        for name, value in overrides.items():
            key = getattr(type(self), name, None)
            if not isinstance(key, _Key):
                raise TypeError(f"TopicSettings has no setting {name!r}")
            changes[key.key] = value if key.write is None else key.write(value)
        self.config = msgspec.structs.replace(base, **changes) if changes else base
        self.broker_id = broker_id

    @property
    def key_shared_auto_split(self) -> Callable[[], KeySelector[Any]]:
        """What makes a Key_Shared AUTO_SPLIT selector, chosen once from the configuration.

        Pulsar's consistent-hashing ring, or its auto-split hash ranges when
        ``subscriptionKeySharedUseConsistentHashing`` is false.
        """
        if self.key_shared_use_consistent_hashing:
            return functools.partial(AutoSplitSelector, self.key_shared_hash_points)
        return RangeSplitSelector

    def __repr__(self) -> str:
        return f"TopicSettings(broker_id={self.broker_id}, config={self.config!r})"
