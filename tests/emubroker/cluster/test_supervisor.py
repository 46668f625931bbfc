"""The supervisor with stand-in children (``fake_child.py``): start, deaths, restarts, stop order.

Real processes and a real control socket, so these are integration tests; they start no broker.
Restart back-off runs on a ``FakeClock``.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import psutil
import pytest

from emubroker.cluster import ClusterEvent, ClusterSpec, open_cluster
from emubroker.cluster.cli import _Output, _serve
from emubroker.cluster.control import KillBroker, StartBroker, StopCluster, call
from emubroker.cluster.state import (
    ChildStatus,
    ClusterState,
    ClusterStatus,
    RunDirLockedError,
    read_state,
    run_dir_in_use,
)
from emubroker.cluster.supervisor import Cluster
from emubroker.processes import ChildStartError
from protocol.clock import FakeClock
from tests.emubroker.cluster import evidence

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

FAKE = Path(__file__).with_name("fake_child.py")
# A guard only: every wait here ends as soon as a tiny process starts or exits.
GUARD = 30


@pytest.fixture
def children_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "children"
    directory.mkdir()
    monkeypatch.setenv("FAKE_CHILD_DIR", str(directory))
    return directory


@pytest.fixture
def python(tmp_path: Path) -> str:
    """An "interpreter" whose ``-m storage_stub`` / ``-m emubroker`` are the stand-ins."""
    wrapper = tmp_path / "fake-python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


def spec(tmp_path: Path, python: str, **changes: object) -> ClusterSpec:
    options: dict[str, object] = {
        "brokers": 3,
        "port": 7000,
        "admin_port": 9000,
        "stub_port": 3999,
        "run_dir": tmp_path / "run",
        "python": python,
    }
    options.update(changes)
    return ClusterSpec(**options)  # type: ignore[arg-type]


class Events:
    def __init__(self) -> None:
        self.send, self.receive = anyio.create_memory_object_stream[ClusterEvent](100)
        self.seen: list[ClusterEvent] = []
        self.emitted: list[tuple[float, ClusterEvent]] = []  # with when, for a failure's evidence

    def __call__(self, event: ClusterEvent) -> None:
        self.emitted.append((time.monotonic(), event))
        self.send.send_nowait(event)

    async def next(self, kind: str) -> ClusterEvent:
        with anyio.fail_after(GUARD):
            async for event in self.receive:
                self.seen.append(event)
                if event.event == kind:
                    return event
        raise AssertionError(f"no {kind} event: {self.seen}")


@asynccontextmanager
async def running(
    cluster_spec: ClusterSpec, clock: FakeClock | None = None
) -> AsyncIterator[tuple[Cluster, Events]]:
    events = Events()
    began = time.monotonic()
    with events.send, events.receive, anyio.fail_after(GUARD):
        async with open_cluster(cluster_spec, on_event=events, clock=clock) as cluster:
            try:
                yield cluster, events
            except BaseException:
                # Before the cluster stops: the processes as they were when the test failed.
                print(evidence.at_failure(cluster.state, events.emitted, began))
                raise


def stand_ins() -> list[psutil.Process]:
    """Stand-in children of this test process still running (none once a cluster stopped)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if any(str(FAKE) in part for part in child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            pass  # it exited while we looked
    return found


def alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers: only our own children could be zombies, and we reap them.
    return True


def starts(children_dir: Path) -> list[dict[str, object]]:
    """Every start of every stand-in: ``{"pid": ..., "ppid": ..., "sid": ..., "argv": [...]}``."""
    return [
        json.loads(line)
        for path in sorted(children_dir.glob("*.starts"))
        for line in path.read_text().splitlines()
    ]


def argv_of(children_dir: Path, name: str, start: int = -1) -> list[str]:
    lines = (children_dir / f"{name}.starts").read_text().splitlines()
    argv: list[str] = json.loads(lines[start])["argv"]
    return argv


async def test_brokers_start_with_their_ports_and_the_stubs_urls(
    tmp_path: Path, python: str, children_dir: Path
) -> None:
    async with running(spec(tmp_path, python, config="/etc/broker.conf")) as (cluster, _):
        state = cluster.state
        assert state.status is ClusterStatus.READY
        assert state.stub.url == "stub://127.0.0.1:3999"
        assert state.service_url == "pulsar://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002"
        assert [b.admin_url for b in state.brokers] == [
            "http://127.0.0.1:9000",
            "http://127.0.0.1:9001",
            "http://127.0.0.1:9002",
        ]
        assert all(b.status is ChildStatus.RUNNING and alive(b.pid) for b in state.brokers)
        argv = argv_of(children_dir, "7001")
        assert argv[:3] == ["-m", "emubroker", "broker"]
        assert argv[argv.index("--metadata-url") + 1] == "stub://127.0.0.1:3999"
        assert argv[argv.index("--bookie-url") + 1] == "stub://127.0.0.1:3999"
        assert argv[argv.index("--config") + 1] == "/etc/broker.conf"
        on_disk = read_state(tmp_path / "run")
        assert on_disk.brokers[2].pid == state.brokers[2].pid
        assert run_dir_in_use(tmp_path / "run")
        pids = [b.pid for b in state.brokers] + [state.stub.pid]
    assert not run_dir_in_use(tmp_path / "run")
    assert not any(map(alive, pids))
    assert len(starts(children_dir)) == 4
    assert stand_ins() == []
    assert read_state(tmp_path / "run").status is ClusterStatus.STOPPED


async def test_an_external_metadata_store_is_passed_to_every_broker(
    tmp_path: Path, python: str, children_dir: Path
) -> None:
    url = "etcd://127.0.0.1:2379"
    async with running(spec(tmp_path, python, brokers=2, metadata_url=url)) as (cluster, _):
        assert cluster.state.metadata_url == url
        for port in ("7000", "7001"):
            argv = argv_of(children_dir, port)
            assert argv[argv.index("--metadata-url") + 1] == url
            assert argv[argv.index("--bookie-url") + 1] == "stub://127.0.0.1:3999"


async def test_brokers_stop_before_the_stub(
    tmp_path: Path, python: str, children_dir: Path
) -> None:
    async with running(spec(tmp_path, python)):
        pass
    stub_stop = int((children_dir / "stub.stops").read_text())
    broker_stops = [int((children_dir / f"{p}.stops").read_text()) for p in (7000, 7001, 7002)]
    assert max(broker_stops) < stub_stop


class _Ready(_Output):
    """The CLI's output, which also tells the test that the cluster serves."""

    def __init__(self) -> None:
        super().__init__(as_json=True)
        self.served = anyio.Event()

    def ready(self, state: ClusterState) -> None:
        super().ready(state)
        self.served.set()


async def test_a_signal_stops_the_cluster_with_each_childs_last_lines_in_its_log(
    tmp_path: Path, python: str, children_dir: Path
) -> None:
    # As `emubroker cluster` serves: SIGTERM to the supervisor (here, this process) stops the
    # cluster. The brokers and the stub write a last line a moment after their SIGTERM: their
    # logs must have it, though the signal cancelled the tasks copying their output.
    for name in ("7000", "7001", "stub"):
        (children_dir / f"{name}.mode").write_text("farewell")
    output = _Ready()
    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_serve, spec(tmp_path, python, brokers=2), output)
            await output.served.wait()
            os.kill(os.getpid(), signal.SIGTERM)
    run_dir = tmp_path / "run"
    for log_name, child in (("broker-0", "7000"), ("broker-1", "7001"), ("stub", "stub")):
        assert f"{child} stopped: farewell" in (run_dir / f"{log_name}.log").read_text()
    assert read_state(run_dir).status is ClusterStatus.STOPPED


