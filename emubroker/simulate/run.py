"""Running a simulation: brokers, stub and loadgen's traffic in one process, on a virtual clock.

:func:`run` hosts the scenario's cluster (:mod:`emubroker.simulate.cluster`) and runs loadgen's
workers as tasks of the same event loop (``loadgen.runner.run_in_process``), their clients
talking to the brokers over memory streams. Every wait goes through one clock:

- **virtual** (the default): a :class:`~emubroker.simulate.loop.VirtualClock`, the event
  loop's own clock, which trio jumps to the next deadline as soon as every task waits; a
  ten-minute experiment takes seconds;
- **real** (``virtual=False``): the same run on the host's clock, to compare against.

Determinism: a virtual run depends only on the scenario and the seed. Its clock is the loop's
``MockClock`` (sleepers due together wake in one batch of the loop), and
trio's scheduler is seeded from the seed (:mod:`emubroker.simulate.loop`). loadgen draws its
producers' schedules and keys from the scenario seed; the run id is derived from it; the wall
clock is ``[simulate] epoch`` plus virtual time; the brokers write their traces on the loop, not
in threads (a thread's write would let the virtual clock jump while it runs).

The run directory is a loadgen run directory (``manifest.json``, ``sends/``, ``receives/``,
``seconds/``, ``events/``) with the brokers' ``dispatch/`` and ``loadbalance/`` traces beside
them, which is what ``loadgen analyze`` reads.
"""

from __future__ import annotations

import hashlib
import io
import logging
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import pyarrow.parquet as pq
from rich.console import Console

from emubroker.naming import TopicName
from emubroker.simulate.cluster import (
    FIRST_SERVICE_PORT,
    FIRST_WEB_PORT,
    HOST,
    open_simulated_cluster,
)
from emubroker.simulate.control import SimulatedAdmin, SimulatedProcesses, SimulatedStubFaults
from emubroker.simulate.dashboard import serving_dashboard
from emubroker.simulate.loop import VirtualClock, run_loop
from emubroker.simulate.scenario import Simulation, SimulationError, load_simulation
from loadgen.control import BrokerInfo, ClusterControl, ClusterLayout
from loadgen.runner import RunOptions, RunResult, run_in_process
from protocol.client import normalize_topic
from protocol.clock import AnyioClock, Clock

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable

    from emubroker.config import BrokerConfig
    from emubroker.simulate.cluster import SimulatedCluster

__all__ = ["Decision", "SimulationResult", "decisions_of", "run", "trace_digests"]

log = logging.getLogger(__name__)

