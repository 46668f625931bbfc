"""The analyses: each a named Spark job that reads some tables and writes its own tables.

`JOBS` lists them in report order. A job runs when its run has the tables it needs (all of
`needs`, and one of `needs_any` if given); otherwise the report says why it is missing. In the
Spark UI (and a cluster's history server) each job's stages carry its name (`setJobGroup`);
the aggregates several jobs share (`shared`) are computed once, under `shared:NAME`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

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
from loadgen.analysis.latency import latency
from loadgen.analysis.throttling import throttling

__all__ = ["JOBS", "Job", "JobResult", "run_jobs"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    """One analysis: its name (the Spark job group), what it answers, what it reads."""

    name: str
    title: str
    run: Callable[[Context], dict[str, Table]]
    needs: tuple[str, ...] = ()
    needs_any: tuple[str, ...] = ()

    def missing(self, run: Run) -> str | None:
        """Why this job cannot run on `run`, or None if it can."""
        absent = [name for name in self.needs if not run.has(name)]
        if self.needs_any and not any(run.has(name) for name in self.needs_any):
            absent.append(" or ".join(self.needs_any))
        return f"needs table {', '.join(absent)}" if absent else None


JOBS: Final = (
    Job("throughput", "Throughput and backlog", throughput, needs_any=("sends", "receives")),
    Job("latency", "Latency", latency, needs_any=("sends", "receives")),
    Job("throttling", "Throttling accuracy", throttling, needs=("dispatch",)),
    Job("load_balancing", "Load balancing", load_balancing, needs=("loadbalance",)),
    Job("delivery_gaps", "Delivery gaps after disruptions", delivery_gaps, needs=("receives",)),
    Job("correctness", "Correctness", correctness, needs=("receives",)),
    Job("fairness", "Fairness of shared subscriptions", fairness, needs=("receives",)),
)


@dataclass
class JobResult:
    """What the jobs made of one run: tables by name, and the jobs skipped with the reason."""

    context: Context
    tables: dict[str, Table]
    skipped: dict[str, str]


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
    return JobResult(ctx, tables, skipped)
