"""Correctness: lost, duplicated and reordered messages, each tied to an event.

Per subscription of the scenario, the broker's receipted sends are compared with the
deliveries, as loadgen's own end-of-run checks do (docs/loadgen-trace.md), but from the rows
and with every anomaly tied to an event:

- *lost*: receipted, never delivered; its cause comes after the receipt, so it is tied to the
  first event at or after the receipt;
- *duplicate*: a message delivered again; tied to the last event before the repeat delivery;
- *out of order*: a first delivery after a later message of the same producer partition (per
  key for Key_Shared; not checked for Shared, where Pulsar promises no order); tied to the last
  event before it.
"""

from __future__ import annotations

from typing import Any, Final

from loadgen.analysis.common import Context, Event, Table, base_topic, collect, seconds_since
from loadgen.analysis.shared import messages, produced, subscription_frame

__all__ = ["EXAMPLES_PER_KIND", "correctness"]

EXAMPLES_PER_KIND: Final = 200
"""Anomalous messages listed one by one per kind (all of them are counted)."""

BROADCAST_ANOMALIES: Final = 1_000_000
"""Up to this many anomalous messages are sent to every task (a few tens of MB) to find their
producers' names in one pass over the big table, instead of shuffling it."""


def correctness(ctx: Context) -> dict[str, Table]:
    """Tables `correctness`, `anomalies` and `anomaly_examples`.

    `correctness` has a row per subscription, `anomalies` one per kind, subscription and event
    tied to, `anomaly_examples` the first messages of each kind. Everything is read from the
    run's `messages` (`shared.messages`): counts, and a row per anomalous message.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    subs = F.broadcast(subscription_frame(ctx))
    # The scenario's subscriptions only, as a subscription not listed has no expected sends.
    checked = (
        messages(ctx)
        .withColumn("base", base_topic(F.col("topic")))
        .join(subs, ["base", "subscription"])
    )
    per_sub = (
        checked.where(F.col("second").isNotNull())  # delivered at least once
        .groupBy("base", "subscription", "type")
        .agg(F.sum("received").alias("received"), F.sum("deliveries").alias("deliveries"))
    )
    if ctx.run.has("sends"):
        acked_count = (
            produced(ctx)
            .groupBy(base_topic(F.col("topic")).alias("base"))
            .agg(F.sum("messages").alias("acked"))
            .join(subs.select("base", "subscription"), "base")
        )
        unacked = checked.groupBy("base", "subscription").agg(
            F.sum("received_not_acked").alias("received_not_acked")
        )
        per_sub = per_sub.join(acked_count, ["base", "subscription"], "full").join(
            unacked, ["base", "subscription"], "left"
        )
    else:
        per_sub = per_sub.withColumn("acked", F.lit(None).cast("long")).withColumn(
            "received_not_acked", F.lit(None).cast("long")
        )
    anomalous = checked.where(F.col("producer_index").isNotNull())
    lost = F.col("lost")
    found = anomalous.agg(F.count(F.when(lost, True)), F.count(F.when(~lost, True))).first()
    lost_rows = _named(
        ctx, anomalous.where(lost), "sends", ["producer_index", "sequence_id"], found[0]
    )
    delivered_rows = _named(
        ctx,
        anomalous.where(~lost),
        "receives",
        ["subscription", "producer_index", "sequence_id"],
        found[1],
    )
    kinds = [
        frame.where(F.col(kind)).select(
            F.lit(kind).alias("kind"),
            "base",
            "subscription",
            "producer",
            "producer_index",
            "sequence_id",
            F.col(at).alias("at_ns"),
        )
        for kind, at, frame in (
            ("lost", "receipt_ns", lost_rows),
            ("duplicate", "last_ns", delivered_rows),
            ("out_of_order", "first_ns", delivered_rows),
        )
    ]
    everything = kinds[0].unionByName(kinds[1]).unionByName(kinds[2])
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


def _named(ctx: Context, anomalies: Any, table: str, message: list[str], count: int) -> Any:
    """`anomalies` (`count` rows) with the producer's name, as `table`'s rows have it.

    The names are looked up for the anomalous messages only (a join that keeps few rows of the
    big table), rather than carried through the shuffle of every message.
    """
    from pyspark.sql import functions as F

    if not count:
        return anomalies.withColumn("producer", F.lit(None).cast("string"))
    wanted = anomalies.select(*message).distinct()
    if count <= BROADCAST_ANOMALIES:  # Spark cannot tell: its estimate of a join is a product
        wanted = F.broadcast(wanted)
    names = (
        ctx.table(table)
        .select(*message, "producer")
        .join(wanted, message, "left_semi")
        .groupBy(*message)
        .agg(F.min("producer").alias("producer"))
    )
    return anomalies.join(names, message, "left")


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