DECISION_EVENTS = ("shed", "split", "unload")
"""Load-balancer trace rows that are decisions (placements are answers to lookups)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """One load-balancer decision, from the trace.

    Attributes:
        at: Seconds since the run started (on its clock: virtual time for a virtual run).
        event: ``shed``, ``split`` or ``unload`` (the owner's side of a move).
        broker: The broker that wrote the row (the leader, or the unloading owner).
        strategy: Shedding strategy or split algorithm.
        bundle: ``tenant/namespace/0x..._0x...``.
        source_broker: The broker the bundle leaves.
        dest_broker: Where it goes, when named.
        reason: Why, as the strategy says.
    """

    at: float
    event: str
    broker: str
    strategy: str
    bundle: str
    source_broker: str
    dest_broker: str
    reason: str


@dataclass(frozen=True)
class SimulationResult:
    """What a simulation produced.

    Attributes:
        run_dir: The run directory (a loadgen run directory plus the brokers' traces).
        run: loadgen's result (checks of every message, rows written).
        decisions: The load balancer's decisions in the order they were made.
        simulated_seconds: Time the run covered on its clock.
        wall_seconds: Host time it took.
        traces: Every Parquet trace file of the run, relative to ``run_dir``.
    """

    run_dir: Path
    run: RunResult
    decisions: list[Decision]
    simulated_seconds: float
    wall_seconds: float
    traces: list[str] = field(default_factory=list)

    @property
    def speedup(self) -> float:
        """Simulated seconds per wall second."""
        return self.simulated_seconds / self.wall_seconds if self.wall_seconds else 0.0


def run(
    simulation: Simulation | str | Path,
    out: str | Path,
    *,
    seed: int | None = None,
    virtual: bool = True,
    console: Console | None = None,
    dashboard_port: int | None = None,
) -> SimulationResult:
    """Run a simulation to its end (blocking: it owns its event loop).

    Args:
        simulation: A checked :class:`Simulation` or the path of a scenario file.
        out: The run directory (created; traces of an earlier run there are replaced).
        seed: Overrides the scenario's ``seed``.
        virtual: On the virtual clock (default) or the host's.
        console: Where loadgen's progress lines go (default: nowhere).
        dashboard_port: Serve the live dashboard on this loopback port (0: a free one) and
            print its address first; real time only (a virtual run outpaces any viewer).

    Raises:
        SimulationError: The scenario is invalid or needs what a virtual clock cannot give.
        RunError: A worker failed.
    """
    if not isinstance(simulation, Simulation):
        simulation = load_simulation(simulation)
    if seed is not None:
        scenario = msgspec.structs.replace(simulation.scenario, seed=seed)
        simulation = Simulation(
            scenario=scenario,
            section=simulation.section,
            brokers=simulation.brokers,
            source=simulation.source,
        )
    run_dir = Path(out)
    _clear_traces(run_dir)
    console = console or Console(file=io.StringIO(), width=120)
    started = AnyioClock().now()
    if virtual and dashboard_port is not None:
        raise SimulationError("the live dashboard needs --real-time (a virtual clock outpaces it)")
    virtual_clock = VirtualClock(epoch=simulation.section.epoch) if virtual else None
    clock: Clock = virtual_clock or AnyioClock()
    result, simulated, start_ns = run_loop(
        _simulate,
        simulation,
        run_dir,
        clock,
        console,
        dashboard_port,
        clock=virtual_clock,
        seed=simulation.scenario.seed,
    )
    wall = AnyioClock().now() - started
    return SimulationResult(
        run_dir=run_dir,
        run=result,
        decisions=decisions_of(run_dir, epoch_ns=start_ns),
        simulated_seconds=simulated,
        wall_seconds=wall,
        traces=sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*.parquet")),
    )


async def _simulate(
    simulation: Simulation,
    run_dir: Path,
    clock: Clock,
    console: Console,
    dashboard_port: int | None,
) -> tuple[RunResult, float, int]:
    configs = [
        simulation.broker_config(
            index,
            brokerServicePort=FIRST_SERVICE_PORT + index,
            webServicePort=FIRST_WEB_PORT + index,
            emubrokerDispatchTraceDir=str(run_dir / "dispatch"),
            emubrokerLoadBalancerTraceDir=str(run_dir / "loadbalance"),
        )
        for index in range(len(simulation.brokers))
    ]
    begin, begin_ns = clock.now(), clock.wall_ns()
    result = await _run_cluster(simulation, configs, run_dir, clock, console, dashboard_port)
    return result, clock.now() - begin, begin_ns


async def _run_cluster(
    simulation: Simulation,
    configs: list[BrokerConfig],
    run_dir: Path,
    clock: Clock,
    console: Console,
    dashboard_port: int | None,
) -> RunResult:
    scenario = simulation.scenario
    async with (
        open_simulated_cluster(configs, clock=clock) as cluster,
        cluster.stub.open_local_client() as stub,
        _live_page(cluster, dashboard_port, console),
    ):
        for topic in scenario.topics:
            if topic.partitions:
                name = TopicName.parse(normalize_topic(topic.name))
                await cluster.brokers[0].topics.create_partitioned_topic(name, topic.partitions)
        layout = ClusterLayout(
            service_url=cluster.service_url,
            admin_url=None,
            brokers=[
                BrokerInfo(
                    name=f"{HOST}:{broker.config.webServicePort}",
                    service_url=broker.service_url,
                    admin_url="",
                )
                for broker in cluster.brokers
            ],
            started_by_loadgen=True,
            storage="simulated",
        )
        options = RunOptions(
            trace_dir=str(run_dir),
            scenario_file=simulation.source,
            command=["emubroker", "simulate", scenario.name, f"--seed={scenario.seed}"],
        )
        result = await run_in_process(
            scenario,
            options,
            console,
            clock=clock,
            layout=layout,
            connector=cluster.connect,
            run_id=_run_id(scenario.name, scenario.seed),
            control=ClusterControl(
                SimulatedAdmin(cluster), SimulatedProcesses(cluster), SimulatedStubFaults(stub)
            ),
        )
    return result


@asynccontextmanager
async def _live_page(
    cluster: SimulatedCluster, port: int | None, console: Console
) -> AsyncIterator[None]:
    """The live dashboard while the run lasts, when asked for (``dashboard_port``)."""
    if port is None:
        yield
        return
    async with serving_dashboard(cluster, port) as url:
        console.out(f"dashboard: {url}")
        yield


def _run_id(name: str, seed: int) -> str:
    digest = hashlib.sha256(f"{name}:{seed}".encode()).hexdigest()[:8]
    return f"sim-{name}-{seed}-{digest}"


def _clear_traces(run_dir: Path) -> None:
    # A run directory is reused run after run (determinism is checked that way): files of an
    # earlier run must not be mistaken for this one's.
    for table in ("sends", "receives", "seconds", "events", "dispatch", "loadbalance"):
        for path in (run_dir / table).glob("*.parquet"):
            path.unlink()


def decisions_of(run_dir: str | Path, *, epoch_ns: int = 0) -> list[Decision]:
    """The load-balancer decisions in a run directory's ``loadbalance/`` trace, in time order."""
    rows: list[tuple[int, int, int, Decision]] = []
    files = sorted(Path(run_dir, "loadbalance").glob("*.parquet"))
    columns = [
        "wall_ns",
        "event",
        "broker",
        "strategy",
        "bundle",
        "source_broker",
        "dest_broker",
        "reason",
    ]
    for file_index, path in enumerate(files):
        # One file as it is: `pq.read_table` would import pyarrow.dataset for its path
        # handling, a fifth of the CPU of a short idle simulation.
        table = pq.ParquetFile(path).read(columns=columns).to_pylist()
        for row_index, row in enumerate(table):
            if row["event"] not in DECISION_EVENTS:
                continue
            decision = Decision(
                at=(row["wall_ns"] - epoch_ns) / 1e9,
                event=row["event"],
                broker=row["broker"],
                strategy=row["strategy"],
                bundle=row["bundle"],
                source_broker=row["source_broker"],
                dest_broker=row["dest_broker"],
                reason=row["reason"],
            )
            rows.append((row["wall_ns"], file_index, row_index, decision))
    rows.sort(key=lambda r: r[:3])
    return [decision for *_, decision in rows]


def trace_digests(run_dir: str | Path, files: Iterable[str]) -> dict[str, str]:
    """SHA-256 of each file (relative to ``run_dir``)."""
    return {name: hashlib.sha256(Path(run_dir, name).read_bytes()).hexdigest() for name in files}
