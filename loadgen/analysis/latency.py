"""Latency percentiles a second and per phase, exact, from every row, in two small passes.

Percentiles are computed from the rows, not from the HdrHistogram logs, over latencies in whole
microseconds, as Spark's `percentile` computes them: over a group's n latencies sorted, the p-th
percentile interpolates linearly between the order statistics at floor and ceil of p·(n−1).
Counting each distinct latency per group in Spark (the direct way) keeps nearly a group per row
at typical rates: millions for a 10-million-row run, more than a small machine's memory holds.

Instead, two passes over the rows, each aggregating into a small table read here:

1. a histogram per kind, second, phase and latency bucket (16 buckets per doubling, like
   HdrHistogram's): its counts, sums and maxima give every group's count, mean and max, and,
   added up in order, the bucket holding each order statistic a percentile needs;
2. the distinct latencies, counted, of the rows in those buckets only: the order statistics,
   read exactly.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from loadgen.analysis.common import Context, Table, phase_names, phase_of, seconds_since

__all__ = ["KINDS", "PERCENTILES", "latency", "percentile"]

PERCENTILES: Final = (0.5, 0.95, 0.99, 0.999)
KINDS: Final = ("publish", "end_to_end")
"""The latencies measured: to the broker's receipt, to the delivery."""

SUB_BUCKET_BITS: Final = 4
"""2**4 = 16 buckets per doubling of the latency (~6 % wide): the second pass keeps few rows."""

