"""The headline numbers of a run (summary.json and the report's first table)."""

from __future__ import annotations

import math
from typing import Any

from loadgen.analysis.common import Table
from loadgen.analysis.jobs import JobResult

__all__ = ["HEADLINE_LABELS", "headline"]

HEADLINE_LABELS: dict[str, str] = {
    "duration_s": "run length (s)",
    "produced": "messages produced (receipted)",
    "consumed": "deliveries",
    "produce_rate": "mean produce rate (msg/s, first to last receipt after the warm-up)",
    "consume_rate": "mean delivery rate (msg/s, first to last delivery after the warm-up)",
    "peak_backlog": "peak backlog (msg)",
    "publish_p50_ms": "publish latency p50 (ms)",
    "publish_p99_ms": "publish latency p99 (ms)",
    "publish_p999_ms": "publish latency p99.9 (ms)",
    "publish_max_ms": "publish latency max (ms)",
    "end_to_end_p50_ms": "end-to-end latency p50 (ms)",
    "end_to_end_p99_ms": "end-to-end latency p99 (ms)",
    "end_to_end_p999_ms": "end-to-end latency p99.9 (ms)",
    "end_to_end_max_ms": "end-to-end latency max (ms)",
    "lost": "lost (acknowledged, never delivered)",
    "duplicates": "duplicates",
    "out_of_order": "out of order",
    "limiters": "rate limiters traced",
    "over_delivering_periods": "periods over the limit",
    "max_over_ratio": "worst period: delivered / limit",
    "carry_over_periods": "carry-over periods",
    "throttled_s": "time throttled (s, all limiters)",
    "rate_vs_limit": "mean delivered rate / limit (highest)",
    "unloads": "load-manager unloads (shed bundles)",
    "splits": "bundle splits",
    "skew_episodes": "skew episodes",
    "max_time_to_converge_s": "longest time to converge (s)",
    "disruptions": "disruptions (unloads, splits, kills)",
    "max_delivery_gap_s": "longest delivery gap after one (s)",
    "min_jain_index": "fairness: lowest Jain index",
}
"""Every headline number, in report order, with what it means."""


def _sum(table: Table | None, column: str, **where: str) -> int | None:
    if table is None:
        return None
    return sum(
        int(row[column] or 0) for row in table.dicts() if all(row[k] == v for k, v in where.items())
    )


def _max(values: list[Any]) -> Any:
    finite = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return max(finite) if finite else None


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 3)
    return value


def headline(result: JobResult) -> dict[str, Any]:
    """Every number of `HEADLINE_LABELS` that the run's tables give (None where they do not)."""
    run, tables = result.context.run, result.tables
    manifest = run.manifest
    numbers: dict[str, Any] = dict.fromkeys(HEADLINE_LABELS)
    if manifest.get("end_ns"):
        numbers["duration_s"] = (int(manifest["end_ns"]) - run.start_ns) / 1e9
    throughput = tables.get("throughput")
    if throughput is not None:
        numbers["produced"] = _sum(throughput, "messages", role="produce")
        numbers["consumed"] = _sum(throughput, "messages", role="consume")
    for row in tables["rates"].dicts() if "rates" in tables else []:
        if row["topic"] == "all":
            numbers[f"{row['role']}_rate"] = row["msg_rate"]
    if "backlog" in tables:
        numbers["peak_backlog"] = _max(tables["backlog"].column("backlog"))
    for row in tables["latency_by_phase"].dicts() if "latency_by_phase" in tables else []:
        if row["phase"] == "all":
            for pct in ("p50", "p99", "p999", "max"):
                numbers[f"{row['kind']}_{pct}_ms"] = row[f"{pct}_ms"]
    if "correctness" in tables:
        for key in ("lost", "duplicates", "out_of_order"):
            numbers[key] = _sum(tables["correctness"], key)
    summary = tables.get("throttling_summary")
    if summary is not None:
        numbers["limiters"] = len(summary.rows)
        numbers["over_delivering_periods"] = _sum(summary, "over_periods")
        numbers["max_over_ratio"] = _max(summary.column("max_over_ratio"))
        numbers["carry_over_periods"] = _sum(summary, "carry_over_periods")
        numbers["throttled_s"] = sum(summary.column("throttled_s"))
        numbers["rate_vs_limit"] = _max(summary.column("rate_vs_limit"))
    if run.has("loadbalance"):
        actions = [e.action for e in result.context.events if e.source == "load-manager"]
        numbers["unloads"] = actions.count("unload")
        numbers["splits"] = actions.count("split")
    convergence = tables.get("lb_convergence")
    if convergence is not None:
        numbers["skew_episodes"] = len(convergence.rows)
        numbers["max_time_to_converge_s"] = _max(convergence.column("time_to_converge_s"))
    gaps = tables.get("delivery_gaps")
    if gaps is not None:
        numbers["disruptions"] = len(
            set(zip(gaps.column("event_t_s"), gaps.column("event"), strict=True))
        )
        numbers["max_delivery_gap_s"] = _max(gaps.column("gap_s"))
    if "fairness" in tables and tables["fairness"].rows:
        numbers["min_jain_index"] = min(tables["fairness"].column("jain_index"))
    return {key: _round(value) for key, value in numbers.items()}
