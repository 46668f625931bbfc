"""Topic stats documents as a whole: summing partitions, leaving parts out.

Both work on the JSON documents of ``TopicStatsView.stats`` (built here, or read from a
partition's owner), so ``partitioned-stats`` treats local and remote partitions alike.
"""

from __future__ import annotations

from typing import Any, Final

from emubroker.admin.stats_fields import NO_COMPACTION, compaction_block
from emubroker.ratelimit.readsize import ThrottleStats

__all__ = ["leave_out", "merge_partitions"]

_SUMMED: Final = (
    "msgRateIn",
    "msgThroughputIn",
    "msgRateOut",
    "msgThroughputOut",
    "bytesInCounter",
    "msgInCounter",
    "bytesOutCounter",
    "msgOutCounter",
    "storageSize",
    "backlogSize",
    "waitingPublishers",
)
_SUB_SUMMED: Final = (
    "msgRateOut",
    "msgThroughputOut",
    "bytesOutCounter",
    "msgOutCounter",
    "msgRateRedeliver",
    "messageAckRate",
    "msgBacklog",
    "msgBacklogNoDelayed",
    "msgDelayed",
    "msgInReplay",
    "drainingHashesCount",
    "drainingHashesUnackedMessages",
    "drainingHashesClearedTotal",
    "unackedMessages",
    "msgRateExpired",
    "totalMsgExpired",
    *ThrottleStats.__struct_fields__,
)


def leave_out(doc: dict[str, Any], *, publishers: bool, consumers: bool) -> dict[str, Any]:
    """A topic's stats without its publishers and/or its subscriptions' consumers.

    Pulsar's ``excludePublishers`` / ``excludeConsumers`` stats options (``GetStatsOptions``):
    the lists are empty, everything else (the counts and rates included) stays.
    """
    if publishers:
        doc = {**doc, "publishers": []}
    if consumers:
        subs = doc["subscriptions"]
        doc = {**doc, "subscriptions": {k: {**s, "consumers": []} for k, s in subs.items()}}
    return doc


def merge_partitions(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum the stats of partitions as Pulsar's ``PartitionedTopicStatsImpl.add`` does.

    Counters and rates add up; publishers are concatenated; subscriptions of the same name are
    merged (their counters summed, consumers concatenated).
    """
    merged: dict[str, Any] = dict.fromkeys(_SUMMED, 0)
    merged.update(
        {
            "averageMsgSize": 0.0,
            "msgChunkPublished": False,
            "earliestMsgPublishTimeInBacklogs": 0,
            "offloadedStorageSize": 0,
            "publishers": [],
            "subscriptions": {},
            "replication": {},
            "nonContiguousDeletedMessagesRanges": 0,
            "nonContiguousDeletedMessagesRangesSerializedSize": 0,
            "delayedMessageIndexSizeInBytes": 0,
            # TopicStatsImpl.add leaves the compaction block as reset: zeros.
            "compaction": compaction_block(NO_COMPACTION),
        }
    )
    for doc in docs:
        for key in _SUMMED:
            merged[key] += doc[key]
        merged["publishers"].extend(doc["publishers"])
        for name, sub in doc["subscriptions"].items():
            into = merged["subscriptions"].get(name)
            if into is None:
                merged["subscriptions"][name] = {**sub, "consumers": list(sub["consumers"])}
                continue
            for key in _SUB_SUMMED:
                into[key] = into.get(key, 0) + sub.get(key, 0)
            if "msgDropRate" in sub:  # non-persistent subscriptions only
                into["msgDropRate"] = into.get("msgDropRate", 0.0) + sub["msgDropRate"]
            into["consumers"].extend(sub["consumers"])
    # PartitionedTopicStatsImpl.add: the last limits, the oldest backlog. Its age starts at the
    # Java default 0, so partitions without a backlog (-1 each) sum up to 0, as Pulsar shows.
    merged["oldestBacklogMessageAgeSeconds"] = 0
    for doc in docs:
        for key in ("backlogQuotaLimitSize", "backlogQuotaLimitTime"):
            if key in doc:
                merged[key] = doc[key]
        age = doc.get("oldestBacklogMessageAgeSeconds")
        if age is not None and age > merged["oldestBacklogMessageAgeSeconds"]:
            merged["oldestBacklogMessageAgeSeconds"] = age
            if "oldestBacklogMessageSubscriptionName" in doc:
                merged["oldestBacklogMessageSubscriptionName"] = doc[
                    "oldestBacklogMessageSubscriptionName"
                ]
    # TopicStatsImpl.add: the earliest creation (0: unknown), the latest publish.
    created = [doc.get("topicCreationTimeStamp", 0) for doc in docs]
    merged["topicCreationTimeStamp"] = min((t for t in created if t), default=0)
    merged["lastPublishTimeStamp"] = max(
        (doc.get("lastPublishTimeStamp", 0) for doc in docs), default=0
    )
    if merged["msgRateIn"]:
        merged["averageMsgSize"] = merged["msgThroughputIn"] / merged["msgRateIn"]
    return merged
