"""Running a scenario: the composition root of loadgen.

`run_scenario` starts (or finds) the cluster, creates the partitioned topics, starts the worker
processes with their plans, starts them all at one wall-clock second, fires the timed events,
shows progress, waits for the producers to finish and the consumers to drain, then writes the
run directory:

    RUN_DIR/manifest.json        scenario, versions, seeds, cluster layout, actors, results
    RUN_DIR/sends/ receives/     per-message traces (each worker writes its own files)
    RUN_DIR/seconds/ events/     per-second aggregates and the event timeline
    RUN_DIR/omb-result.json      the OpenMessaging Benchmark result format
    RUN_DIR/latency-publish.hlog, latency-e2e.hlog   HdrHistogram interval logs
    RUN_DIR/logs/                worker (and started brokers') output
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from functools import partial
from pathlib import Path
from typing import Final

import aiohttp
import anyio
from anyio.abc import TaskGroup
from rich.console import Console

from loadgen.aggregate import Aggregator, GroupInfo
from loadgen.control import AdminRest, ClusterControl, ClusterLayout
from loadgen.events import (
    CLUSTER_START_ACTIONS,
    STUB,
)
from loadgen.inprocess import open_inprocess_workers
from loadgen.live_run import LiveRun
from loadgen.local import (
    ClusterProcess,
    ClusterStartError,
    LocalCluster,
    StubFaultsClient,
    start_local_cluster,
)
from loadgen.messages import (
    Go,
    Stop,
    StopProducers,
    WorkerPlan,
)
from loadgen.options import RunOptions
from loadgen.plans import build_plans
from loadgen.pool import WorkerError, WorkerLink, open_workers
from loadgen.results import RunResult, write_results
from loadgen.scenario import Scenario
from loadgen.topics import TopicsError, prepare_topics
from loadgen.trace.writer import TableWriter
from protocol.client import Connector, normalize_topic
from protocol.clock import AnyioClock, Clock

__all__ = ["RunError", "RunOptions", "RunResult", "run_in_process", "run_scenario"]

WorkersOpener = Callable[
    [list[WorkerPlan], Path], AbstractAsyncContextManager[Sequence[WorkerLink]]
]
"""Starts the workers of a run (processes by default) and yields them once `Ready`."""

EXIT_USAGE: Final = 2
EXIT_CLUSTER: Final = 3
EXIT_FAILED: Final = 4

START_DELAY: Final = 0.5
"""Seconds between `Go` and the first send: every worker must have the message by then."""

FINAL_TIMEOUT: Final = 60.0


class RunError(Exception):
    """The run could not be done; `exit_code` says which kind of failure."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _phase_at(scenario: Scenario) -> Callable[[float], str]:
    def phase_at(offset: float) -> str:
        start = 0.0
        for phase in scenario.phases:
            if offset < start + phase.duration:
                return phase.name
            start += phase.duration
        return "drain"

    return phase_at


def _layout_from_scenario(scenario: Scenario) -> ClusterLayout:
    cluster = scenario.cluster
    assert cluster.service_url is not None
    return ClusterLayout(service_url=cluster.service_url, admin_url=cluster.admin_url)


async def _check_reachable(layout: ClusterLayout) -> None:
    host_port = layout.service_url.split("://", 1)[-1].split(",")[0].rstrip("/")
    host, _, port = host_port.rpartition(":")
    try:
        with anyio.fail_after(5):
            stream = await anyio.connect_tcp(host, int(port))
        await stream.aclose()
    except (OSError, TimeoutError, ValueError) as exc:
        raise RunError(
            f"cannot reach the cluster at {layout.service_url}: {exc}", EXIT_CLUSTER
        ) from None


async def run_scenario(
    scenario: Scenario, options: RunOptions, console: Console, *, clock: Clock | None = None
) -> RunResult:
    """Run `scenario`; see the module docstring.

    Raises:
        RunError: the cluster could not be started or reached, or a worker failed.
    """
    run = LiveRun(scenario, options, console, clock or AnyioClock())
    run.run_dir.mkdir(parents=True, exist_ok=True)
    try:
        # The started processes' output is copied to their logs by tasks of this group; those
        # end once the processes exit (`aclose` stops them before the group closes).
        async with anyio.create_task_group() as output:
            result = await _run_on_cluster(run, console, output)
    except BaseExceptionGroup as group:
        # The run's own error, beside copiers that only had to end: raise it plainly.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    return result


