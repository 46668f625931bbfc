"""Throughput, backlog and latency, from the `sends` and `receives` tables.

Latency percentiles are computed from every row (Spark's exact `percentile`, linear
interpolation between order statistics) over latencies in whole microseconds, not from the
HdrHistogram logs: the same numbers for the same rows, whatever the histogram's precision.
"""

from __future__ import annotations

from typing import Any, Final

from loadgen.analysis.common import (
    Context,
    Table,
    base_topic,
    collect,
    name_of,
    phase_names,
    phase_of,
    seconds_since,
)
from loadgen.analysis.shared import consumed, messages, produced

__all__ = ["KINDS", "PERCENTILES", "latency", "throughput"]

PERCENTILES: Final = (0.5, 0.95, 0.99, 0.999)
KINDS: Final = ("publish", "end_to_end")
"""The latencies measured: to the broker's receipt, to the delivery."""


def _acked_sends(ctx: Context) -> Any:  # a DataFrame
    from pyspark.sql import functions as F

    return ctx.table("sends").where(F.col("receipt_ns").isNotNull())


def throughput(ctx: Context) -> dict[str, Table]:
    """Messages and bytes a second, produced (receipted) and consumed, per topic and broker.

    Tables: `throughput` (second, role, topic, subscription, broker, messages, bytes: rows
    scaled by 1 / trace sample) and `backlog` (per base topic and subscription: receipted so
    far minus first deliveries so far, at the end of each second).
    """
    from pyspark.sql import functions as F

    run = ctx.run
    scale = 1.0 / run.sample
    parts = []
    if run.has("sends"):
        parts.append(
            produced(ctx).select(
                "second",
                F.lit("produce").alias("role"),
                "topic",
                F.lit("").alias("subscription"),
                "broker",
                "messages",
                "bytes",
            )
        )
    if run.has("receives"):
        parts.append(
            consumed(ctx)
            .groupBy("second", "topic", "subscription", "broker")
            .agg(F.sum("messages").alias("messages"), F.sum("bytes").alias("bytes"))
            .select(
                "second",
                F.lit("consume").alias("role"),
                "topic",
                "subscription",
                "broker",
                "messages",
                "bytes",
            )
        )
    rows = parts[0]
    for part in parts[1:]:
        rows = rows.unionByName(part)
    per_second = rows.select(
        "second",
        "role",
        "topic",
        "subscription",
        "broker",
        F.round(F.col("messages") * scale).cast("long").alias("messages"),
        F.round(F.col("bytes") * scale).cast("long").alias("bytes"),
    )
    order = ["second", "role", "topic", "subscription", "broker"]
    tables = {"throughput": collect(per_second, "throughput", order)}
    if run.has("sends", "receives"):
        tables["backlog"] = _backlog(ctx, scale)
    return tables


