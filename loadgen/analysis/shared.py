"""What several analyses read of the big tables: each pass made once per run, kept in memory.

`sends` and `receives` have a row per message and per delivery, tens of millions in a long
run, and the analyses need little of them. Each aggregate here is computed once, the first time
an analysis asks (`Context.shared`), and is small:

- `produced`: receipted sends per second, topic and broker (throughput, backlog, correctness);
- `consumed`: deliveries per second, topic, subscription, broker and consumer (throughput,
  fairness, and the subscriptions seen when the scenario lists none);
- `messages`: the one shuffle of every message. Sends and deliveries are grouped by
  subscription and message (`producer_index`, `sequence_id`: docs/loadgen-trace.md), and
  reduced at once to counts per subscription, topic and second of first delivery, plus one row
  per anomalous message (lost, delivered more than once, out of order) with its details
  (backlog, correctness).

Rows are counted as they are, not scaled by the trace sample: the analyses scale.
"""

from __future__ import annotations

from typing import Any, Final

from loadgen.analysis.common import Context, base_topic, local_frame, seconds_since

__all__ = [
    "ORDERED",
    "SUBSCRIPTION_SCHEMA",
    "consumed",
    "messages",
    "produced",
    "subscription_frame",
    "subscriptions",
]

ORDERED: Final = ("Exclusive", "Failover", "Key_Shared")
"""Subscription types whose deliveries keep each producer's order (per key for Key_Shared)."""

SUBSCRIPTION_SCHEMA: Final = (("base", "string"), ("subscription", "string"), ("type", "string"))


def produced(ctx: Context) -> Any:  # a DataFrame
    """Receipted sends per `second` (since the start), `topic`, `broker`.

    Columns `messages`, `bytes`, and the second's first and last receipt (`first_ns`,
    `last_ns`: the mean rates' span).
    """
    return ctx.shared("produced", _produced)


def _produced(ctx: Context) -> Any:
    from pyspark.sql import functions as F

    return (
        ctx.table("sends")
        .where(F.col("receipt_ns").isNotNull())
        .groupBy(
            F.floor(seconds_since(F.col("receipt_ns"), ctx.start_ns)).alias("second"),
            "topic",
            "broker",
        )
        .agg(
            F.count("*").alias("messages"),
            F.sum("size").alias("bytes"),
            F.min("receipt_ns").alias("first_ns"),
            F.max("receipt_ns").alias("last_ns"),
        )
    )


def consumed(ctx: Context) -> Any:  # a DataFrame
    """Deliveries per `second`, `topic`, `subscription`, `broker`, `consumer`.

    Columns `messages`, `bytes`, and the second's first and last delivery (`first_ns`,
    `last_ns`).
    """
    return ctx.shared("consumed", _consumed)


def _consumed(ctx: Context) -> Any:
    from pyspark.sql import functions as F

    return (
        ctx.table("receives")
        .groupBy(
            F.floor(seconds_since(F.col("receive_ns"), ctx.start_ns)).alias("second"),
            "topic",
            "subscription",
            "broker",
            "consumer",
        )
        .agg(
            F.count("*").alias("messages"),
            F.sum("size").alias("bytes"),
            F.min("receive_ns").alias("first_ns"),
            F.max("receive_ns").alias("last_ns"),
        )
    )


def subscriptions(ctx: Context) -> list[tuple[str, str, str]]:
    """(base topic, subscription, type): the scenario's, else those `receives` saw (`unknown`)."""
    listed = ctx.run.subscriptions()
    if listed or not ctx.run.has("receives"):
        return listed
    from pyspark.sql import functions as F

    seen = (
        consumed(ctx)
        .select(base_topic(F.col("topic")).alias("base"), "subscription")
        .distinct()
        .collect()
    )
    return [(row["base"], row["subscription"], "unknown") for row in seen]


def subscription_frame(ctx: Context, types: tuple[str, ...] = ()) -> Any:
    """`subscriptions` (of `types` only, if given) as a DataFrame: base, subscription, type."""
    rows = [row for row in subscriptions(ctx) if not types or row[2] in types]
    return local_frame(ctx.spark, rows, SUBSCRIPTION_SCHEMA)


def messages(ctx: Context) -> Any:  # a DataFrame
    """Every message of every subscription, reduced (see the module's doc).

    Columns: `subscription`, `topic` (the partition), `second` of the first delivery (null:
    never delivered), then, for anomalous messages only (null otherwise), `producer_index`,
    `sequence_id`, `receipt_ns`, `first_ns`, `last_ns` and the flags `lost`, `duplicate`,
    `out_of_order`; and the counts `received` (messages delivered at least once),
    `deliveries`, `received_not_acked` (delivered, with no receipted send).

    A receipted send is expected on every subscription of its topic (`subscriptions`); it is
    lost there if never delivered. Out of order: a first delivery after a later message of the
    same producer partition (per key for Key_Shared), on subscriptions whose type keeps order.
    """
    return ctx.shared("messages", _messages)


MESSAGES_PER_TASK: Final = 1_000_000
"""Messages one task groups in memory: a few hundred bytes each stay well inside a task's share
of a 2 GB driver, where four partitions of 10 million messages spilled gigabytes to disk."""