async def _run_on_cluster(run: LiveRun, console: Console, output: TaskGroup) -> RunResult:
    """The run on the cluster the scenario names, or on one it starts (and stops)."""
    scenario = run.scenario
    local: LocalCluster | ClusterProcess | None = None
    try:
        if scenario.cluster.start is not None:
            try:
                local = start_local_cluster(
                    scenario.cluster.start,
                    run.run_dir,
                    run.clock,
                    stub_process=any(
                        isinstance(event, CLUSTER_START_ACTIONS) and event.broker == STUB
                        for event in scenario.events
                    ),
                )
                layout = await local.launch(output)
            except ClusterStartError as exc:
                raise RunError(f"cannot start the cluster: {exc}", EXIT_CLUSTER) from None
            what = "broker" if len(layout.brokers) == 1 else f"cluster of {len(layout.brokers)}"
            console.out(
                f"started a local {what}: {layout.service_url} (admin {layout.admin_url})",
                highlight=False,
            )
        else:
            layout = _layout_from_scenario(scenario)
        await _check_reachable(layout)
        async with aiohttp.ClientSession() as session:
            admin = AdminRest(layout.admin_url, session) if layout.admin_url else None
            stub = StubFaultsClient(layout.stub_url, run.clock) if layout.stub_url else None
            control = ClusterControl(admin, local, stub)
            return await _run(run, layout, control)
    finally:
        if local is not None:
            await local.aclose()


async def run_in_process(
    scenario: Scenario,
    options: RunOptions,
    console: Console,
    *,
    clock: Clock,
    layout: ClusterLayout,
    connector: Connector,
    run_id: str,
    control: ClusterControl | None = None,
) -> RunResult:
    """Run `scenario` with its workers as tasks of this process (`loadgen.inprocess`).

    For a cluster this process hosts (the simulator): the topics must exist already, the
    workers' clients reach the brokers through `connector`, and every wait goes through
    `clock`, so on a virtual clock the whole run is virtual. `run_id` names the run (a virtual
    run must not draw it at random: it is in every trace row). `control` carries out the
    cluster events (the host's own, in its process); without it only consumer pauses fire.

    Raises:
        RunError: a worker failed.
    """
    run = LiveRun(scenario, options, console, clock, run_id)
    run.run_dir.mkdir(parents=True, exist_ok=True)  # once, before the run
    workers = partial(_inprocess_workers, clock=clock, connector=connector)
    return await _run(run, layout, control or ClusterControl(None), workers, connector)


def _inprocess_workers(
    plans: list[WorkerPlan], log_dir: Path, *, clock: Clock, connector: Connector
) -> AbstractAsyncContextManager[Sequence[WorkerLink]]:
    return open_inprocess_workers(plans, clock=clock, connector=connector)


