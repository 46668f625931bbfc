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
import secrets
import signal
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Final

import aiohttp
import anyio
import msgspec
from anyio.abc import TaskGroup
from rich.console import Console
from rich.live import Live

from emubroker.traceschema.loadgen import EventRecord
from loadgen.aggregate import Aggregator, GroupInfo
from loadgen.control import AdminRest, ClusterControl, ClusterLayout, ControlError
from loadgen.durations import enc_hook
from loadgen.events import (
    CLUSTER_START_ACTIONS,
    STUB,
    PauseConsumers,
    ResumeConsumers,
    event_target,
)
from loadgen.inprocess import open_inprocess_workers
from loadgen.local import (
    ClusterProcess,
    ClusterStartError,
    LocalCluster,
    StubFaultsClient,
    start_local_cluster,
)
from loadgen.messages import (
    Final as FinalReport,
)
from loadgen.messages import (
    Go,
    Pause,
    ProducersDone,
    Resume,
    Stop,
    StopProducers,
    Tick,
    WorkerPlan,
)
from loadgen.options import RunOptions
from loadgen.plans import build_plans
from loadgen.pool import WorkerError, WorkerLink, open_workers
from loadgen.report import dashboard, perf_lines
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

TICK_GRACE: Final = 1.2
"""Seconds after a second ends before the console counts it (the workers' ticks are in)."""


