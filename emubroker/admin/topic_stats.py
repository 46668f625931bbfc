"""Topic statistics in Pulsar's JSON shapes: ``stats``, ``partitioned-stats``, ``internalStats``.

Field names are those of Pulsar's ``TopicStatsImpl``, ``SubscriptionStatsImpl``,
``PublisherStatsImpl``, ``ConsumerStatsImpl``, ``PartitionedTopicStatsImpl`` and
``PersistentTopicInternalStats`` (``pulsar-common``), so tools written against a real broker read
them unchanged. Rates come from the :class:`~emubroker.admin.metrics.RateTracker` that ``/metrics``
uses, for topics, subscriptions, producers and consumers alike. Counters and timestamps (epoch ms
of the injected clock) come from the topic's snapshot; a subscription's redelivery and ack rates
and its last consumed/acked times are its consumers' summed or latest, as in Pulsar's
``PersistentSubscription.getStats``. What the emulator does not track is reported as Pulsar
reports an idle feature (0, false, empty). Positions are ``"ledger:entry"`` strings as in Pulsar.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from emubroker.admin.stats_fields import (
    NO_COMPACTION,
    compaction_block,
    draining_counts,
    format_time,
    iso_time,
)
from emubroker.admin.stats_merge import merge_partitions
from emubroker.naming import InvalidNameError, TopicName
from emubroker.ratelimit.readsize import ThrottleStats
from protocol.commands import AccessMode
from storage_stub.client import StorageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from emubroker.admin.metrics import Rates, RateTracker
    from emubroker.topics import Topic, TopicHandle, TopicService
    from emubroker.topics.compaction import CompactionRecord
    from emubroker.topics.producer import ProducerHandle
    from emubroker.topics.requests import ClientInfo
    from emubroker.topics.stats import ConsumerStats, SubscriptionStats, TopicStats
    from storage_stub.ledger import LedgerStore

__all__ = ["TopicStatsView"]

_NO_THROTTLE: Final = ThrottleStats(0, 0, 0, 0, 0, 0)

_ACCESS_MODES: Final = {
    AccessMode.SHARED: "Shared",
    AccessMode.EXCLUSIVE: "Exclusive",
    AccessMode.WAIT_FOR_EXCLUSIVE: "WaitForExclusive",
    AccessMode.EXCLUSIVE_WITH_FENCING: "ExclusiveWithFencing",
}


def _client(client: ClientInfo) -> dict[str, Any]:
    # Pulsar's address is the remote InetSocketAddress's toString ("/host:port"), its
    # connectedSince when the producer or consumer was created; nulls (unknown) are left out.
    doc: dict[str, Any] = {}
    if client.address:
        doc["address"] = f"/{client.address}"
    if client.since_ms:
        doc["connectedSince"] = format_time(client.since_ms)
    if client.client_version:
        doc["clientVersion"] = client.client_version
    return doc


def _pos(position: tuple[int, int]) -> str:
    return f"{position[0]}:{position[1]}"


class TopicStatsView:
    """Builds the JSON documents of the topic stats endpoints.

    Args:
        topics: The topic service.
        rates: Shared with ``/metrics``.
        ledgers: For ledger sizes in ``internalStats``.
        broker_id: ``ownerBroker``.
        dedup_enabled: Whether deduplication applies to a topic (``deduplicationStatus``).
        compaction_record: A topic's last compactions (``CompactionService.record``), for the
            ``compaction`` block; None: no compaction service (zeros).
    """

    def __init__(
        self,
        topics: TopicService,
        rates: RateTracker,
        ledgers: LedgerStore,
        *,
        broker_id: str,
        dedup_enabled: Callable[[TopicHandle], bool],
        compaction_record: Callable[[TopicName], CompactionRecord | None] | None = None,
    ) -> None:
        self._topics = topics
        self._compaction_record = compaction_record
        self._rates = rates
        self._ledgers = ledgers
        self._broker_id = broker_id
        self._dedup_enabled = dedup_enabled

    def refresh(self) -> None:
        """Sample the counters so rates are current (cheap within the sampling window)."""
        self._rates.sample(self._topics.statistics())

    def rates(self, name: str) -> Rates | None:
        """A loaded topic's rates over the last sampling window (None: not loaded here)."""
        try:
            topic = self._topics.loaded_topic(TopicName.parse(name))
        except InvalidNameError:
            return None
        return None if topic is None else self._rates.topic(name)

    def subscription_rates(self, topic: str, subscription: str) -> Rates:
        """A subscription's rates over the last sampling window (zeros when unknown)."""
        return self._rates.subscription(topic, subscription)

    # ---- stats ----------------------------------------------------------------------------------

    def stats(self, topic: TopicHandle) -> dict[str, Any]:
        """``GET .../stats`` of one loaded topic or partition."""
        snapshot = topic.stats()
        rates = self._rates.topic(snapshot.name)
        persistent = topic.as_persistent() is not None
        doc: dict[str, Any] = {
            "msgRateIn": rates.msg_in,
            "msgThroughputIn": rates.bytes_in,
            "msgRateOut": rates.msg_out,
            "msgThroughputOut": rates.bytes_out,
            "bytesInCounter": snapshot.bytes_in,
            "msgInCounter": snapshot.msg_in,
            "bytesOutCounter": snapshot.bytes_out,
            "msgOutCounter": snapshot.msg_out,
            "averageMsgSize": rates.bytes_in / rates.msg_in if rates.msg_in else 0.0,
            "msgChunkPublished": False,
            # Entries are never trimmed while the topic exists: everything published is stored.
            "storageSize": snapshot.bytes_in if persistent else 0,
            "backlogSize": 0,
            "earliestMsgPublishTimeInBacklogs": 0,
            "offloadedStorageSize": 0,
            "publishers": [self._publisher(snapshot.name, p) for p in topic.producers()],
            "waitingPublishers": 0,
            "subscriptions": {
                sub.name: self._subscription(topic, snapshot, sub) for sub in snapshot.subscriptions
            },
            "replication": {},
            "deduplicationStatus": "Enabled" if self._dedup_enabled(topic) else "Disabled",
            "nonContiguousDeletedMessagesRanges": 0,
            "nonContiguousDeletedMessagesRangesSerializedSize": 0,
            "delayedMessageIndexSizeInBytes": 0,
            "ownerBroker": self._broker_id,
            **self._topics.quotas.stats(topic.as_persistent()),
            "compaction": self._compaction(topic.name),
            "topicCreationTimeStamp": snapshot.created_ms,
            "lastPublishTimeStamp": snapshot.last_publish_ms,
        }
        if not persistent:
            # NonPersistentTopicStats: Pulsar never fills in the topic's own msgDropRate (only
            # the partitioned-stats sum of its partitions' zeros); drops show per subscription.
            # Nor has it a deduplication status.
            doc["msgDropRate"] = 0.0
            del doc["deduplicationStatus"]
        return doc

    def _compaction(self, name: TopicName) -> dict[str, int]:
        """Pulsar's ``CompactionStats`` of topic stats (zeros until a compaction ran here)."""
        found = None if self._compaction_record is None else self._compaction_record(name)
        return compaction_block(found or NO_COMPACTION)

    def partitioned_stats(
        self, docs: dict[str, dict[str, Any]], *, partitions: int, per_partition: bool
    ) -> dict[str, Any]:
        """``GET .../partitioned-stats``: the partitions' stats summed, with ``metadata``.

        Args:
            docs: Partition name -> its ``TopicStats`` (read here or at its owner).
            partitions: The topic's partition count (``metadata``), even if some are missing.
            per_partition: Keep each partition's stats under ``partitions``.
        """
        merged = merge_partitions(list(docs.values()))
        merged["metadata"] = {"partitions": partitions, "deleted": False}
        merged["partitions"] = docs if per_partition else {}
        return merged

    def _publisher(self, topic: str, producer: ProducerHandle) -> dict[str, Any]:
        rates = self._rates.publisher(topic, producer.stats_key)
        return {
            "accessMode": _ACCESS_MODES.get(producer.access_mode, "Shared"),
            "msgRateIn": rates.msg_in,
            "msgThroughputIn": rates.bytes_in,
            "averageMsgSize": rates.bytes_in / rates.msg_in if rates.msg_in else 0.0,
            "chunkedMessageRate": 0.0,
            "producerId": producer.producer_id,
            "supportsPartialProducer": False,
            "producerName": producer.producer_name,
            **_client(producer.client),
            "metadata": dict(producer.metadata),
        }

    def _subscription(
        self, topic: TopicHandle, snapshot: TopicStats, sub: SubscriptionStats
    ) -> dict[str, Any]:
        rates = self._rates.subscription(snapshot.name, sub.name)
        live = topic.subscription(sub.name)
        # Pulsar names only a single-active-consumer dispatcher's active consumer.
        active = None if live is None else live.active_consumer
        docs = [self._consumer(snapshot.name, sub.name, c) for c in sub.consumer_stats]
        doc = {
            "msgRateOut": rates.msg_out,
            "msgThroughputOut": rates.bytes_out,
            "bytesOutCounter": sub.bytes_out,
            "msgOutCounter": sub.msg_out,
            "msgRateRedeliver": sum(d["msgRateRedeliver"] for d in docs),
            "messageAckRate": sum(d["messageAckRate"] for d in docs),
            "chunkedMessageRate": 0.0,
            "msgBacklog": sub.backlog,
            "backlogSize": 0,
            "earliestMsgPublishTimeInBacklog": 0,
            "msgBacklogNoDelayed": max(sub.backlog - sub.delayed, 0),
            "blockedSubscriptionOnUnackedMsgs": False,
            "msgDelayed": sub.delayed,
            "msgInReplay": sub.in_replay,
            **draining_counts(sub.draining),
            "unackedMessages": sub.unacked,
            "type": sub.type,
            "activeConsumerName": None if active is None else active.name,
            "msgRateExpired": rates.msg_expired,
            "totalMsgExpired": sub.msg_expired,
            "lastExpireTimestamp": sub.last_expire,
            "lastConsumedFlowTimestamp": sub.last_flow,
            "lastConsumedTimestamp": max((c.last_consumed for c in sub.consumer_stats), default=0),
            "lastAckedTimestamp": max((c.last_acked for c in sub.consumer_stats), default=0),
            "lastMarkDeleteAdvancedTimestamp": sub.last_mark_delete_advanced,
            "consumers": docs,
            "isDurable": sub.durable,
            "isReplicated": False,
            "allowOutOfOrderDelivery": False,
            "consumersAfterMarkDeletePosition": {},
            "nonContiguousDeletedMessagesRanges": 0,
            "nonContiguousDeletedMessagesRangesSerializedSize": 0,
            "subscriptionProperties": {},
            "durable": sub.durable,
            "replicated": False,
            # Pulsar's SubscriptionStats throttle-event counters (0 when never throttled).
            **msgspec.structs.asdict(sub.throttle or _NO_THROTTLE),
        }
        if not snapshot.persistent:
            # NonPersistentSubscriptionStats: messages dropped per second because no consumer
            # could take them (no permits, or a connection that is not writable). Pulsar's
            # NonPersistentSubscription.getStats names no active consumer.
            doc["msgDropRate"] = rates.msg_dropped
            del doc["activeConsumerName"]
        return doc

    def _consumer(self, topic: str, subscription: str, consumer: ConsumerStats) -> dict[str, Any]:
        rates = self._rates.consumer(topic, subscription, consumer.key)
        return {
            "msgRateOut": rates.msg_out,
            "msgThroughputOut": rates.bytes_out,
            "bytesOutCounter": consumer.bytes_out,
            "msgOutCounter": consumer.msg_out,
            "msgRateRedeliver": rates.msg_redeliver,
            # Pulsar's messageAckRate is the acknowledged messages' rate (Rate.getValueRate).
            "messageAckRate": rates.msg_ack,
            "chunkedMessageRate": 0.0,
            "consumerName": consumer.name,
            "availablePermits": consumer.permits,
            "unackedMessages": consumer.unacked,
            "avgMessagesPerEntry": 0,
            "blockedConsumerOnUnackedMsgs": consumer.blocked_on_unacked,
            "lastAckedTimestamp": consumer.last_acked,
            "lastConsumedTimestamp": consumer.last_consumed,
            "lastAckedTime": iso_time(consumer.last_acked),
            "lastConsumedTime": iso_time(consumer.last_consumed),
            "lastConsumedFlowTimestamp": consumer.last_flow,
            "firstConsumedFlowTimestamp": consumer.first_flow,
            **draining_counts(consumer.draining),
            **_client(consumer.client),
            "metadata": dict(consumer.metadata),
        }

    # ---- internal stats -------------------------------------------------------------------------

    def internal_stats(self, topic: TopicHandle) -> dict[str, Any]:
        """``GET .../internalStats``: the managed ledger and its cursors."""
        stored = topic.as_persistent()
        if stored is None:
            # Nothing is stored: Pulsar answers the same empty shape for non-persistent topics.
            return {"entriesAddedCounter": 0, "numberOfEntries": 0, "totalSize": 0, "ledgers": []}
        ledger = stored.ledger
        ids = ledger.ledger_ids
        starts = [ledger.index_at_or_after(lid, 0) for lid in ids] + [ledger.count]
        ledgers = [
            {
                "ledgerId": lid,
                "entries": starts[k + 1] - starts[k],
                "size": self._ledger_size(lid),
                "offloaded": False,
                "underReplicated": False,
            }
            for k, lid in enumerate(ids)
        ]
        return {
            "entriesAddedCounter": ledger.count,
            "numberOfEntries": ledger.count - ledger.first_index,  # trimmed ledgers are gone
            "totalSize": sum(item["size"] for item in ledgers),
            "currentLedgerEntries": ledgers[-1]["entries"],
            "currentLedgerSize": ledgers[-1]["size"],
            "lastLedgerCreatedTimestamp": "",
            "waitingCursorsCount": 0,
            "pendingAddEntriesCount": 0,
            "lastConfirmedEntry": _pos(ledger.last_position()),
            "state": "Terminated" if ledger.terminated else "LedgerOpened",
            "ledgers": ledgers,
            "cursors": {name: _cursor(stored, name) for name in stored.subscriptions()},
            "schemaLedgers": [],
            "compactedLedger": {
                "ledgerId": -1,
                "entries": -1,
                "size": -1,
                "offloaded": False,
                "underReplicated": False,
            },
        }

    def _ledger_size(self, ledger_id: int) -> int:
        try:
            return self._ledgers.info(ledger_id).size_bytes
        except StorageError:
            return 0  # deleted under us (topic deletion racing this call)


