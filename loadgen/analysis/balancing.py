"""Load balancing from the load-balancer trace, and the delivery gaps disruptions cause.

`load_balancing` reads the trace of docs/load-balancer-trace.md: each broker's usage over time
(its load reports), the timeline of shedding decisions, placements, splits and unloads with
their reasons and numbers, and the *skew episodes*: from the moment the busiest broker's
weighted usage stands more than the skew threshold above the brokers' mean (the latest report
of each broker: ThresholdShedder's test, spec §4.3) until it is back within it; the time to
converge is the episode's length. Not max - min: a broker left empty by shedding (what an
OverloadShedder does to an overloaded broker's bundles) or a new broker is no skew of the
others, and a cluster that keeps one would never converge.

`delivery_gaps` needs no broker trace: for every disruption (a scenario's unload, split or
broker kill, a load-manager unload or split) and every consumer of a topic it touched, the gap
between the consumer's last delivery before it and its first delivery after it.
"""

from __future__ import annotations

import re
from typing import Any, Final

from loadgen.analysis.common import DISRUPTIONS, Context, Event, Table, collect, seconds_since
from loadgen.analysis.inputs import normalize_topic

__all__ = ["delivery_gaps", "load_balancing"]

_BUNDLE: Final = re.compile(r"^(?P<ns>.+)/0x(?P<lo>[0-9a-fA-F]{8})_0x(?P<hi>[0-9a-fA-F]{8})$")
_FULL_RANGE_END: Final = 0xFFFFFFFF


def load_balancing(ctx: Context) -> dict[str, Table]:
    """Tables `lb_broker_usage`, `lb_timeline` and `lb_convergence`."""
    from pyspark.sql import functions as F

    trace = ctx.table("loadbalance").withColumn(
        "t_s", seconds_since(F.col("wall_ns"), ctx.start_ns)
    )
    usage = trace.where(F.col("event") == "report").select(
        "t_s",
        "broker",
        "weighted_max_usage",
        "cpu_percent",
        "bandwidth_in_percent",
        "bandwidth_out_percent",
        (F.col("msg_rate_in") + F.col("msg_rate_out")).alias("msg_rate"),
        (F.col("msg_throughput_in") + F.col("msg_throughput_out")).alias("throughput"),
        "num_bundles",
    )
    timeline = trace.where(F.col("event") != "report").select(
        "t_s",
        "event",
        "bundle",
        "source_broker",
        "dest_broker",
        "strategy",
        "reason",
        "label",
        "broker_load",
        "cluster_load",
        "threshold",
        "to_offload",
        "offload_unit",
        "bundle_msg_rate",
        "bundle_throughput",
        "split_children",
    )
    usage_table = collect(usage, "lb_broker_usage", ["t_s", "broker"])
    timeline_table = collect(timeline, "lb_timeline", ["t_s"])
    return {
        "lb_broker_usage": usage_table,
        "lb_timeline": timeline_table,
        "lb_convergence": _convergence(usage_table, _unloads(ctx), ctx.skew_threshold),
    }


def _unloads(ctx: Context) -> list[float]:
    """When the load manager unloaded a bundle (its shed decisions), seconds since the start."""
    return [
        (event.at_ns - ctx.start_ns) / 1e9
        for event in ctx.events
        if event.source == "load-manager" and event.action == "unload"
    ]


def _convergence(usage: Table, unloads: list[float], threshold: float) -> Table:
    latest: dict[str, float] = {}
    episodes: list[list[Any]] = []
    current: list[Any] | None = None
    for row in usage.dicts():
        latest[row["broker"]] = float(row["weighted_max_usage"])
        if len(latest) < 2:
            continue
        imbalance = max(latest.values()) - sum(latest.values()) / len(latest)
        if current is None and imbalance > threshold:
            current = [row["t_s"], None, imbalance]
            episodes.append(current)
        elif current is not None:
            current[2] = max(current[2], imbalance)
            if imbalance <= threshold:
                current[1] = row["t_s"]
                current = None
    rows = []
    for start, end, peak in episodes:
        moved = [t for t in unloads if t >= start and (end is None or t <= end)]
        rows.append(
            (
                start,
                end,
                None if end is None else end - start,
                peak,
                len(moved),
                moved[0] - start if moved else None,
            )
        )
    columns = (
        "skew_start_s",
        "converged_s",
        "time_to_converge_s",
        "peak_imbalance",
        "unloads",
        "first_unload_after_s",
    )
    return Table("lb_convergence", columns, rows)