def _messages(ctx: Context) -> Any:
    from pyspark.sql import functions as F

    subs = subscriptions(ctx)
    ordered = [row for row in subs if row[2] in ORDERED]
    keyed = any(row[2] == "Key_Shared" for row in ordered)
    none = F.lit(None)
    # Rows of one message agree on topic and key: they are grouping keys, and the aggregates
    # are numbers only (a string aggregate, such as `first`, would make Spark sort every row).
    key = (F.col("key") if keyed else none.cast("string")).alias("key")
    receives = ctx.table("receives").select(
        "subscription",
        "topic",
        "producer_index",
        "sequence_id",
        key,
        F.col("receive_ns").alias("delivered_ns"),
        none.cast("long").alias("receipt_ns"),
    )
    rows, count = receives, _total(consumed(ctx))
    if ctx.run.has("sends"):
        # Each receipted send once per subscription of its topic: topics come from `produced`
        # (a few rows), so no per-row work but a lookup in a broadcast table.
        expected = (
            produced(ctx)
            .groupBy("topic")
            .agg(F.sum("messages").alias("messages"))
            .withColumn("base", base_topic(F.col("topic")))
            .join(F.broadcast(subscription_frame(ctx)), "base")
        )
        count += _total(expected)
        sends = (
            ctx.table("sends")
            .where(F.col("receipt_ns").isNotNull())
            .join(F.broadcast(expected.select("topic", "subscription")), "topic")
            .select(
                "subscription",
                "topic",
                "producer_index",
                "sequence_id",
                key,
                none.cast("long").alias("delivered_ns"),
                "receipt_ns",
            )
        )
        rows = rows.unionByName(sends)
    # Grouped right after the shuffle (a map-side partial aggregation would not shrink rows
    # that are mostly one per message), in partitions sized to stay in memory.
    default = int(ctx.spark.conf.get("spark.sql.shuffle.partitions"))
    partitions = max(default, -(-count // MESSAGES_PER_TASK))
    per_message = (
        rows.repartition(partitions, "subscription", "producer_index", "sequence_id")
        .groupBy("subscription", "topic", "producer_index", "sequence_id", "key")
        .agg(
            F.count("delivered_ns").alias("deliveries"),
            F.min("delivered_ns").alias("first_ns"),
            F.max("delivered_ns").alias("last_ns"),
            F.max("receipt_ns").alias("receipt_ns"),
        )
    )
    if ordered:
        per_message = _with_order(ctx, per_message, ordered)
    else:
        per_message = per_message.withColumn("out_of_order", F.lit(False))
    return _reduce(ctx, per_message)


def _total(frame: Any) -> int:
    from pyspark.sql import functions as F

    return int(frame.agg(F.sum("messages")).first()[0] or 0)


def _with_order(ctx: Context, per_message: Any, ordered: list[tuple[str, str, str]]) -> Any:
    """`per_message` with an `out_of_order` flag, computed on the ordered subscriptions only.

    The messages of other subscriptions skip the window's shuffle and sort: both halves read
    the same grouped messages, a shuffle Spark makes once for the two (a reused exchange).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    kinds = (
        consumed(ctx)
        .select("topic", "subscription")
        .distinct()
        .withColumn("base", base_topic(F.col("topic")))
        .join(
            F.broadcast(local_frame(ctx.spark, ordered, SUBSCRIPTION_SCHEMA)),
            ["base", "subscription"],
        )
        .select("topic", "subscription", "type")
    )
    flagged = per_message.join(F.broadcast(kinds), ["topic", "subscription"], "left")
    checked = flagged.where(F.col("type").isNotNull() & (F.col("deliveries") > 0))
    stream = Window.partitionBy(
        "subscription",
        "producer_index",
        F.when(F.col("type") == "Key_Shared", F.col("key")).otherwise(F.lit(None)),
    ).orderBy("first_ns", "sequence_id")
    before = F.max("sequence_id").over(stream.rowsBetween(Window.unboundedPreceding, -1))
    columns = per_message.columns
    checked = checked.select(
        *columns, F.coalesce(F.col("sequence_id") < before, F.lit(False)).alias("out_of_order")
    )
    others = flagged.where(F.col("type").isNull() | (F.col("deliveries") == 0)).select(
        *columns, F.lit(False).alias("out_of_order")
    )
    return checked.unionByName(others)


def _reduce(ctx: Context, per_message: Any) -> Any:
    from pyspark.sql import functions as F

    lost = F.col("receipt_ns").isNotNull() & (F.col("deliveries") == 0)
    duplicate = F.col("deliveries") > 1
    out_of_order = F.col("out_of_order")
    anomalous = lost | duplicate | out_of_order

    def only_anomalous(column: str) -> Any:
        return F.when(anomalous, F.col(column)).alias(column)

    return per_message.groupBy(
        "subscription",
        "topic",
        F.floor(seconds_since(F.col("first_ns"), ctx.start_ns)).alias("second"),
        *(
            only_anomalous(c)
            for c in ("producer_index", "sequence_id", "receipt_ns", "first_ns", "last_ns")
        ),
        F.when(anomalous, lost).alias("lost"),
        F.when(anomalous, duplicate).alias("duplicate"),
        F.when(anomalous, out_of_order).alias("out_of_order"),
    ).agg(
        F.count(F.when(F.col("deliveries") > 0, True)).alias("received"),
        F.sum("deliveries").alias("deliveries"),
        F.count(F.when((F.col("deliveries") > 0) & F.col("receipt_ns").isNull(), True)).alias(
            "received_not_acked"
        ),
    )