def _acked_ranges(topic: Topic, runs: list[tuple[int, int]]) -> list[str]:
    # Pulsar prints individually deleted entries as open-closed ranges: (L:before..L:last].
    position = topic.ledger.position
    return [f"({_pos(position(a - 1))}..{_pos(position(b))}]" for a, b in runs]


def _cursor(topic: Topic, name: str) -> dict[str, Any]:
    sub = topic.subscription(name)
    assert sub is not None  # listed by the topic a moment ago, with no await in between
    ledger, cursor = topic.ledger, sub.cursor
    runs = cursor.ranges()
    ranges = _acked_ranges(topic, runs)
    read = sub.dispatcher.read_position
    caught_up = read >= ledger.count
    return {
        "markDeletePosition": _pos(ledger.position(cursor.mark_delete)),
        "readPosition": _pos(_next(topic) if caught_up else ledger.position(read)),
        "waitingReadOp": caught_up and bool(sub.consumers),
        "pendingReadOps": 0,
        "messagesConsumedCounter": cursor.mark_delete + 1 + sum(b - a + 1 for a, b in runs),
        "cursorLedger": -1,
        "cursorLedgerLastEntry": -1,
        "individuallyDeletedMessages": "[" + ", ".join(ranges) + "]",
        "lastLedgerSwitchTimestamp": "",
        "state": "Open",
        "active": bool(sub.consumers),
        "numberOfEntriesSinceFirstNotAckedMessage": max(read - cursor.mark_delete - 1, 0) + 1,
        "totalNonContiguousDeletedMessagesRange": len(ranges),
        "subscriptionHavePendingRead": False,
        "subscriptionHavePendingReplayRead": False,
        "properties": {},
    }


def _next(topic: Topic) -> tuple[int, int]:
    # Where the next entry will be written: after the last one in the current ledger.
    ledger_id, entry_id = topic.ledger.last_position()
    return ledger_id, entry_id + 1