def _backlog(ctx: Context, scale: float) -> Table:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    produced_per_second = (
        produced(ctx)
        .groupBy(base_topic(F.col("topic")).alias("base"), "second")
        .agg(F.sum("messages").alias("produced"))
    )
    first = (
        messages(ctx)
        .where(F.col("second").isNotNull())
        .groupBy(base_topic(F.col("topic")).alias("base"), "subscription", "second")
        .agg(F.sum("received").alias("consumed"))
    )
    subscriptions = first.select("base", "subscription").distinct()
    seconds = produced_per_second.select("base", "second").unionByName(
        first.select("base", "second")
    )
    grid = subscriptions.join(seconds.distinct(), "base")
    joined = grid.join(produced_per_second, ["base", "second"], "left").join(
        first, ["base", "subscription", "second"], "left"
    )
    window = (
        Window.partitionBy("base", "subscription")
        .orderBy("second")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    produced_total = F.sum(F.coalesce(F.col("produced"), F.lit(0))).over(window)
    consumed_total = F.sum(F.coalesce(F.col("consumed"), F.lit(0))).over(window)
    result = joined.select(
        "second",
        F.col("base").alias("topic"),
        "subscription",
        F.round(produced_total * scale).cast("long").alias("produced_total"),
        F.round(consumed_total * scale).cast("long").alias("consumed_total"),
        F.round(F.greatest(produced_total - consumed_total, F.lit(0)) * scale)
        .cast("long")
        .alias("backlog"),
    )
    return collect(result, "backlog", ["topic", "subscription", "second"])


def latency(ctx: Context) -> dict[str, Table]:
    """Publish and end-to-end latency percentiles a second and per phase, from every row.

    Publish latency = receipt - intended send time; end to end = receive - intended send time
    (every delivery, redeliveries included). Tables `latency_over_time` (kind, second, count,
    mean, p50, p95, p99, p999, max in ms) and `latency_by_phase` (the same per phase, with
    `all` for the whole run).
    """
    from pyspark.sql import functions as F

    run, start = ctx.run, ctx.start_ns
    # Kinds and phases are grouped as numbers (faster than strings), named once summarised.
    phases = phase_names(ctx.phases)
    parts = []
    if run.has("sends"):
        parts.append(
            _acked_sends(ctx).select(
                F.lit(KINDS.index("publish")).alias("kind"),
                seconds_since(F.col("receipt_ns"), start).alias("t"),
                F.floor((F.col("receipt_ns") - F.col("intended_ns")) / 1000).alias("us"),
            )
        )
    if run.has("receives"):
        parts.append(
            ctx.table("receives").select(
                F.lit(KINDS.index("end_to_end")).alias("kind"),
                seconds_since(F.col("receive_ns"), start).alias("t"),
                F.floor((F.col("receive_ns") - F.col("intended_ns")) / 1000).alias("us"),
            )
        )
    rows = parts[0]
    for part in parts[1:]:
        rows = rows.unionByName(part)
    # Rows with the same latency (to the microsecond) are counted first: the exact
    # percentiles then weigh each distinct value by its count (`percentile`'s frequency),
    # which gives the same answer as over every row at a fraction of the memory and time.
    counted = (
        rows.select(
            "kind",
            F.floor("t").alias("second"),
            phase_of(F.col("t"), ctx.phases, phases).alias("phase"),
            "us",
        )
        .groupBy("kind", "second", "phase", "us")
        .agg(F.count("*").alias("n"))
        .persist()
    )
    kind = name_of(F.col("kind"), list(KINDS)).alias("kind")
    over_time = _summarise(counted.groupBy("kind", "second"))
    over_time = over_time.select(kind, *over_time.columns[1:])
    # The phases' counts merged first: a few per microsecond value rather than one a second
    # (equal values' counts add up in `percentile` anyway), before the rollup triples them.
    # Named before the rollup: Spark 4.0 computes a projection of a rollup's output below it,
    # where the keys it sets to null are not null yet.
    per_phase = counted.groupBy("kind", "phase", "us").agg(F.sum("n").alias("n"))
    per_phase = per_phase.select(kind, name_of(F.col("phase"), phases).alias("phase"), "us", "n")
    by_phase = _summarise(per_phase.rollup("kind", "phase")).where(F.col("kind").isNotNull())
    by_phase = by_phase.withColumn("phase", F.coalesce(F.col("phase"), F.lit("all")))
    order = ["before", *(phase.name for phase in ctx.phases), "after", "all"]
    collected = collect(by_phase, "latency_by_phase")
    rows_in_order = sorted(collected.rows, key=lambda row: (row[0], order.index(row[1])))
    tables = {
        "latency_over_time": collect(over_time, "latency_over_time", ["kind", "second"]),
        "latency_by_phase": Table(collected.name, collected.columns, rows_in_order),
    }
    counted.unpersist()
    return tables


def _summarise(grouped: Any) -> Any:  # pyspark GroupedData -> DataFrame
    from pyspark.sql import functions as F

    exact = F.percentile(F.col("us"), F.array(*(F.lit(p) for p in PERCENTILES)), F.col("n"))
    frame = grouped.agg(
        F.sum("n").alias("count"),
        (F.sum(F.col("us") * F.col("n")) / F.sum("n") / 1000).alias("mean_ms"),
        exact.alias("pcts"),
        (F.max("us") / 1000).alias("max_ms"),
    )
    names = ("p50_ms", "p95_ms", "p99_ms", "p999_ms")
    keys = [c for c in frame.columns if c not in ("count", "mean_ms", "pcts", "max_ms")]
    return frame.select(
        *keys,
        "count",
        "mean_ms",
        *((F.col("pcts").getItem(i) / 1000).alias(name) for i, name in enumerate(names)),
        "max_ms",
    )