class RunError(Exception):
    """The run could not be done; `exit_code` says which kind of failure."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _new_run_id(clock: Clock) -> str:
    stamp = datetime.fromtimestamp(clock.wall_ns() / 1e9, UTC)
    return f"{stamp:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def _phase_at(scenario: Scenario) -> Callable[[float], str]:
    def phase_at(offset: float) -> str:
        start = 0.0
        for phase in scenario.phases:
            if offset < start + phase.duration:
                return phase.name
            start += phase.duration
        return "drain"

    return phase_at


class _Run:
    """The state of one run while it goes."""

    def __init__(
        self,
        scenario: Scenario,
        options: RunOptions,
        console: Console,
        clock: Clock,
        run_id: str | None = None,
    ) -> None:
        self.scenario = scenario
        self.options = options
        self.console = console
        self.clock = clock
        self.run_id = run_id or _new_run_id(clock)
        self.run_dir = Path(options.trace_dir or f"runs/{self.run_id}")
        self.events: list[EventRecord] = []
        self.event_lines: list[str] = []
        self.done: dict[int, ProducersDone] = {}
        self.finals: dict[int, FinalReport] = {}
        self.workers: Sequence[WorkerLink] = []
        self.stopping = False
        self.traffic_end_ns: int | None = None  # the schedule's end, or when it was stopped

    def layout_from_scenario(self) -> ClusterLayout:
        cluster = self.scenario.cluster
        assert cluster.service_url is not None
        return ClusterLayout(service_url=cluster.service_url, admin_url=cluster.admin_url)

    async def check_reachable(self, layout: ClusterLayout) -> None:
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

    async def broadcast(self, message: Any) -> None:
        for worker in self.workers:
            await worker.send(message)

    async def listen(self, worker: WorkerLink, aggregator: Aggregator) -> None:
        while worker.index not in self.finals:
            match await worker.receive():
                case Tick() as tick:
                    aggregator.add(tick)
                case ProducersDone() as done:
                    self.done[worker.index] = done
                case FinalReport() as final:
                    self.finals[worker.index] = final
                case _:
                    pass

    async def fire_events(self, control: ClusterControl, start: float, start_ns: int) -> None:
        async with anyio.create_task_group() as tg:
            for index, event in enumerate(sorted(self.scenario.events, key=lambda e: e.at)):
                await self.clock.sleep_until(start + event.at)
                if self.stopping:
                    return
                fired = self.clock.wall_ns()
                try:
                    match event:
                        case PauseConsumers(group=group, duration=duration):
                            await self.broadcast(Pause(group=group))
                            if duration is not None:
                                tg.start_soon(self._resume_later, group, duration)
                            detail = "paused"
                        case ResumeConsumers(group=group):
                            await self.broadcast(Resume(group=group))
                            detail = "resumed"
                        case _:
                            detail = await control.apply(event)
                    outcome = "ok"
                except (ControlError, ClusterStartError, ValueError, OSError) as exc:
                    outcome, detail = "error", str(exc)
                record = EventRecord(
                    run_id=self.run_id,
                    index=index,
                    at_s=float(event.at),
                    action=type(event).__name__,
                    target=event_target(event),
                    params=msgspec.json.encode(event, enc_hook=enc_hook).decode(),
                    fired_ns=fired,
                    finished_ns=self.clock.wall_ns(),
                    outcome=outcome,
                    detail=detail,
                )
                self.events.append(record)
                offset = (fired - start_ns) / 1e9
                line = f"{offset:7.2f}s {record.action} {record.target}: {outcome} {detail}"
                self.event_lines.append(line)
                if not self.options.dashboard:
                    self.console.out(f"event {line}", highlight=False)

    async def _resume_later(self, group: str, delay: float) -> None:
        await self.clock.sleep(delay)
        await self.broadcast(Resume(group=group))

    async def show(
        self, aggregator: Aggregator, start: float, produce: bool, consume: bool
    ) -> None:
        # Seconds are summed once every worker has reported them, a moment after they end.
        await self.clock.sleep_until(start + TICK_GRACE)
        aggregator.take_interval()
        if self.options.dashboard:
            with Live(console=self.console, refresh_per_second=2, transient=False) as live:
                while True:
                    live.update(dashboard(aggregator, self.event_lines, f"loadgen {self.run_id}"))
                    await self.clock.sleep(1.0)
        while True:
            await self.clock.sleep(self.options.stats_interval)
            for line in perf_lines(aggregator.take_interval(), produce=produce, consume=consume):
                self.console.out(line, highlight=False)

    async def watch_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signals reach the main thread only (a run started from another thread)
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                if self.stopping:
                    continue
                self.stopping = True
                self.traffic_end_ns = self.clock.wall_ns()
                self.console.out(
                    "stopping: finishing sends and draining consumers", highlight=False
                )
                await self.broadcast(StopProducers())

    def ends(self, start_ns: int) -> tuple[float, float]:
        """When production and consumption ended, in seconds after `start_ns`.

        Their messages are a rate over the time up to there (`Aggregator.close_all`).

        Production ended when the producers stopped sending or got their last receipt,
        whichever was later; consumption with the last delivery, but not before the traffic
        ended (a consumer that got nothing at the end was still measuring).
        """
        finals = self.finals.values()
        produce_end = max((f.produce_end_ns for f in finals if f.produce_end_ns), default=None)
        traffic_end = produce_end or self.traffic_end_ns or self.clock.wall_ns()
        last_receive = max((f.last_receive_ns for f in finals if f.last_receive_ns), default=0)
        consume_end = max(traffic_end, last_receive)
        return (
            ((produce_end or traffic_end) - start_ns) / 1e9,
            (consume_end - start_ns) / 1e9,
        )

    def drained(self, aggregator: Aggregator) -> bool:
        acked_by_topic: dict[str, int] = {}
        for done in self.done.values():
            for group, acked in done.acked.items():
                topic = aggregator.groups[("produce", group)].topic
                acked_by_topic[topic] = acked_by_topic.get(topic, 0) + acked
        for (role, group), info in aggregator.groups.items():
            if role == "consume" and aggregator.cumulative.get(
                (role, group), 0
            ) < acked_by_topic.get(info.topic, 0):
                return False
        return True


async def run_scenario(
    scenario: Scenario, options: RunOptions, console: Console, *, clock: Clock | None = None
) -> RunResult:
    """Run `scenario`; see the module docstring.

    Raises:
        RunError: the cluster could not be started or reached, or a worker failed.
    """
    run = _Run(scenario, options, console, clock or AnyioClock())
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


async def _run_on_cluster(run: _Run, console: Console, output: TaskGroup) -> RunResult:
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
            layout = run.layout_from_scenario()
        await run.check_reachable(layout)
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
    run = _Run(scenario, options, console, clock, run_id)
    run.run_dir.mkdir(parents=True, exist_ok=True)  # once, before the run
    workers = partial(_inprocess_workers, clock=clock, connector=connector)
    return await _run(run, layout, control or ClusterControl(None), workers, connector)


def _inprocess_workers(
    plans: list[WorkerPlan], log_dir: Path, *, clock: Clock, connector: Connector
) -> AbstractAsyncContextManager[Sequence[WorkerLink]]:
    return open_inprocess_workers(plans, clock=clock, connector=connector)


async def _run(
    run: _Run,
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
    run: _Run, aggregator: Aggregator, control: ClusterControl, start: float, start_ns: int
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
    run: _Run,
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