async def test_a_broker_that_cannot_start_fails_the_start_and_stops_the_rest(
    tmp_path: Path, python: str, children_dir: Path
) -> None:
    (children_dir / "7001.mode").write_text("exit 3")
    with pytest.raises(ChildStartError, match="broker 1 exited with status 3") as raised:
        async with running(spec(tmp_path, python)):
            pytest.fail("the cluster must not be ready")
    assert "told to fail" in str(raised.value)  # its last lines are quoted
    assert "broker-1.log" in str(raised.value)
    state = read_state(tmp_path / "run")
    assert state.status is ClusterStatus.FAILED
    assert (children_dir / "stub.stops").exists()  # stopped with SIGTERM
    assert stand_ins() == []
    assert not run_dir_in_use(tmp_path / "run")


async def test_a_second_supervisor_is_refused_the_run_directory(
    tmp_path: Path, python: str, children_dir: Path
) -> None:
    async with running(spec(tmp_path, python, brokers=1)):
        with pytest.raises(RunDirLockedError, match="already running"):
            async with running(spec(tmp_path, python, brokers=1)):
                pass


async def test_a_killed_broker_is_reported_and_started_again_on_request(
    tmp_path: Path, python: str, children_dir: Path
) -> None:
    async with running(spec(tmp_path, python)) as (cluster, events):
        broker = cluster.state.brokers[1]
        old_pid = broker.pid
        reply = await cluster.handle(KillBroker("127.0.0.1:9001", "KILL"))
        assert reply.ok, reply
        died = await events.next("broker-died")
        assert died.broker == 1
        assert "killed by SIGKILL" in died.message
        assert broker.status is ChildStatus.DEAD
        assert broker.exit_code == -9
        assert read_state(tmp_path / "run").brokers[1].status is ChildStatus.DEAD
        refused = await cluster.handle(KillBroker("1", "KILL"))
        assert not refused.ok
        assert "not running" in refused.message

        reply = await cluster.handle(StartBroker("pulsar://127.0.0.1:7001"))
        assert reply.ok, reply
        assert broker.status is ChildStatus.RUNNING
        assert broker.pid != old_pid
        assert (broker.port, broker.admin_port) == (7001, 9001)
        again = await cluster.handle(StartBroker("1"))
        assert not again.ok
        assert "running" in again.message