def _affects(event: Event) -> Any:
    """A Spark condition on `topic` (a partition's full name): the event touched it."""
    from pyspark.sql import functions as F

    topic = F.col("topic")
    base = F.regexp_replace(topic, r"-partition-[0-9]+$", "")
    if event.action == "UnloadTopic":
        return base == F.lit(normalize_topic(event.target))
    if event.action == "UnloadNamespace":
        return topic.contains(f"://{event.target}/")
    match = _BUNDLE.match(event.target)
    if event.action in ("UnloadBundle", "SplitBundle", "unload", "split") and match:
        lo, hi = int(match["lo"], 16), int(match["hi"], 16)
        hashed = F.crc32(topic)
        upper = hashed <= F.lit(hi) if hi == _FULL_RANGE_END else hashed < F.lit(hi)
        return topic.contains(f"://{match['ns']}/") & (hashed >= F.lit(lo)) & upper
    return F.lit(True)  # a broker kill, or a target we cannot map: every topic


def delivery_gaps(ctx: Context) -> dict[str, Table]:
    """Table `delivery_gaps`: per disruption and consumer, the delivery gap around it."""
    from pyspark.sql import functions as F

    events = [e for e in ctx.events if e.action in DISRUPTIONS]
    columns = (
        "event_t_s",
        "source",
        "event",
        "consumer",
        "topics",
        "last_before_s",
        "first_after_s",
        "gap_s",
        "usual_gap_s",
    )
    if not events:
        return {"delivery_gaps": Table("delivery_gaps", columns, [])}
    ns = F.col("receive_ns")
    # First per topic (what an event touches depends on the topic only), then per consumer:
    # one pass over `receives` without a distinct count per event.
    per_topic = [
        F.count("*").alias("n"),
        F.min(ns).alias("first_ns"),
        F.max(ns).alias("last_ns"),
    ]
    for i, event in enumerate(events):
        at = F.lit(event.at_ns)
        per_topic += [
            F.max(F.when(ns < at, ns)).alias(f"b{i}"),
            F.min(F.when(ns >= at, ns)).alias(f"a{i}"),
        ]
    topics = ctx.table("receives").groupBy("subscription", "consumer", "topic").agg(*per_topic)
    aggregates = [
        F.sum("n").alias("n"),
        F.min("first_ns").alias("first_ns"),
        F.max("last_ns").alias("last_ns"),
    ]
    for i, event in enumerate(events):
        hit = _affects(event)
        aggregates += [
            F.max(F.when(hit, F.col(f"b{i}"))).alias(f"b{i}"),
            F.min(F.when(hit, F.col(f"a{i}"))).alias(f"a{i}"),
            F.count(F.when(hit, F.col("topic"))).alias(f"t{i}"),
        ]
    per_consumer = topics.groupBy("subscription", "consumer").agg(*aggregates).collect()
    rows = []
    for row in per_consumer:
        usual = (row["last_ns"] - row["first_ns"]) / 1e9 / (row["n"] - 1) if row["n"] > 1 else None
        for i, event in enumerate(events):
            before, after, topics = row[f"b{i}"], row[f"a{i}"], row[f"t{i}"]
            if not topics:
                continue  # the consumer reads nothing the event touched
            rows.append(
                (
                    round((event.at_ns - ctx.start_ns) / 1e9, 3),
                    event.source,
                    event.label(),
                    row["consumer"],
                    int(topics),
                    None if before is None else (before - ctx.start_ns) / 1e9,
                    None if after is None else (after - ctx.start_ns) / 1e9,
                    None if before is None or after is None else (after - before) / 1e9,
                    usual,
                )
            )
    rows.sort(key=lambda r: (r[0], r[3]))
    return {"delivery_gaps": Table("delivery_gaps", columns, rows)}
