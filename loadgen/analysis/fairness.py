"""Fairness of shared subscriptions: how evenly their consumers share the deliveries.

Per Shared and Key_Shared subscription (and any subscription of a run whose scenario does not
say), each consumer's share of the deliveries, Jain's index `(Σx)² / (n·Σx²)` (1 = perfectly
even, 1/n = one consumer took all) and the max/min ratio; for Key_Shared also the keys that
reached more than one consumer.
"""

from __future__ import annotations

from typing import Final

from loadgen.analysis.common import Context, Table, base_topic, collect
from loadgen.analysis.shared import consumed, subscription_frame

__all__ = ["SHARED", "fairness"]

SHARED: Final = ("Shared", "Key_Shared", "unknown")
"""The subscription types whose consumers share a topic's messages."""


def fairness(ctx: Context) -> dict[str, Table]:
    """Tables `fairness_consumers`, `fairness` (per subscription) and `fairness_over_time`."""
    from pyspark.sql import functions as F

    subs = F.broadcast(subscription_frame(ctx, SHARED))
    # Deliveries per consumer and key: one pass over `receives`, a small table after it.
    per_key = (
        ctx.table("receives")
        .groupBy("topic", "subscription", "consumer", "key")
        .agg(F.count("*").alias("deliveries"))
        .withColumn("base", base_topic(F.col("topic")))
        .join(subs, ["base", "subscription"])
        .persist()
    )
    try:
        per_consumer = per_key.groupBy("base", "subscription", "type", "consumer").agg(
            F.sum("deliveries").alias("deliveries"),
            F.countDistinct("key").alias("keys"),
        )
        consumers = collect(
            per_consumer.withColumnRenamed("base", "topic"),
            "fairness_consumers",
            ["topic", "subscription", "consumer"],
        )
        shared_keys = (
            per_key.where(F.col("type") == "Key_Shared")
            .where(F.col("key").isNotNull())
            .groupBy("base", "subscription", "key")
            .agg(F.countDistinct("consumer").alias("consumers"))
            .where(F.col("consumers") > 1)
            .groupBy("base", "subscription")
            .count()
        )
        keys_split = {(r[0], r[1]): int(r[2]) for r in shared_keys.collect()}
    finally:
        per_key.unpersist()
    over_time = (
        consumed(ctx)
        .withColumn("base", base_topic(F.col("topic")))
        .join(subs, ["base", "subscription"])
        .groupBy("second", F.col("base").alias("topic"), "subscription", "consumer")
        .agg(F.sum("messages").alias("deliveries"))
    )
    return {
        "fairness": _fairness_summary(consumers, keys_split),
        "fairness_consumers": consumers,
        "fairness_over_time": collect(
            over_time, "fairness_over_time", ["second", "consumer", "topic", "subscription"]
        ),
    }


def _fairness_summary(consumers: Table, keys_split: dict[tuple[str, str], int]) -> Table:
    groups: dict[tuple[str, str, str], list[int]] = {}
    for row in consumers.dicts():
        groups.setdefault((row["topic"], row["subscription"], row["type"]), []).append(
            int(row["deliveries"])
        )
    rows = []
    for (topic, subscription, kind), counts in groups.items():
        total = sum(counts)
        jain = total * total / (len(counts) * sum(c * c for c in counts)) if total else 1.0
        rows.append(
            (
                topic,
                subscription,
                kind,
                len(counts),
                total,
                min(counts),
                max(counts),
                round(jain, 6),
                max(counts) / min(counts) if min(counts) else float("inf"),
                keys_split.get((topic, subscription), 0) if kind == "Key_Shared" else None,
            )
        )
    columns = (
        "topic",
        "subscription",
        "type",
        "consumers",
        "deliveries",
        "min_deliveries",
        "max_deliveries",
        "jain_index",
        "max_min_ratio",
        "keys_on_several_consumers",
    )
    return Table("fairness", columns, sorted(rows))
