"""Throttling accuracy, from the brokers' dispatch trace (docs/dispatch-trace.md).

For every limiter (a level — broker, topic, subscription — of one broker, topic and
subscription) and every period of it, what was charged against the limit: messages (or
entries, when the limiter counts entries) and bytes. Then, per period in time order, the
*debt* a token bucket carries: `debt = max(0, debt + delivered - limit)`, with the periods
that left no row (nothing to dispatch) repaying a whole limit each. A period is

- **over-delivering** when it delivered more than its limit (by `over_*`);
- **carry-over** when it started in debt and delivered less than its limit: the limiter was
  still paying back an earlier over-delivery.

Time throttled: every `throttled` row is a refused read after which the dispatcher waits a
second (spec §1.2); it counts until the dispatcher's next row, at most that second.

The period's length is not in the trace; it is taken from the rows (seconds between the first
and the last row over the periods between them), 1 s when a limiter spans a single period.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Final

from loadgen.analysis.common import Context, Table, collect, seconds_since

__all__ = ["LEVELS", "throttling"]

LEVELS: Final = ("broker", "topic", "subscription")
THROTTLE_BACKOFF_S: Final = 1.0
"""How long a dispatcher waits after a throttled read (Pulsar's fixed 1000 ms)."""


def _level_rows(ctx: Context, level: str) -> Any:  # a DataFrame
    from pyspark.sql import functions as F

    d = ctx.table("dispatch")
    limited = (F.col(f"{level}_msg_rate") > 0) | (F.col(f"{level}_byte_rate") > 0)
    return d.where(limited & (F.col(f"{level}_period") >= 0)).select(
        F.lit(level).alias("level"),
        "broker",
        (F.col("topic") if level != "broker" else F.lit("")).alias("topic"),
        (F.col("subscription") if level == "subscription" else F.lit("")).alias("subscription"),
        "wall_ns",
        "monotonic",
        "event",
        "throttled_by",
        F.col(f"{level}_period").alias("period"),
        F.col(f"{level}_msg_rate").alias("msg_rate"),
        F.col(f"{level}_byte_rate").alias("byte_rate"),
        # What the level was charged; what was sent where it does not count that dimension.
        F.when(F.col(f"{level}_msg_charged") >= 0, F.col(f"{level}_msg_charged"))
        .otherwise(
            F.when(F.col("charge_unit") == "entries", F.col("entries")).otherwise(F.col("messages"))
        )
        .alias("msg_charged"),
        F.when(F.col(f"{level}_byte_charged") >= 0, F.col(f"{level}_byte_charged"))
        .otherwise(F.col("bytes"))
        .alias("byte_charged"),
    )


def throttling(ctx: Context) -> dict[str, Table]:
    """Tables `throttling_periods` (one row per limiter and period) and `throttling_summary`."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = _level_rows(ctx, LEVELS[0])
    for level in LEVELS[1:]:
        rows = rows.unionByName(_level_rows(ctx, level))
    key = ["level", "broker", "topic", "subscription"]
    ordered = Window.partitionBy(*key).orderBy("monotonic")
    previous = F.lag("period").over(ordered)
    # The period index restarts at 0 when a limit changes (docs/dispatch-trace.md): each
    # restart begins an epoch of its own.
    restart = (F.col("period") < previous) | (
        (F.col("period") == previous)
        & (
            (F.col("msg_rate") != F.lag("msg_rate").over(ordered))
            | (F.col("byte_rate") != F.lag("byte_rate").over(ordered))
        )
    )
    rows = rows.withColumn("restart", F.coalesce(restart, F.lit(False)).cast("int"))
    rows = rows.withColumn(
        "epoch",
        F.sum("restart").over(ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)),
    )
    dispatched = F.col("event") == "dispatch"
    periods = rows.groupBy(*key, "epoch", "period").agg(
        F.min(seconds_since(F.col("wall_ns"), ctx.start_ns)).alias("t_s"),
        F.min("monotonic").alias("first_mono"),
        F.max("monotonic").alias("last_mono"),
        F.max("msg_rate").alias("limit_msgs"),
        F.max("byte_rate").alias("limit_bytes"),
        F.sum(F.when(dispatched, F.col("msg_charged")).otherwise(0)).alias("delivered_msgs"),
        F.sum(F.when(dispatched, F.col("byte_charged")).otherwise(0)).alias("delivered_bytes"),
        F.sum(dispatched.cast("int")).alias("dispatches"),
        F.sum(
            ((F.col("event") == "throttled") & (F.col("throttled_by") == F.col("level"))).cast(
                "int"
            )
        ).alias("throttled_reads"),
    )
    collected = collect(periods, "periods", [*key, "epoch", "period"])
    throttled = _time_throttled(ctx)
    period_rows, summary_rows = _account(collected, throttled)
    return {
        "throttling_periods": Table("throttling_periods", PERIOD_COLUMNS, period_rows),
        "throttling_summary": Table("throttling_summary", SUMMARY_COLUMNS, summary_rows),
    }


def _time_throttled(ctx: Context) -> dict[tuple[str, str, str, str], float]:
    """Seconds each limiter kept a dispatcher waiting, by (level, broker, topic, subscription)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    d = ctx.table("dispatch")
    dispatcher = Window.partitionBy("broker", "topic", "subscription").orderBy("monotonic")
    waits = (
        d.select(
            "broker",
            "topic",
            "subscription",
            "event",
            "throttled_by",
            (F.lead("monotonic").over(dispatcher) - F.col("monotonic")).alias("gap"),
        )
        .where(F.col("event") == "throttled")
        .select(
            F.col("throttled_by").alias("level"),
            "broker",
            F.when(F.col("throttled_by") == "broker", F.lit(""))
            .otherwise(F.col("topic"))
            .alias("topic"),
            F.when(F.col("throttled_by") == "subscription", F.col("subscription"))
            .otherwise(F.lit(""))
            .alias("subscription"),
            F.least(
                F.coalesce(F.col("gap"), F.lit(THROTTLE_BACKOFF_S)), F.lit(THROTTLE_BACKOFF_S)
            ).alias("wait"),
        )
        .groupBy("level", "broker", "topic", "subscription")
        .agg(F.sum("wait").alias("seconds"))
    )
    return {(r[0], r[1], r[2], r[3]): float(r[4]) for r in waits.collect()}


PERIOD_COLUMNS: Final = (
    "level",
    "broker",
    "topic",
    "subscription",
    "epoch",
    "period",
    "t_s",
    "limit_msgs",
    "delivered_msgs",
    "over_msgs",
    "limit_bytes",
    "delivered_bytes",
    "over_bytes",
    "dispatches",
    "throttled_reads",
    "debt_msgs",
    "carry_over",
)

SUMMARY_COLUMNS: Final = (
    "level",
    "broker",
    "topic",
    "subscription",
    "limit_msgs",
    "limit_bytes",
    "period_s",
    "periods",
    "over_periods",
    "max_over_msgs",
    "max_over_ratio",
    "total_over_msgs",
    "max_over_bytes",
    "carry_over_periods",
    "throttled_s",
    "delivered_msgs",
    "delivered_bytes",
    "mean_rate_msgs",
    "limit_rate_msgs",
    "rate_vs_limit",
)


def _over(delivered: int, limit: int) -> int:
    return max(0, delivered - limit) if limit > 0 else 0


def _account(
    periods: Table, throttled: dict[tuple[str, str, str, str], float]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Debt, over-delivery and carry-over per period; the summary per limiter."""
    by_limiter: dict[tuple[str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in periods.dicts():
        by_limiter[(row["level"], row["broker"], row["topic"], row["subscription"])].append(row)
    period_rows: list[tuple[Any, ...]] = []
    summary_rows: list[tuple[Any, ...]] = []
    for limiter, rows in by_limiter.items():
        period_s = _period_seconds(rows)
        debt_msgs = debt_bytes = 0
        last = None
        span = 0
        over_msgs: list[int] = []
        ratios: list[float] = []
        over_bytes: list[int] = []
        carry = 0
        for row in rows:
            limit, limit_b = int(row["limit_msgs"]), int(row["limit_bytes"])
            delivered, delivered_b = int(row["delivered_msgs"]), int(row["delivered_bytes"])
            if last is not None and last["epoch"] == row["epoch"]:
                idle = row["period"] - last["period"] - 1  # periods without a row repay
                debt_msgs = max(0, debt_msgs - idle * max(limit, 0))
                debt_bytes = max(0, debt_bytes - idle * max(limit_b, 0))
                span += row["period"] - last["period"]
            else:
                debt_msgs = debt_bytes = 0
                span += 1
            carry_over = (debt_msgs > 0 and limit > 0 and delivered < limit) or (
                debt_bytes > 0 and limit_b > 0 and delivered_b < limit_b
            )
            debt_msgs = max(0, debt_msgs + delivered - limit) if limit > 0 else 0
            debt_bytes = max(0, debt_bytes + delivered_b - limit_b) if limit_b > 0 else 0
            over, over_b = _over(delivered, limit), _over(delivered_b, limit_b)
            over_msgs.append(over)
            over_bytes.append(over_b)
            if limit > 0:
                ratios.append(delivered / limit)
            carry += carry_over
            period_rows.append(
                (
                    *limiter,
                    row["epoch"],
                    row["period"],
                    row["t_s"],
                    limit,
                    delivered,
                    over,
                    limit_b,
                    delivered_b,
                    over_b,
                    row["dispatches"],
                    row["throttled_reads"],
                    debt_msgs,
                    carry_over,
                )
            )
            last = row
        delivered_total = sum(int(r["delivered_msgs"]) for r in rows)
        limit_now = int(rows[-1]["limit_msgs"])
        mean_rate = delivered_total / (span * period_s) if span else 0.0
        limit_rate = limit_now / period_s if limit_now > 0 else math.nan
        summary_rows.append(
            (
                *limiter,
                limit_now,
                int(rows[-1]["limit_bytes"]),
                period_s,
                len(rows),
                sum(1 for o, b in zip(over_msgs, over_bytes, strict=True) if o or b),
                max(over_msgs),
                max(ratios) if ratios else math.nan,
                sum(over_msgs),
                max(over_bytes),
                carry,
                round(throttled.get(limiter, 0.0), 6),
                delivered_total,
                sum(int(r["delivered_bytes"]) for r in rows),
                mean_rate,
                limit_rate,
                mean_rate / limit_rate if limit_now > 0 else math.nan,
            )
        )
    return period_rows, summary_rows


def _period_seconds(rows: list[dict[str, Any]]) -> float:
    """The limiter's period length, from the rows' monotonic times (1 s if they cannot say)."""
    best = None
    for epoch in {row["epoch"] for row in rows}:
        in_epoch = [row for row in rows if row["epoch"] == epoch]
        first, last = in_epoch[0], in_epoch[-1]
        periods = last["period"] - first["period"]
        if periods >= 2:
            estimate = (last["first_mono"] - first["first_mono"]) / periods
            if best is None or periods > best[0]:
                best = (periods, estimate)
    if best is None:
        return 1.0
    # Periods are whole seconds in Pulsar's policies; the rows' first times jitter within one.
    return float(max(1, round(best[1])))
