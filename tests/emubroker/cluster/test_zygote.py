"""Brokers forked from the zygote: separate processes, and exec'd when there is no zygote.

The stand-in zygote (``fake_child.py`` as ``-m emubroker.zygote``) runs the real fork loop
(``emubroker.processes.forking``) with stand-in brokers as its children.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import anyio
import psutil
import pytest

from emubroker.cluster.control import KillBroker, StartBroker
from emubroker.cluster.state import ChildStatus
from protocol.clock import FakeClock
from tests.emubroker.cluster.test_supervisor import (
    GUARD,
    alive,
    argv_of,
    children_dir,
    python,
    running,
    spec,
    stand_ins,
)

__all__ = ["children_dir", "python"]  # fixtures, used by name

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def zygote_of(pid: int | None) -> psutil.Process:
    assert pid is not None
    parent = psutil.Process(pid).parent()
    assert parent is not None
    assert "emubroker.zygote" in parent.cmdline()
    return parent


def dead(pid: int | None) -> bool:
    """Gone, or a zombie that init has yet to reap (a dead zygote's children are init's)."""
    assert pid is not None
    for _ in range(GUARD * 100):
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.01)  # a bounded poll: SIGKILL takes effect when the kernel schedules it
    return False


async def test_brokers_fork_from_one_zygote_each_a_process_of_its_own(
    tmp_path: Path, python: str, children_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with running(spec(tmp_path, python)) as (cluster, events):
        brokers = cluster.state.brokers
        zygote = zygote_of(brokers[0].pid)
        assert zygote.ppid() == os.getpid()
        assert {zygote_of(b.pid).pid for b in brokers} == {zygote.pid}
        for broker in brokers:
            assert broker.pid is not None
            assert os.getsid(broker.pid) == broker.pid  # a session of its own, as exec'd
        assert argv_of(children_dir, "7002")[:3] == ["-m", "emubroker", "broker"]
        assert (tmp_path / "run" / "broker-2.log").read_text().startswith("starting up\n")

        reply = await cluster.handle(KillBroker("1", "KILL"))
        assert reply.ok, reply
        died = await events.next("broker-died")
        assert "killed by SIGKILL" in died.message
        assert brokers[1].exit_code == -9
        assert alive(brokers[0].pid)
        assert alive(brokers[2].pid)

        reply = await cluster.handle(StartBroker("1"))
        assert reply.ok, reply
        assert zygote_of(brokers[1].pid).pid == zygote.pid  # forked again
        reply = await cluster.handle(KillBroker("1", "TERM"))
        assert reply.ok, reply
        died = await events.next("broker-died")
        assert "exited with status 0" in died.message  # its SIGTERM handler's sys.exit(0)
    assert stand_ins() == []  # the zygote stopped with the cluster
    assert not zygote.is_running()
    assert "zygote exited" not in caplog.text  # closed, not dead
    assert "killing" not in caplog.text


async def test_without_a_zygote_brokers_are_execd(
    tmp_path: Path, python: str, children_dir: Path
) -> None:
    (children_dir / "zygote.mode").write_text("exit 1")
    async with running(spec(tmp_path, python, brokers=2)) as (cluster, _):
        assert all(b.status is ChildStatus.RUNNING for b in cluster.state.brokers)
        for broker in cluster.state.brokers:
            assert broker.pid is not None
            assert psutil.Process(broker.pid).ppid() == os.getpid()
    assert "the zygote was told to fail" in (tmp_path / "run" / "zygote.log").read_text()
    assert stand_ins() == []


async def test_a_zygote_that_dies_takes_its_brokers_and_restarts_exec_them(
    tmp_path: Path, python: str, children_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spec_ = spec(tmp_path, python, brokers=2, restart=True)
    async with running(spec_, FakeClock()) as (cluster, events):
        brokers = cluster.state.brokers
        old = [b.pid for b in brokers]
        zygote = zygote_of(old[0])
        zygote.send_signal(signal.SIGKILL)
        died = [await events.next("broker-died") for _ in brokers]
        assert all("killed by SIGKILL" in event.message for event in died)
        assert all(map(dead, old))
        assert "the zygote exited" in caplog.text
        assert "killing the 2 processes the zygote forked" in caplog.text
        for _ in brokers:
            await events.next("broker-restarted")
        for broker in brokers:
            assert broker.status is ChildStatus.RUNNING
            assert broker.pid is not None
            assert psutil.Process(broker.pid).ppid() == os.getpid()  # exec'd
    assert stand_ins() == []


async def test_a_broker_still_starting_as_the_cluster_stops_does_not_hold_the_stop(
    tmp_path: Path, python: str, children_dir: Path
) -> None:
    # Its restart is under way (a child that prints no ready line) when the cluster stops:
    # the zygote closes with it still running, and the stop must not wait for an exit report
    # that can no longer come.
    async with running(spec(tmp_path, python, brokers=1, restart=True), FakeClock()) as (
        cluster,
        events,
    ):
        (children_dir / "7000.mode").write_text("silent")
        reply = await cluster.handle(KillBroker("0", "KILL"))
        assert reply.ok, reply
        await events.next("broker-died")
        starts = children_dir / "7000.starts"
        for _ in range(GUARD * 100):  # a bounded poll: the restart's child writes its start
            if len(starts.read_text().splitlines()) == 2:
                break
            await anyio.sleep(0.01)
        assert len(starts.read_text().splitlines()) == 2
        assert cluster.state.brokers[0].status is ChildStatus.STARTING
    assert stand_ins() == []