async def _run(
    run: LiveRun,
    layout: ClusterLayout,
    control: ClusterControl,
    open_run_workers: WorkersOpener = open_workers,
    connector: Connector | None = None,
) -> RunResult:
    """The run itself.

    `connector` opens the runner's own connections to the brokers (TCP by default), which
    learn the topics' partitions.
    """
    scenario, options, clock = run.scenario, run.options, run.clock
    try:
        partitions = await prepare_topics(
            scenario, layout.service_url, control.admin, clock=clock, connector=connector
        )
    except TopicsError as exc:
        raise RunError(f"preparing the topics failed: {exc}", EXIT_CLUSTER) from None
    plans = build_plans(
        scenario,
        run_id=run.run_id,
        workers=options.workers,
        service_url=layout.service_url,
        client=options.client,
        trace_dir=str(run.run_dir),
        trace_sample=options.trace_sample,
        partitions=partitions,
    )
    groups = {
        ("produce", g.name): GroupInfo("produce", g.name, normalize_topic(g.topic))
        for g in scenario.producers
    }
    groups |= {
        ("consume", g.name): GroupInfo("consume", g.name, normalize_topic(g.topic), g.subscription)
        for g in scenario.consumers
    }
    seconds = TableWriter(run.run_dir / "seconds", "seconds", prefix="runner")
    hlog_paths = (run.run_dir / "latency-publish.hlog", run.run_dir / "latency-e2e.hlog")
    started_ns = clock.wall_ns()
    with hlog_paths[0].open("w") as publish_log, hlog_paths[1].open("w") as e2e_log:
        try:
            async with open_run_workers(plans.workers, run.run_dir / "logs") as workers:
                run.workers = workers
                start_ns = (int(clock.wall_ns() / 1e9 + START_DELAY) + 1) * 1_000_000_000
                start = clock.now() + (start_ns - clock.wall_ns()) / 1e9
                aggregator = Aggregator(
                    run.run_id,
                    groups,
                    workers=len(workers),
                    start_second=start_ns // 1_000_000_000,
                    warmup=scenario.warmup,
                    phase_at=_phase_at(scenario),
                    write_rows=seconds.submit_records,
                    hlogs=(publish_log, e2e_log),
                )
                await run.broadcast(Go(start_ns=start_ns))
                await _drive(run, aggregator, control, start, start_ns)
        except WorkerError as exc:
            seconds.close()
            raise RunError(str(exc), EXIT_FAILED) from None
        aggregator.close_all(*run.ends(start_ns))
    seconds.close()
    return write_results(run, layout, plans, aggregator, started_ns, seconds.rows_written)


async def _drive(
    run: LiveRun, aggregator: Aggregator, control: ClusterControl, start: float, start_ns: int
) -> None:
    scenario, _clock = run.scenario, run.clock
    produce, consume = bool(scenario.producers), bool(scenario.consumers)
    try:
        await _drive_tasks(run, aggregator, control, start, start_ns, produce, consume)
    except BaseExceptionGroup as group:
        # A worker failing is the run failing: say why, plainly (the rest are consequences).
        failed = group.subgroup(WorkerError)
        if failed is None:
            raise
        first: BaseException = failed
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None


async def _drive_tasks(
    run: LiveRun,
    aggregator: Aggregator,
    control: ClusterControl,
    start: float,
    start_ns: int,
    produce: bool,
    consume: bool,
) -> None:
    scenario, clock = run.scenario, run.clock
    async with anyio.create_task_group() as tg:
        for worker in run.workers:
            tg.start_soon(run.listen, worker, aggregator)
        tg.start_soon(run.fire_events, control, start, start_ns)
        tg.start_soon(run.show, aggregator, start, produce, consume)
        tg.start_soon(run.watch_signals)
        end = start + scenario.duration
        limited = bool(scenario.producers) and all(g.messages for g in scenario.producers)
        # A run ends at its scheduled end; one without an end when its producers reach their
        # message limits; either one earlier on Ctrl-C.
        while not run.stopping and clock.now() < end:
            if limited and len(run.done) == len(run.workers):
                break
            await clock.sleep(0.1)
        if run.traffic_end_ns is None:  # the schedule's end, rather than this poll's
            run.traffic_end_ns = clock.wall_ns()
            if math.isfinite(scenario.duration):
                scheduled_end = start_ns + round(scenario.duration * 1e9)
                run.traffic_end_ns = min(run.traffic_end_ns, scheduled_end)
        await run.broadcast(StopProducers())
        while len(run.done) < len(run.workers):
            await clock.sleep(0.1)
        if produce:
            drain_until = clock.now() + scenario.drain_timeout
            while not run.drained(aggregator) and clock.now() < drain_until:
                await clock.sleep(0.2)
        run.stopping = True
        await run.broadcast(Stop())
        with anyio.fail_after(FINAL_TIMEOUT):
            while len(run.finals) < len(run.workers):
                await clock.sleep(0.05)
        tg.cancel_scope.cancel()