async def test_requests_naming_no_broker_or_signal_are_refused(
    tmp_path: Path, python: str, children_dir: Path
) -> None:
    async with running(spec(tmp_path, python, brokers=2)) as (cluster, _):
        unknown = await cluster.handle(KillBroker("5"))
        assert not unknown.ok
        assert "no broker '5'" in unknown.message
        assert "0 (127.0.0.1:7000, 127.0.0.1:9000)" in unknown.message
        bad_signal = await cluster.handle(KillBroker("0", "NOPE"))
        assert not bad_signal.ok
        assert "unknown signal" in bad_signal.message


async def test_with_restart_a_dead_broker_comes_back_at_once_then_backs_off(
    tmp_path: Path, python: str, children_dir: Path
) -> None:
    clock = FakeClock()
    async with running(spec(tmp_path, python, restart=True), clock) as (cluster, events):
        broker = cluster.state.brokers[2]
        await cluster.handle(KillBroker("2", "KILL"))
        await events.next("broker-died")
        restarted = await events.next("broker-restarted")
        assert restarted.broker == 2
        assert broker.restarts == 1
        assert (broker.port, broker.admin_port) == (7002, 9002)
        assert argv_of(children_dir, "7002", 0) == argv_of(children_dir, "7002", 1)

        # Dead again soon after its restart: the next restart waits a second.
        await cluster.handle(KillBroker("2", "KILL"))
        await events.next("broker-died")
        await anyio.wait_all_tasks_blocked()
        assert broker.status is ChildStatus.DEAD
        assert clock.statistics().next_deadline == pytest.approx(clock.now() + 1.0)
        await clock.advance(1.0)
        await events.next("broker-restarted")
        assert broker.restarts == 2
        assert broker.status is ChildStatus.RUNNING


async def test_a_broker_that_keeps_failing_to_restart_is_retried_with_back_off(
    tmp_path: Path, python: str, children_dir: Path
) -> None:
    clock = FakeClock()
    async with running(spec(tmp_path, python, brokers=1, restart=True), clock) as (cluster, ev):
        (children_dir / "7000.mode").write_text("exit 1")
        await cluster.handle(KillBroker("0", "KILL"))
        failed = await ev.next("restart-failed")
        assert "exited with status 1" in failed.message
        await anyio.wait_all_tasks_blocked()
        assert clock.statistics().next_deadline == pytest.approx(clock.now() + 1.0)
        (children_dir / "7000.mode").unlink()
        await clock.advance(1.0)
        await ev.next("broker-restarted")
        assert cluster.state.brokers[0].status is ChildStatus.RUNNING


async def test_stop_over_the_control_socket(
    tmp_path: Path, python: str, children_dir: Path
) -> None:
    async with running(spec(tmp_path, python, brokers=1)) as (cluster, _):
        reply = await call(tmp_path / "run" / "control.sock", StopCluster())
        assert reply.ok
        with anyio.fail_after(GUARD):
            await cluster.stop_requested.wait()


