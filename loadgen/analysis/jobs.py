"""The analyses: each a named Spark job that reads some tables and writes its own tables.

`JOBS` lists them in report order, each declared once: its Spark work, the tables it needs,
its report section (text, tables, figures) and its headline numbers (`job.Job`). A job runs
when its run has the tables it needs (all of `needs`, and one of `needs_any` if given);
otherwise the report says why it is missing. In the Spark UI (and a cluster's history server)
each job's stages carry its name (`setJobGroup`); the aggregates several jobs share (`shared`)
are computed once, under `shared:NAME`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from loadgen.analysis import headline as headlines
from loadgen.analysis import plots
from loadgen.analysis.balancing import delivery_gaps, load_balancing
from loadgen.analysis.common import (
    Context,
    Table,
    load_manager_events,
    scenario_events,
)
from loadgen.analysis.correctness import correctness
from loadgen.analysis.delivery import throughput
from loadgen.analysis.fairness import fairness
from loadgen.analysis.inputs import Run
from loadgen.analysis.job import Job, JobResult
from loadgen.analysis.latency import latency
from loadgen.analysis.throttling import throttling

__all__ = ["JOBS", "Job", "JobResult", "run_jobs"]

log = logging.getLogger(__name__)


JOBS: Final = (
    Job(
        "throughput",
        "Throughput and backlog",
        throughput,
        needs_any=("sends", "receives"),
        explain=(
            "Messages a second the broker receipted (produced) and delivered (consumed), per "
            "topic and subscription (the second the run ends in counts over its part of it); "
            "the backlog is what was receipted and not yet delivered once. The mean rates "
            "(table rates, and the headline's) are pulsar-perf's: the messages after the "
            "warm-up over the time from the first to the last of them, (messages - 1) / (last - "
            "first)."
        ),
        tables=("rates", "backlog"),
        figures=plots.THROUGHPUT,
        headline=headlines.THROUGHPUT,
    ),
    Job(
        "latency",
        "Latency",
        latency,
        needs_any=("sends", "receives"),
        explain=(
            "Percentiles computed from every message's row (exact, to the microsecond). Publish "
            "latency runs from the intended send time to the broker's receipt, end-to-end "
            "latency to the delivery: both include any wait before the send (open loop)."
        ),
        tables=("latency_by_phase",),
        figures=plots.LATENCY,
        headline=headlines.LATENCY,
    ),
    Job(
        "throttling",
        "Throttling accuracy",
        throttling,
        needs=("dispatch",),
        explain=(
            "From the brokers' dispatch trace: what each rate limiter let through per period "
            "against its limit. Over-delivery is a period above the limit; a carry-over period "
            "starts in debt from an earlier over-delivery and delivers less than the limit."
        ),
        tables=("throttling_summary", "throttling_periods"),
        flags={"throttling_summary": "over_periods", "throttling_periods": "over_msgs"},
        figures=plots.THROTTLING,
        headline=headlines.THROTTLING,
    ),
    Job(
        "load_balancing",
        "Load balancing",
        load_balancing,
        needs=("loadbalance",),
        explain=(
            "From the load-balancer trace: each broker's weighted usage as it reported it, the "
            "load manager's decisions with their reasons and numbers (its shed decisions are "
            "the unloads of the event timeline), and how long the cluster stayed skewed: a skew "
            "episode lasts while the busiest broker's usage (each broker's latest report) "
            "stands more than the skew threshold above the brokers' mean, ThresholdShedder's "
            "test."
        ),
        tables=("lb_timeline", "lb_convergence", "lb_broker_usage"),
        figures=plots.LOAD_BALANCING,
        headline=headlines.BALANCING,
    ),
    Job(
        "delivery_gaps",
        "Delivery gaps after disruptions",
        delivery_gaps,
        needs=("receives",),
        explain=(
            "For each unload, split or broker kill, how long each consumer of an affected topic "
            "went without a delivery (last delivery before it to first after it), next to the "
            "consumer's usual gap between deliveries."
        ),
        tables=("delivery_gaps",),
        figures=plots.DELIVERY_GAPS,
        headline=headlines.DELIVERY_GAPS,
    ),
    Job(
        "correctness",
        "Correctness",
        correctness,
        needs=("receives",),
        explain=(
            "Acknowledged by the broker but never delivered (lost), delivered twice "
            "(duplicates), delivered before an earlier message of the same producer (out of "
            "order; not checked for Shared). Each is tied to an event: a loss to the first "
            "event after the receipt, the others to the last event before them."
        ),
        tables=("correctness", "anomalies", "anomaly_examples"),
        flags={"correctness": "lost"},
        headline=headlines.CORRECTNESS,
    ),
    Job(
        "fairness",
        "Fairness of shared subscriptions",
        fairness,
        needs=("receives",),
        explain=(
            "How evenly Shared and Key_Shared subscriptions spread deliveries over their "
            "consumers. Jain's index is 1 for a perfectly even spread, 1/n when one of n "
            "consumers gets everything."
        ),
        tables=("fairness", "fairness_consumers"),
        figures=plots.FAIRNESS,
        headline=headlines.FAIRNESS,
    ),
)
"""Every analysis, declared once, in report order."""


def run_jobs(
    spark: Any,
    run: Run,
    *,
    skew_threshold: float = 0.10,
    only: tuple[str, ...] = (),
    progress: Callable[[str], None] = lambda _line: None,
) -> JobResult:
    """Run every job (or those named in `only`) that `run` has the tables for."""
    sc = spark.sparkContext
    sc.setJobGroup("events", f"{run.run_id}: events")
    events = sorted(scenario_events(run) + load_manager_events(run), key=lambda event: event.at_ns)
    ctx = Context(spark, run, events, skew_threshold)
    tables: dict[str, Table] = {}
    skipped: dict[str, str] = {}
    try:
        for job in JOBS:
            if only and job.name not in only:
                continue
            reason = job.missing(run)
            if reason is not None:
                skipped[job.name] = reason
                progress(f"{run.run_id}: {job.name} skipped ({reason})")
                continue
            sc.setJobGroup(job.name, f"{run.run_id}: {job.title}")
            progress(f"{run.run_id}: {job.name}")
            tables.update(job.run(ctx))
    finally:
        ctx.release()
    sc.setJobGroup("report", f"{run.run_id}: report")
    return JobResult(ctx, tables, skipped, JOBS)
