"""Summing partition stats the way Pulsar's ``PartitionedTopicStatsImpl`` does."""

from __future__ import annotations

from typing import Any

from emubroker.admin.stats_merge import merge_partitions


def partition(msg_in: int, backlog: int, consumers: list[str], rate: float) -> dict[str, Any]:
    return {
        "msgRateIn": rate,
        "msgThroughputIn": rate * 100,
        "msgRateOut": 0.0,
        "msgThroughputOut": 0.0,
        "bytesInCounter": msg_in * 100,
        "msgInCounter": msg_in,
        "bytesOutCounter": 0,
        "msgOutCounter": 0,
        "storageSize": msg_in * 100,
        "backlogSize": 0,
        "waitingPublishers": 0,
        "publishers": [{"producerName": f"p{msg_in}"}],
        "deduplicationStatus": "Disabled",
        "subscriptions": {
            "s": {
                "msgRateOut": 1.0,
                "msgThroughputOut": 10.0,
                "bytesOutCounter": 5,
                "msgOutCounter": 1,
                "msgBacklog": backlog,
                "msgBacklogNoDelayed": backlog - 1,
                "msgDelayed": 1,
                "messageAckRate": rate,
                "unackedMessages": 0,
                "type": "Shared",
                "consumers": [{"consumerName": name} for name in consumers],
            }
        },
    }


def test_counters_add_up_and_subscriptions_merge_by_name() -> None:
    first = partition(3, 2, ["a"], 1.0)
    second = partition(5, 4, ["b", "c"], 3.0)
    merged = merge_partitions([first, second])
    assert merged["msgInCounter"] == 8
    assert merged["msgRateIn"] == 4.0
    assert merged["averageMsgSize"] == 100.0
    assert merged["storageSize"] == 800
    assert [p["producerName"] for p in merged["publishers"]] == ["p3", "p5"]
    sub = merged["subscriptions"]["s"]
    assert sub["msgBacklog"] == 6
    assert sub["msgRateOut"] == 2.0
    assert (sub["msgDelayed"], sub["msgBacklogNoDelayed"], sub["messageAckRate"]) == (2, 4, 4.0)
    assert [c["consumerName"] for c in sub["consumers"]] == ["a", "b", "c"]
    # The inputs are left alone (the per-partition documents are served too).
    assert [c["consumerName"] for c in first["subscriptions"]["s"]["consumers"]] == ["a"]
    # Pulsar's PartitionedTopicStatsImpl.add does not carry the partitions' status over, nor
    # their compaction blocks (it stays reset: zeros).
    assert "deduplicationStatus" not in merged
    assert set(merged["compaction"].values()) == {0}
    assert sorted(merged["compaction"]) == [
        "lastCompactionDurationTimeInMills",
        "lastCompactionFailedTimestamp",
        "lastCompactionRemovedEventCount",
        "lastCompactionSucceedTimestamp",
    ]


def test_no_partitions_give_zeros() -> None:
    merged = merge_partitions([])
    assert merged["msgInCounter"] == 0
    assert merged["subscriptions"] == {}
    assert merged["averageMsgSize"] == 0.0


def test_partitions_give_the_earliest_creation_and_the_latest_publish() -> None:
    docs = [partition(1, 0, [], 0.0) for _ in range(3)]
    for doc, created, published in zip(docs, (0, 200, 100), (5, 0, 9), strict=True):
        doc.update(topicCreationTimeStamp=created, lastPublishTimeStamp=published)
    merged = merge_partitions(docs)
    assert (merged["topicCreationTimeStamp"], merged["lastPublishTimeStamp"]) == (100, 9)


def test_the_oldest_backlog_age_starts_at_zero_as_pulsars_partitioned_stats_do() -> None:
    # PartitionedTopicStatsImpl starts from Java's 0 and keeps the largest age: partitions
    # without a backlog (-1 each) show 0, a backlog's age and subscription win over it.
    idle = {**partition(1, 0, [], 1.0), "oldestBacklogMessageAgeSeconds": -1}
    assert merge_partitions([idle, idle])["oldestBacklogMessageAgeSeconds"] == 0
    late = {
        **partition(2, 1, [], 1.0),
        "oldestBacklogMessageAgeSeconds": 7,
        "oldestBacklogMessageSubscriptionName": "s",
    }
    merged = merge_partitions([idle, late])
    assert (
        merged["oldestBacklogMessageAgeSeconds"],
        merged["oldestBacklogMessageSubscriptionName"],
    ) == (
        7,
        "s",
    )
