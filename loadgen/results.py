"""The end of a run: the events table, the checks, the manifest, OMB's result, the summary."""

from __future__ import annotations

import json
import platform
import shutil
import sys
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

import loadgen
from emubroker.traceschema.loadgen import SCHEMA_VERSION, EventRecord
from loadgen.aggregate import Aggregator
from loadgen.checks import CheckReport, merge_checks
from loadgen.control import ClusterLayout
from loadgen.durations import enc_hook
from loadgen.report import check_lines, final_lines, omb_result
from loadgen.trace.writer import TableWriter
from protocol.client import normalize_topic

if TYPE_CHECKING:
    from rich.console import Console

    from loadgen.messages import Final as FinalReport
    from loadgen.options import RunOptions
    from loadgen.scenario import Scenario
    from protocol.clock import Clock

__all__ = ["EXIT_LOSS", "EXIT_OK", "RunResult", "write_results"]

EXIT_OK = 0
EXIT_LOSS = 1


class RunResult(msgspec.Struct, frozen=True):
    run_id: str
    run_dir: str
    exit_code: int
    checks: CheckReport
    events: list[EventRecord]
    rows: dict[str, int]


class FinishedRun(Protocol):
    """What the end of a run reads of it (the runner's state of the run)."""

    scenario: Scenario
    options: RunOptions
    console: Console
    clock: Clock
    run_id: str
    run_dir: Path
    events: list[EventRecord]
    finals: dict[int, FinalReport]


def write_results(
    run: FinishedRun,
    layout: ClusterLayout,
    plans: Any,
    aggregator: Aggregator,
    started_ns: int,
    second_rows: int,
) -> RunResult:
    scenario, options = run.scenario, run.options
    produce, consume = bool(scenario.producers), bool(scenario.consumers)
    if run.events:
        events_writer = TableWriter(run.run_dir / "events", "events", prefix="runner")
        events_writer.submit_records(run.events)
        events_writer.close()
    subscriptions = {g.name: (normalize_topic(g.topic), g.subscription) for g in scenario.consumers}
    checks = merge_checks(
        [t for f in run.finals.values() for t in f.producers],
        [t for f in run.finals.values() for t in f.consumers],
        subscriptions,
        plans.producer_names,
    )
    finals = list(run.finals.values())
    rows: dict[str, int] = {"seconds": second_rows, "events": len(run.events)}
    for final in run.finals.values():
        for table, count in final.rows.items():
            rows[table] = rows.get(table, 0) + count
    totals = aggregator.totals()
    first = scenario.producers[0] if scenario.producers else None
    topics = {normalize_topic(g.topic) for g in scenario.producers}
    topics |= {normalize_topic(g.topic) for g in scenario.consumers}
    omb = omb_result(
        aggregator,
        workload=scenario.name,
        driver=f"loadgen-{options.client}",
        message_size=first.size if first else 0,
        topics=len(topics),
        partitions=max((t.partitions for t in scenario.topics), default=0),
        producers_per_topic=sum(g.count for g in scenario.producers) // max(len(topics), 1),
        consumers_per_topic=sum(g.count for g in scenario.consumers) // max(len(topics), 1),
    )
    (run.run_dir / "omb-result.json").write_text(json.dumps(omb, indent=2))
    if options.histogram_file:
        target = Path(options.histogram_file)
        shutil.copyfile(
            run.run_dir / ("latency-publish.hlog" if produce else "latency-e2e.hlog"), target
        )
        if produce and consume:
            shutil.copyfile(
                run.run_dir / "latency-e2e.hlog",
                target.with_name(f"{target.stem}-e2e{target.suffix}"),
            )
    lost = checks.lost
    exit_code = EXIT_LOSS if lost and not options.allow_loss else EXIT_OK
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "run_id": run.run_id,
        "loadgen_version": loadgen.__version__,
        "python": platform.python_version(),
        "client": options.client,
        "client_version": _version("pulsar-client")
        if options.client == "official"
        else _version("emubroker"),
        "command": options.command or sys.argv,
        "scenario_file": options.scenario_file,
        "scenario": msgspec.to_builtins(scenario, enc_hook=enc_hook),
        "seed": scenario.seed,
        "start_ns": aggregator.start_second * 1_000_000_000,
        "prepared_ns": started_ns,
        "end_ns": run.clock.wall_ns(),
        "workers": options.workers,
        "trace_sample": options.trace_sample,
        "cluster": msgspec.to_builtins(layout),
        "actors": msgspec.to_builtins(plans.actors),
        "tables": {table: {"path": table, "rows": count} for table, count in rows.items()},
        "totals": msgspec.to_builtins(totals),
        "first_send_ns": min((f.first_send_ns for f in finals if f.first_send_ns), default=None),
        "last_receive_ns": max(
            (f.last_receive_ns for f in finals if f.last_receive_ns), default=None
        ),
        "checks": msgspec.to_builtins(checks),
        "exit_code": exit_code,
    }
    (run.run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str))
    for line in [
        *final_lines(totals, produce=produce, consume=consume),
        *(check_lines(checks) if consume else []),
    ]:
        run.console.out(line, highlight=False)
    if lost and options.allow_loss:
        run.console.out(f"{lost:,} messages lost (allowed by --allow-loss)", highlight=False)
    run.console.out(f"traces: {run.run_dir}", highlight=False)
    return RunResult(run.run_id, str(run.run_dir), exit_code, checks, run.events, rows)


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None
