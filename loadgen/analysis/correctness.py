"""Correctness (lost, duplicated, reordered messages) and fairness of shared subscriptions.

Per subscription of the scenario, the broker's receipted sends are compared with the
deliveries, as loadgen's own end-of-run checks do (docs/loadgen-trace.md), but from the rows
and with every anomaly tied to an event:

- *lost*: receipted, never delivered; its cause comes after the receipt, so it is tied to the
  first event at or after the receipt;
- *duplicate*: a message delivered again; tied to the last event before the repeat delivery;
- *out of order*: a first delivery after a later message of the same producer partition (per
  key for Key_Shared; not checked for Shared, where Pulsar promises no order); tied to the last
  event before it.

Fairness: per Shared and Key_Shared subscription, each consumer's share of the deliveries,
Jain's index `(Σx)² / (n·Σx²)` (1 = perfectly even, 1/n = one consumer took all) and the
max/min ratio; for Key_Shared also the keys that reached more than one consumer.
"""

from __future__ import annotations

from typing import Any, Final

from loadgen.analysis.common import Context, Event, Table, base_topic, collect, seconds_since

__all__ = ["EXAMPLES_PER_KIND", "correctness", "fairness"]

EXAMPLES_PER_KIND: Final = 200
"""Anomalous messages listed one by one per kind (all of them are counted)."""

_ORDERED: Final = ("Exclusive", "Failover", "Key_Shared")


def _subscriptions(ctx: Context) -> Any:  # a DataFrame
    """(base, subscription, type): the scenario's, else those seen in `receives`."""
    from pyspark.sql import functions as F

    listed = ctx.run.subscriptions()
    if listed:
        return ctx.spark.createDataFrame(listed, "base string, subscription string, type string")
    return (
        ctx.table("receives")
        .select(base_topic(F.col("topic")).alias("base"), "subscription")
        .distinct()
        .withColumn("type", F.lit("unknown"))
    )