async def test_a_broker_started_by_hand_during_back_off_is_not_started_twice(
    tmp_path: Path, python: str, children_dir: Path
) -> None:
    clock = FakeClock()
    async with running(spec(tmp_path, python, brokers=1, restart=True), clock) as (cluster, ev):
        await cluster.handle(KillBroker("0", "KILL"))
        await ev.next("broker-restarted")
        await cluster.handle(KillBroker("0", "KILL"))
        await ev.next("broker-died")
        await anyio.wait_all_tasks_blocked()  # the restart waits a second
        assert (await cluster.handle(StartBroker("0"))).ok
        await clock.advance(1.0)
        await anyio.wait_all_tasks_blocked()
        assert len((children_dir / "7000.starts").read_text().splitlines()) == 3
        assert cluster.state.brokers[0].status is ChildStatus.RUNNING
        assert cluster.state.brokers[0].restarts == 1
        assert [e.event for e in ev.seen].count("broker-restarted") == 1


async def test_the_stub_is_killed_and_started_on_request_with_its_brokers(
    tmp_path: Path, python: str, children_dir: Path
) -> None:
    async with running(spec(tmp_path, python, brokers=2)) as (cluster, events):
        stub = cluster.state.stub
        old_stub = stub.pid
        reply = await cluster.handle(KillBroker("stub", "KILL"))
        assert reply.ok, reply
        assert reply.message == f"sent SIGKILL to the storage-stub (pid {old_stub})"
        died = await events.next("stub-died")
        assert "killed by SIGKILL" in died.message
        assert stub.status is ChildStatus.DEAD
        assert not (await cluster.handle(KillBroker("stub"))).ok  # not running
        # The brokers' own session loss stops them (here: by hand) while the stub is away.
        assert (await cluster.handle(KillBroker("1", "KILL"))).ok
        await events.next("broker-died")
        old_broker_0 = cluster.state.brokers[0].pid

        reply = await cluster.handle(StartBroker("stub"))
        assert reply.ok, reply
        assert reply.message.endswith("; 2 of 2 brokers run")
        assert stub.status is ChildStatus.RUNNING
        assert stub.pid != old_stub
        assert argv_of(children_dir, "stub", 0) == argv_of(children_dir, "stub", 1)  # its port
        # In memory, the stub came back empty: a loud warning, and every broker started again.
        lost = await events.next("stub-data-lost")
        assert lost.level == "warning"
        assert lost.message.startswith("the storage-stub kept everything in memory")
        assert not alive(old_broker_0)
        assert all(b.status is ChildStatus.RUNNING for b in cluster.state.brokers)
        assert len((children_dir / "7000.starts").read_text().splitlines()) == 2
        assert len((children_dir / "7001.starts").read_text().splitlines()) == 2
        assert not (await cluster.handle(StartBroker("stub"))).ok  # running


async def test_with_restart_an_in_memory_stub_that_dies_restarts_the_cluster_loudly(
    tmp_path: Path, python: str, children_dir: Path
) -> None:
    async with running(spec(tmp_path, python, brokers=2, restart=True)) as (cluster, events):
        old = [b.pid for b in cluster.state.brokers]
        assert (await cluster.handle(KillBroker("stub", "KILL"))).ok
        await events.next("stub-died")
        await events.next("stub-data-lost")
        await events.next("stub-restarted")
        await events.next("broker-restarted")
        await events.next("broker-restarted")
        brokers = cluster.state.brokers
        assert all(b.status is ChildStatus.RUNNING for b in brokers)
        assert [b.restarts for b in brokers] == [1, 1]
        assert [b.restarts for b in read_state(tmp_path / "run").brokers] == [1, 1]
        assert not any(alive(pid) for pid in old)
        # The brokers were killed for the restart: no death of theirs is reported.
        assert "broker-died" not in [e.event for e in events.seen]
        assert cluster.state.stub.restarts == 1


async def test_with_restart_a_durable_stub_comes_back_under_running_brokers(
    tmp_path: Path, python: str, children_dir: Path
) -> None:
    data = spec(tmp_path, python, brokers=2, restart=True, data_dir=str(tmp_path / "data"))
    async with running(data) as (cluster, events):
        pids = [b.pid for b in cluster.state.brokers]
        assert (await cluster.handle(KillBroker("stub", "KILL"))).ok
        await events.next("stub-restarted")
        assert [b.pid for b in cluster.state.brokers] == pids
        assert all(alive(pid) for pid in pids)
        assert "stub-data-lost" not in [e.event for e in events.seen]
