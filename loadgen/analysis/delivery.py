"""Throughput and backlog, from the run's per-second aggregates of `sends` and `receives`."""

from __future__ import annotations

import math
from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

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
    scaled by 1 / trace sample), `rates` (the mean rates, below) and `backlog` (per base topic
    and subscription: receipted so far minus first deliveries so far, at the end of each
    second).
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
                "first_ns",
                "last_ns",
            )
        )
    if run.has("receives"):
        parts.append(
            consumed(ctx)
            .groupBy("second", "topic", "subscription", "broker")
            .agg(
                F.sum("messages").alias("messages"),
                F.sum("bytes").alias("bytes"),
                F.min("first_ns").alias("first_ns"),
                F.max("last_ns").alias("last_ns"),
            )
            .select(
                "second",
                F.lit("consume").alias("role"),
                "topic",
                "subscription",
                "broker",
                "messages",
                "bytes",
                "first_ns",
                "last_ns",
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
    tables = {
        "throughput": collect(per_second, "throughput", order),
        "rates": _rates(ctx, rows),
    }
    if run.has("sends", "receives"):
        tables["backlog"] = _backlog(ctx, scale)
    return tables


RATE_COLUMNS = (
    "role",
    "topic",
    "subscription",
    "messages",
    "first_s",
    "last_s",
    "msg_rate",
    "byte_rate",
)


def _rates(ctx: Context, per_second: Any) -> Table:
    """Mean rates per role, base topic and subscription, and over all of them (topic `all`).

    pulsar-perf's rule: the messages after the warm-up over the time they took, here the time
    from the first to the last one (a receipt, or a delivery): (messages - 1) / (last - first),
    exact for messages at a steady rate. Not messages over a count of one-second buckets,
    whose first and last are partial (a 6 s run at 2,000 msg/s spans 7 of them).
    The warm-up is rounded up to whole seconds (the aggregates' buckets).
    """
    from pyspark.sql import functions as F

    warm = math.ceil(ctx.warmup_s)
    rows = (
        per_second.where(F.col("second") >= warm)
        .groupBy("role", base_topic(F.col("topic")).alias("topic"), "subscription")
        .agg(
            F.sum("messages").alias("messages"),
            F.sum("bytes").alias("bytes"),
            F.min("first_ns").alias("first_ns"),
            F.max("last_ns").alias("last_ns"),
        )
        .collect()
    )
    per_topic = sorted((tuple(row) for row in rows), key=lambda r: (r[0] != "produce", r[1:3]))
    totals: dict[str, list[Any]] = {}
    for role, _topic, _sub, count, size, first, last in per_topic:
        total = totals.setdefault(role, [role, "all", "", 0, 0, first, last])
        total[3] += count
        total[4] += size
        total[5], total[6] = min(total[5], first), max(total[6], last)
    scale = 1.0 / ctx.run.sample
    table = []
    for role, total in totals.items():
        for _role, topic, sub, count, size, first, last in [
            *(row for row in per_topic if row[0] == role),
            tuple(total),
        ]:
            span = (last - first) / 1e9
            rate = (count - 1) / span if count > 1 and span > 0 else None
            table.append(
                (
                    role,
                    topic,
                    sub,
                    _round(count * scale),
                    (first - ctx.start_ns) / 1e9,
                    (last - ctx.start_ns) / 1e9,
                    None if rate is None else rate * scale,
                    None if rate is None else rate * scale * size / count,
                )
            )
    return Table("rates", RATE_COLUMNS, table)


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