def correctness(ctx: Context) -> dict[str, Table]:
    """Tables `correctness`, `anomalies` and `anomaly_examples`.

    `correctness` has a row per subscription, `anomalies` one per kind, subscription and event
    tied to, `anomaly_examples` the first messages of each kind.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    subs = F.broadcast(_subscriptions(ctx))
    receives = ctx.table("receives").withColumn("base", base_topic(F.col("topic")))
    # A producer index is one producer on one partition: with the sequence id it names a
    # message, and shuffles on two numbers are cheaper than on topic names.
    message = ["subscription", "producer_index", "sequence_id"]
    first = receives.groupBy(*message).agg(
        F.first("topic").alias("topic"),
        F.count("*").alias("deliveries"),
        F.min("receive_ns").alias("first_ns"),
        F.max("receive_ns").alias("last_ns"),
        F.first("key").alias("key"),
        F.first("producer").alias("producer"),
        F.first("base").alias("base"),
    )
    # Every output reads these two: computed once, kept in memory until the tables are out.
    first = first.join(
        subs.select("base", "subscription", "type"), ["base", "subscription"]
    ).persist()
    anomalies = []
    acked_count = None
    if ctx.run.has("sends"):
        sends = ctx.table("sends").withColumn("base", base_topic(F.col("topic")))
        acked = sends.where(F.col("receipt_ns").isNotNull()).join(subs, "base")
        lost = acked.join(first.select(*message), message, "left_anti").select(
            F.lit("lost").alias("kind"),
            "base",
            "subscription",
            "producer",
            "producer_index",
            "sequence_id",
            F.col("receipt_ns").alias("at_ns"),
        )
        anomalies.append(lost)
        acked_count = acked.groupBy("base", "subscription").agg(F.count("*").alias("acked"))
        unacked = (
            first.join(
                sends.where(F.col("receipt_ns").isNotNull()).select(
                    "producer_index", "sequence_id"
                ),
                ["producer_index", "sequence_id"],
                "left_anti",
            )
            .groupBy("base", "subscription")
            .agg(F.count("*").alias("received_not_acked"))
        )
    anomalies.append(
        first.where(F.col("deliveries") > 1).select(
            F.lit("duplicate").alias("kind"),
            "base",
            "subscription",
            "producer",
            "producer_index",
            "sequence_id",
            F.col("last_ns").alias("at_ns"),
        )
    )
    ordered = first.where(F.col("type").isin(*_ORDERED))
    stream = Window.partitionBy(
        "subscription",
        "producer_index",
        F.when(F.col("type") == "Key_Shared", F.col("key")).otherwise(F.lit(None)),
    ).orderBy("first_ns", "sequence_id")
    before = F.max("sequence_id").over(stream.rowsBetween(Window.unboundedPreceding, -1))
    anomalies.append(
        ordered.withColumn("before", before)
        .where(F.col("sequence_id") < F.col("before"))
        .select(
            F.lit("out_of_order").alias("kind"),
            "base",
            "subscription",
            "producer",
            "producer_index",
            "sequence_id",
            F.col("first_ns").alias("at_ns"),
        )
    )
    per_sub = first.groupBy("base", "subscription", "type").agg(
        F.count("*").alias("received"),
        F.sum("deliveries").alias("deliveries"),
    )
    if acked_count is not None:
        per_sub = per_sub.join(acked_count, ["base", "subscription"], "full").join(
            unacked, ["base", "subscription"], "left"
        )
    else:
        per_sub = per_sub.withColumn("acked", F.lit(None).cast("long")).withColumn(
            "received_not_acked", F.lit(None).cast("long")
        )
    everything = anomalies[0]
    for frame in anomalies[1:]:
        everything = everything.unionByName(frame)
    counts = (
        everything.groupBy("base", "subscription")
        .pivot("kind", ["lost", "duplicate", "out_of_order"])
        .count()
    )
    summary = per_sub.join(counts, ["base", "subscription"], "left").select(
        F.col("base").alias("topic"),
        "subscription",
        "type",
        "acked",
        "received",
        "deliveries",
        F.coalesce(F.col("lost"), F.lit(0)).alias("lost"),
        F.coalesce(F.col("duplicate"), F.lit(0)).alias("duplicates"),
        F.coalesce(F.col("out_of_order"), F.lit(0)).alias("out_of_order"),
        F.coalesce(F.col("received_not_acked"), F.lit(0)).alias("received_not_acked"),
    )
    everything = everything.persist()
    examples = everything.withColumn(
        "n",
        F.row_number().over(Window.partitionBy("kind").orderBy("at_ns", "sequence_id")),
    )
    try:
        return {
            "correctness": collect(summary, "correctness", ["topic", "subscription"]),
            **_tie_to_events(ctx, everything, examples),
        }
    finally:
        everything.unpersist()
        first.unpersist()


def _tie_to_events(ctx: Context, everything: Any, examples: Any) -> dict[str, Table]:
    """Group the anomalies by the event each is tied to; list the first ones."""
    from pyspark.sql import functions as F

    events = [e for e in ctx.events if e.at_ns]
    times = [e.at_ns for e in events]
    # The event index of each anomaly, computed in Spark over a literal array of event times
    # (a scenario has a handful of events; every anomaly row needs only a comparison per event).
    times_col = F.array(*(F.lit(t) for t in times)) if times else F.array().cast("array<long>")
    before = F.size(F.filter(times_col, lambda t: t < F.col("at_ns")))
    upto = F.size(F.filter(times_col, lambda t: t <= F.col("at_ns")))
    # A loss is caused after the receipt: the first event at or after it. Anything else: the
    # last event at or before the anomaly. An index out of range means no such event.
    index = F.when(F.col("kind") == "lost", before).otherwise(upto - 1)
    tied = everything.withColumn("event", index)
    grouped = tied.groupBy("kind", "base", "subscription", "event").agg(
        F.count("*").alias("count"),
        F.min(seconds_since(F.col("at_ns"), ctx.start_ns)).alias("first_t_s"),
        F.max(seconds_since(F.col("at_ns"), ctx.start_ns)).alias("last_t_s"),
        F.min("sequence_id").alias("first_sequence_id"),
        F.max("sequence_id").alias("last_sequence_id"),
    )
    table = collect(grouped, "anomalies", ["kind", "base", "subscription", "event"])
    listed = examples.where(F.col("n") <= EXAMPLES_PER_KIND).withColumn("event", index)
    listed = listed.select(
        "kind",
        F.col("base").alias("topic"),
        "subscription",
        "producer",
        "producer_index",
        "sequence_id",
        seconds_since(F.col("at_ns"), ctx.start_ns).alias("t_s"),
        "event",
    )
    example_table = collect(listed, "anomaly_examples", ["kind", "t_s"])
    return {
        "anomalies": _with_event_labels(table, events, ctx.start_ns, rename_base=True),
        "anomaly_examples": _with_event_labels(example_table, events, ctx.start_ns),
    }


def _with_event_labels(
    table: Table, events: list[Event], start_ns: int, *, rename_base: bool = False
) -> Table:
    """Replace the `event` index column by the event's label and time."""
    index = table.columns.index("event")
    columns = list(table.columns)
    if rename_base:
        columns[columns.index("base")] = "topic"
    columns[index : index + 1] = ["event", "event_t_s"]
    rows = []
    for row in table.rows:
        i = row[index]
        if i is None or not 0 <= i < len(events):
            label, at = "(none)", None
        else:
            label, at = events[i].label(), round((events[i].at_ns - start_ns) / 1e9, 3)
        rows.append((*row[:index], label, at, *row[index + 1 :]))
    return Table(table.name, tuple(columns), rows)


def fairness(ctx: Context) -> dict[str, Table]:
    """Tables `fairness_consumers`, `fairness` (per subscription) and `fairness_over_time`."""
    from pyspark.sql import functions as F

    subs = F.broadcast(
        _subscriptions(ctx).where(F.col("type").isin("Shared", "Key_Shared", "unknown"))
    )
    receives = (
        ctx.table("receives")
        .withColumn("base", base_topic(F.col("topic")))
        .join(subs, ["base", "subscription"])
    )
    per_consumer = receives.groupBy("base", "subscription", "type", "consumer").agg(
        F.count("*").alias("deliveries"),
        F.countDistinct("key").alias("keys"),
    )
    consumers = collect(
        per_consumer.withColumnRenamed("base", "topic"),
        "fairness_consumers",
        ["topic", "subscription", "consumer"],
    )
    shared_keys = (
        receives.where(F.col("type") == "Key_Shared")
        .where(F.col("key").isNotNull())
        .groupBy("base", "subscription", "key")
        .agg(F.countDistinct("consumer").alias("consumers"))
        .where(F.col("consumers") > 1)
        .groupBy("base", "subscription")
        .count()
    )
    keys_split = {(r[0], r[1]): int(r[2]) for r in shared_keys.collect()}
    over_time = receives.groupBy(
        F.floor(seconds_since(F.col("receive_ns"), ctx.start_ns)).alias("second"),
        F.col("base").alias("topic"),
        "subscription",
        "consumer",
    ).agg(F.count("*").alias("deliveries"))
    return {
        "fairness": _fairness_summary(consumers, keys_split),
        "fairness_consumers": consumers,
        "fairness_over_time": collect(over_time, "fairness_over_time", ["second", "consumer"]),
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