COLUMNS: Final = ("count", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms")

Key = tuple[Any, ...]
"""A group: ("time", kind, second), or ("phase", kind, phase) with phase None for the run."""

Counted = list[tuple[int, int]]
"""Distinct latencies (µs) ascending, each with its count."""


@dataclass
class _Group:
    """A group's histogram (count per bucket) and its count, sum and maximum latency."""

    buckets: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    count: int = 0
    total: int = 0
    top: int = 0

    def add(self, bucket: int, count: int, total: int, top: int) -> None:
        self.buckets[bucket] += count
        self.top = top if not self.count else max(self.top, top)
        self.count += count
        self.total += total

    def wanted(self) -> dict[int, tuple[int, int]]:
        """Per order statistic (0-based rank) the percentiles need: its bucket, its rank there."""
        positions = [(self.count - 1) * p for p in PERCENTILES]
        ranks = sorted({math.floor(x) for x in positions} | {math.ceil(x) for x in positions})
        located: dict[int, tuple[int, int]] = {}
        below = 0
        for bucket in sorted(self.buckets):
            count = self.buckets[bucket]
            while ranks and ranks[0] < below + count:
                rank = ranks.pop(0)
                located[rank] = (bucket, rank - below)
            below += count
        return located


def percentile(count: int, p: float, nth: dict[int, float]) -> float:
    """Spark's `percentile` of `count` values, given the order statistics (`nth[rank]`) it reads.

    The same arithmetic, in the same order, as Spark's, for the same floating-point result.
    """
    position = (count - 1) * p
    lower, higher = math.floor(position), math.ceil(position)
    if higher == lower or nth[higher] == nth[lower]:
        return nth[lower]
    return (higher - position) * nth[lower] + (position - lower) * nth[higher]


def latency(ctx: Context) -> dict[str, Table]:
    """Publish and end-to-end latency percentiles a second and per phase, from every row.

    Publish latency = receipt - intended send time; end to end = receive - intended send time
    (every delivery, redeliveries included). Tables `latency_over_time` (kind, second, count,
    mean, p50, p95, p99, p999, max in ms) and `latency_by_phase` (the same per phase, with
    `all` for the whole run).
    """
    from pyspark.sql import functions as F

    phases = phase_names(ctx.phases)
    rows = _latencies(ctx, phases)
    groups: dict[Key, _Group] = defaultdict(_Group)
    histogram = rows.groupBy("kind", "second", "phase", "bucket").agg(
        F.count("*").alias("n"), F.sum("us").alias("total"), F.max("us").alias("top")
    )
    for row in histogram.toArrow().to_pylist():
        kind, bucket, counts = row["kind"], row["bucket"], (row["n"], row["total"], row["top"])
        for key in (("time", kind, row["second"]), ("phase", kind, row["phase"])):
            groups[key].add(bucket, *counts)
        groups[("phase", kind, None)].add(bucket, *counts)
    wanted = {key: group.wanted() for key, group in groups.items()}
    targets = {(key, bucket) for key in wanted for bucket, _ in wanted[key].values()}
    exact = _exact(ctx, rows, targets) if targets else {}

    def summary(key: Key) -> tuple[Any, ...]:
        group = groups[key]
        nth = {
            rank: float(_nth(exact[(key, bucket)], offset))
            for rank, (bucket, offset) in wanted[key].items()
        }
        return (
            group.count,
            float(group.total) / float(group.count) / 1000,
            *(percentile(group.count, p, nth) / 1000 for p in PERCENTILES),
            group.top / 1000,
        )

    over_time = sorted((KINDS[key[1]], key[2], *summary(key)) for key in groups if key[0] == "time")
    order = ["before", *(phase.name for phase in ctx.phases), "after", "all"]
    by_phase = sorted(
        (
            (KINDS[key[1]], "all" if key[2] is None else phases[key[2]], *summary(key))
            for key in groups
            if key[0] == "phase"
        ),
        key=lambda row: (row[0], order.index(row[1])),
    )
    return {
        "latency_over_time": Table("latency_over_time", ("kind", "second", *COLUMNS), over_time),
        "latency_by_phase": Table("latency_by_phase", ("kind", "phase", *COLUMNS), by_phase),
    }


def _latencies(ctx: Context, phases: list[str]) -> Any:  # a DataFrame
    """Every latency: kind, second, phase (indexes: numbers group faster), us, bucket."""
    from pyspark.sql import functions as F

    start = ctx.start_ns
    parts = []
    if ctx.run.has("sends"):
        parts.append(
            ctx.table("sends")
            .where(F.col("receipt_ns").isNotNull())
            .select(
                F.lit(KINDS.index("publish")).alias("kind"),
                seconds_since(F.col("receipt_ns"), start).alias("t"),
                F.floor((F.col("receipt_ns") - F.col("intended_ns")) / 1000).alias("us"),
            )
        )
    if ctx.run.has("receives"):
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
    return rows.select(
        "kind",
        F.floor("t").alias("second"),
        phase_of(F.col("t"), ctx.phases, phases).alias("phase"),
        "us",
        _bucket(F.col("us")).alias("bucket"),
    )


def _bucket(us: Any) -> Any:
    """The histogram bucket of `us`: its lower bound, `us` with all but its top 5 bits cleared.

    Buckets follow the latencies' order exactly (a bucket's values all sort before the next
    one's). Found by comparisons with powers of two and a mask, integer operations only: a
    logarithm and powers in floating point cost five times as much per row.
    """
    from pyspark.sql import functions as F

    kept = SUB_BUCKET_BITS + 1
    bucket = F.when(us <= 0, F.lit(0)).when(us < F.lit(1 << kept), us)
    for bits in range(kept + 1, 63):  # below 2**bits: clear the bits under the top `kept`
        bucket = bucket.when(us < F.lit(1 << bits), us.bitwiseAND(F.lit(-(1 << (bits - kept)))))
    return bucket.otherwise(us.bitwiseAND(F.lit(-(1 << (63 - kept)))))


def _exact(
    ctx: Context, rows: Any, targets: set[tuple[Key, int]]
) -> dict[tuple[Key, int], Counted]:
    """The distinct latencies, counted, of each (group, bucket) in `targets`."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    def frame(keys: list[str], values: Iterable[tuple[int, ...]], marker: str) -> Any:
        columns = list(zip(*values, strict=True)) or [()] * len(keys)
        arrays = {
            name: pa.array(column, pa.int32() if name in ("kind", "phase") else pa.int64())
            for name, column in zip(keys, columns, strict=True)
        }
        table = pa.table({**arrays, marker: pa.array([True] * len(columns[0]), pa.bool_())})
        return F.broadcast(ctx.spark.createDataFrame(table))

    by_time = {(k[1], k[2], b) for k, b in targets if k[0] == "time"}
    by_phase = {(k[1], k[2], b) for k, b in targets if k[0] == "phase" and k[2] is not None}
    by_run = {(k[1], b) for k, b in targets if k[0] == "phase" and k[2] is None}
    hit = (
        rows.join(
            frame(["kind", "second", "bucket"], by_time, "in_time"),
            ["kind", "second", "bucket"],
            "left",
        )
        .join(
            frame(["kind", "phase", "bucket"], by_phase, "in_phase"),
            ["kind", "phase", "bucket"],
            "left",
        )
        .join(frame(["kind", "bucket"], by_run, "in_run"), ["kind", "bucket"], "left")
        .where(F.col("in_time") | F.col("in_phase") | F.col("in_run"))
    )
    # Rows wanted for their phase or the whole run only are counted across seconds.
    counted = hit.groupBy(
        "kind", F.when(F.col("in_time"), F.col("second")).alias("second"), "phase", "bucket", "us"
    ).agg(F.count("*").alias("n"))
    merged: dict[tuple[Key, int], dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for row in counted.toArrow().to_pylist():
        kind, second, phase, bucket = row["kind"], row["second"], row["phase"], row["bucket"]
        for key, wanted in (
            (("time", kind, second), (kind, second, bucket) in by_time),
            (("phase", kind, phase), (kind, phase, bucket) in by_phase),
            (("phase", kind, None), (kind, bucket) in by_run),
        ):
            if wanted:
                merged[(key, bucket)][row["us"]] += row["n"]
    return {target: sorted(values.items()) for target, values in merged.items()}


def _nth(counted: Counted, offset: int) -> int:
    """The latency at `offset` (0-based) in the sorted values `counted` stands for."""
    for value, count in counted:
        if offset < count:
            return value
        offset -= count
    raise IndexError(offset)
