"""The headline numbers of a run (summary.json and the report's first table).

The run's own numbers are here (`RUN`); each job's are declared with the job (`jobs.JOBS`,
their `Headline`s defined below), so a new job adds its numbers in one place.
"""

from __future__ import annotations

import math
from typing import Any

from loadgen.analysis.common import Table
from loadgen.analysis.job import Headline, Job, JobResult

__all__ = [
    "BALANCING",
    "CORRECTNESS",
    "DELIVERY_GAPS",
    "FAIRNESS",
    "LATENCY",
    "RUN",
    "THROTTLING",
    "THROUGHPUT",
    "headline",
    "headline_labels",
]


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


def _run(result: JobResult) -> dict[str, Any]:
    run = result.context.run
    end_ns = run.manifest.get("end_ns")
    return {"duration_s": (int(end_ns) - run.start_ns) / 1e9} if end_ns else {}


RUN = Headline({"duration_s": "run length (s)"}, _run)


def _throughput(result: JobResult) -> dict[str, Any]:
    tables, numbers = result.tables, {}
    throughput = tables.get("throughput")
    if throughput is not None:
        numbers["produced"] = _sum(throughput, "messages", role="produce")
        numbers["consumed"] = _sum(throughput, "messages", role="consume")
    for row in tables["rates"].dicts() if "rates" in tables else []:
        if row["topic"] == "all":
            numbers[f"{row['role']}_rate"] = row["msg_rate"]
    if "backlog" in tables:
        numbers["peak_backlog"] = _max(tables["backlog"].column("backlog"))
    return numbers


THROUGHPUT = Headline(
    {
        "produced": "messages produced (receipted)",
        "consumed": "deliveries",
        "produce_rate": "mean produce rate (msg/s, first to last receipt after the warm-up)",
        "consume_rate": "mean delivery rate (msg/s, first to last delivery after the warm-up)",
        "peak_backlog": "peak backlog (msg)",
    },
    _throughput,
)


def _latency(result: JobResult) -> dict[str, Any]:
    tables, numbers = result.tables, {}
    for row in tables["latency_by_phase"].dicts() if "latency_by_phase" in tables else []:
        if row["phase"] == "all":
            for pct in ("p50", "p99", "p999", "max"):
                numbers[f"{row['kind']}_{pct}_ms"] = row[f"{pct}_ms"]
    return numbers


LATENCY = Headline(
    {
        "publish_p50_ms": "publish latency p50 (ms)",
        "publish_p99_ms": "publish latency p99 (ms)",
        "publish_p999_ms": "publish latency p99.9 (ms)",
        "publish_max_ms": "publish latency max (ms)",
        "end_to_end_p50_ms": "end-to-end latency p50 (ms)",
        "end_to_end_p99_ms": "end-to-end latency p99 (ms)",
        "end_to_end_p999_ms": "end-to-end latency p99.9 (ms)",
        "end_to_end_max_ms": "end-to-end latency max (ms)",
    },
    _latency,
)


def _correctness(result: JobResult) -> dict[str, Any]:
    table = result.tables.get("correctness")
    if table is None:
        return {}
    return {key: _sum(table, key) for key in ("lost", "duplicates", "out_of_order")}


CORRECTNESS = Headline(
    {
        "lost": "lost (acknowledged, never delivered)",
        "duplicates": "duplicates",
        "out_of_order": "out of order",
    },
    _correctness,
)


def _throttling(result: JobResult) -> dict[str, Any]:
    summary = result.tables.get("throttling_summary")
    if summary is None:
        return {}
    return {
        "limiters": len(summary.rows),
        "over_delivering_periods": _sum(summary, "over_periods"),
        "max_over_ratio": _max(summary.column("max_over_ratio")),
        "carry_over_periods": _sum(summary, "carry_over_periods"),
        "throttled_s": sum(summary.column("throttled_s")),
        "rate_vs_limit": _max(summary.column("rate_vs_limit")),
    }


THROTTLING = Headline(
    {
        "limiters": "rate limiters traced",
        "over_delivering_periods": "periods over the limit",
        "max_over_ratio": "worst period: delivered / limit",
        "carry_over_periods": "carry-over periods",
        "throttled_s": "time throttled (s, all limiters)",
        "rate_vs_limit": "mean delivered rate / limit (highest)",
    },
    _throttling,
)


def _balancing(result: JobResult) -> dict[str, Any]:
    numbers = {}
    if result.context.run.has("loadbalance"):
        actions = [e.action for e in result.context.events if e.source == "load-manager"]
        numbers["unloads"] = actions.count("unload")
        numbers["splits"] = actions.count("split")
    convergence = result.tables.get("lb_convergence")
    if convergence is not None:
        numbers["skew_episodes"] = len(convergence.rows)
        numbers["max_time_to_converge_s"] = _max(convergence.column("time_to_converge_s"))
    return numbers


BALANCING = Headline(
    {
        "unloads": "load-manager unloads (shed bundles)",
        "splits": "bundle splits",
        "skew_episodes": "skew episodes",
        "max_time_to_converge_s": "longest time to converge (s)",
    },
    _balancing,
)


def _gaps(result: JobResult) -> dict[str, Any]:
    gaps = result.tables.get("delivery_gaps")
    if gaps is None:
        return {}
    return {
        "disruptions": len(set(zip(gaps.column("event_t_s"), gaps.column("event"), strict=True))),
        "max_delivery_gap_s": _max(gaps.column("gap_s")),
    }


DELIVERY_GAPS = Headline(
    {
        "disruptions": "disruptions (unloads, splits, kills)",
        "max_delivery_gap_s": "longest delivery gap after one (s)",
    },
    _gaps,
)


def _fairness(result: JobResult) -> dict[str, Any]:
    table = result.tables.get("fairness")
    if table is None or not table.rows:
        return {}
    return {"min_jain_index": min(table.column("jain_index"))}


FAIRNESS = Headline({"min_jain_index": "fairness: lowest Jain index"}, _fairness)


def _headlines(jobs: tuple[Job, ...]) -> list[Headline]:
    return [RUN, *(job.headline for job in jobs if job.headline is not None)]


def headline_labels(jobs: tuple[Job, ...]) -> dict[str, str]:
    """Every headline number of `jobs` (the run's own first), in report order, with its meaning."""
    return {key: label for part in _headlines(jobs) for key, label in part.labels.items()}


def headline(result: JobResult) -> dict[str, Any]:
    """Every headline number of the run's jobs; None where its tables do not give one.

    Every job's numbers are read, run or not: a number some other table gives (the
    load manager's unloads, from the events) is there even when its job was left out.
    """
    numbers: dict[str, Any] = dict.fromkeys(headline_labels(result.jobs))
    for part in _headlines(result.jobs):
        numbers.update(part.read(result))
    return {key: _round(value) for key, value in numbers.items()}
