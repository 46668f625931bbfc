"""Children left running by a supervisor that died are found by pid and start time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil

from emubroker.cluster.leftovers import stop_leftovers
from emubroker.cluster.state import BrokerState, ClusterState, StubState

# Records that it got SIGTERM (what the supervisor would have sent), then exits.
_SLEEPER = """
import signal, sys, time
def term(*_):
    open(sys.argv[1], "w").write("TERM")
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
print("up", flush=True)
time.sleep(60)
"""


def _sleeper(mark: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", _SLEEPER, str(mark)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "up\n"  # its handler is installed
    return process


def test_leftovers_are_stopped_and_strangers_are_not(tmp_path: Path) -> None:
    marks = [tmp_path / name for name in ("ours", "stranger", "stub")]
    ours, stranger, stub = processes = [_sleeper(mark) for mark in marks]
    try:
        started = {p.pid: psutil.Process(p.pid).create_time() for p in processes}
        state = ClusterState(
            stub=StubState(pid=stub.pid, started_at=started[stub.pid]),
            brokers=[
                BrokerState(index=0, pid=ours.pid, started_at=started[ours.pid]),
                # Same pid, another start time: a process that reused the pid is not ours.
                BrokerState(index=1, pid=stranger.pid, started_at=started[stranger.pid] - 100),
                BrokerState(index=2),  # not running
            ],
        )
        assert sorted(stop_leftovers(state, timeout=10)) == sorted([ours.pid, stub.pid])
        assert [mark.exists() for mark in marks] == [True, False, True]
        assert marks[0].read_text() == "TERM"
        assert stranger.poll() is None
    finally:
        for process in processes:
            process.kill()
            process.wait()
            assert process.stdout is not None
            process.stdout.close()
