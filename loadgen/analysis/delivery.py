"""Throughput and backlog, from the run's per-second aggregates of `sends` and `receives`."""

from __future__ import annotations

from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal

from loadgen.analysis.common import (
    Context,
    Table,
    base_topic,
    collect,
)
from loadgen.analysis.shared import consumed, messages, produced

__all__ = ["throughput"]


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
    """Per base topic and subscription, each second: receipted and first delivered so far.

    Spark counts both per second (a row per second, topic and subscription); the running sums
    are made here, on those few rows, rather than by a Spark window and its joins.
    """
    from pyspark.sql import functions as F

    produced_per_second = (
        produced(ctx)
        .groupBy(base_topic(F.col("topic")).alias("base"), "second")
        .agg(F.sum("messages").alias("n"))
        .select("base", F.lit(None).cast("string").alias("subscription"), "second", "n")
    )
    first_per_second = (
        messages(ctx)
        .where(F.col("second").isNotNull())
        .groupBy(base_topic(F.col("topic")).alias("base"), "subscription", "second")
        .agg(F.sum("received").alias("n"))
    )
    produced_at: dict[str, dict[int, int]] = defaultdict(dict)
    consumed_at: dict[tuple[str, str], dict[int, int]] = defaultdict(dict)
    seconds: dict[str, set[int]] = defaultdict(set)  # per base topic: in any of its rows
    per_second = produced_per_second.unionByName(first_per_second)
    for base, subscription, second, n in per_second.collect():
        if subscription is None:
            produced_at[base][second] = n
        else:
            consumed_at[(base, subscription)][second] = n
        seconds[base].add(second)
    rows = []
    for (base, subscription), consumed_then in sorted(consumed_at.items()):
        produced_total = consumed_total = 0
        for second in sorted(seconds[base]):
            produced_total += produced_at[base].get(second, 0)
            consumed_total += consumed_then.get(second, 0)
            rows.append(
                (
                    second,
                    base,
                    subscription,
                    _round(produced_total * scale),
                    _round(consumed_total * scale),
                    _round(max(produced_total - consumed_total, 0) * scale),
                )
            )
    columns = ("second", "topic", "subscription", "produced_total", "consumed_total", "backlog")
    return Table("backlog", columns, rows)


def _round(value: float) -> int:
    """Rounded half up, as Spark's `round` (on the number's decimal form) rounds a double."""
    return int(Decimal(repr(value)).quantize(Decimal(1), ROUND_HALF_UP))
