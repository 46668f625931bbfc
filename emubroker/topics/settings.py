"""The broker settings the topic layer reads, named after Pulsar's ``broker.conf`` keys.

The app builds one :class:`TopicSettings` from its ``BrokerConfig`` (camelCase key
``dispatcherMaxReadBatchSize`` becomes attribute ``dispatcher_max_read_batch_size``) and passes it
down; the topic layer never reads configuration anywhere else (STYLE.md §5, no globals).
"""

from __future__ import annotations

import msgspec

__all__ = ["TopicSettings"]


class TopicSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Topic-layer settings; every default is Pulsar's broker default.

    Attributes:
        cluster_name: ``clusterName``; prefixes generated producer names (``standalone-0-3``).
        broker_id: The middle part of generated producer names (Pulsar's distributed id
            generator gives each broker a unique number; one broker is ``0``).
        allow_auto_topic_creation: ``allowAutoTopicCreation``.
        allow_auto_topic_creation_type: ``allowAutoTopicCreationType``, ``"non-partitioned"``
            or ``"partitioned"``.
        default_num_partitions: ``defaultNumPartitions``, for partitioned auto-creation.
        dispatcher_max_read_batch_size: ``dispatcherMaxReadBatchSize``: entries read from storage
            per read call of a dispatch round.
        max_unacked_messages_per_consumer: ``maxUnackedMessagesPerConsumer``; Shared and
            Key_Shared consumers holding this many unacked messages get nothing more until they
            ack (0 disables).
        managed_ledger_max_entries_per_ledger: ``managedLedgerMaxEntriesPerLedger``: the topic
            rolls over to a new ledger after this many entries.
        managed_ledger_max_size_per_ledger_mbytes: ``managedLedgerMaxSizePerLedgerMbytes``.
        managed_ledger_min_ledger_rollover_time_minutes: ``managedLedgerMinLedgerRolloverTime
            Minutes``: no rollover before a ledger is this old (0 here; the config's default is
            Pulsar's 10).
        managed_ledger_max_ledger_rollover_time_minutes: ``managedLedgerMaxLedgerRolloverTime
            Minutes``: roll over a non-empty ledger this old.
        managed_ledger_cache_size_mb: ``managedLedgerCacheSizeMB``: the broker's entry cache.
        cursor_flush_interval: Seconds between cursor persistence rounds (1 /
            ``managedLedgerDefaultMarkDeleteRateLimit``).
        delayed_delivery_enabled: ``delayedDeliveryEnabled``.
        key_shared_hash_points: ``subscriptionKeySharedConsistentHashingReplicaPoints``: ring
            points per consumer for Key_Shared AUTO_SPLIT.
        stats_update_frequency: ``statsUpdateFrequencyInSecs``: how often topic publish rates
            are refreshed for relative-to-publish-rate dispatch limits.
        max_producers_per_topic: ``maxProducersPerTopic`` (0: no limit; ``limits``).
        max_consumers_per_topic: ``maxConsumersPerTopic`` (0: no limit).
        max_consumers_per_subscription: ``maxConsumersPerSubscription`` (0: no limit).
        max_subscriptions_per_topic: ``maxSubscriptionsPerTopic`` (0: no limit).
        max_topics_per_namespace: ``maxTopicsPerNamespace`` (0: no limit; ``namespace_limits``).
        ttl_duration_default_in_seconds: ``ttlDurationDefaultInSeconds``: the message TTL of
            namespaces whose policies set none (0: no TTL; ``expiry``).
        message_expiry_check_interval_in_minutes: ``messageExpiryCheckIntervalInMinutes``: the
            period of the TTL check.
    """

    cluster_name: str = "standalone"
    broker_id: int = 0
    allow_auto_topic_creation: bool = True
    allow_auto_topic_creation_type: str = "non-partitioned"
    default_num_partitions: int = 1
    dispatcher_max_read_batch_size: int = 100
    max_unacked_messages_per_consumer: int = 50_000
    managed_ledger_max_entries_per_ledger: int = 50_000
    managed_ledger_max_size_per_ledger_mbytes: int = 2048
    managed_ledger_min_ledger_rollover_time_minutes: float = 0.0
    managed_ledger_max_ledger_rollover_time_minutes: float = 240.0
    managed_ledger_cache_size_mb: int = 256
    cursor_flush_interval: float = 1.0
    delayed_delivery_enabled: bool = True
    key_shared_hash_points: int = 100
    stats_update_frequency: float = 60.0
    max_producers_per_topic: int = 0
    max_consumers_per_topic: int = 0
    max_consumers_per_subscription: int = 0
    max_subscriptions_per_topic: int = 0
    max_topics_per_namespace: int = 0
    ttl_duration_default_in_seconds: int = 0
    message_expiry_check_interval_in_minutes: int = 5
