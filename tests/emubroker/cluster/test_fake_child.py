"""The stand-in child itself: a SIGTERM sent the moment its ready line is read is never lost.

The supervisor tests send SIGTERM as soon as a stand-in's ready line is read. A stand-in that
waited with a handler and ``signal.pause()`` lost one that came between its last check for
signals and ``pause()`` (it ran on until the cluster stopped, and the test timed out); it
holds SIGTERM blocked from before its ready line instead and takes it with ``sigwait``: a
signal generated while blocked stays pending until taken.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.emubroker.cluster.test_supervisor import FAKE, GUARD

pytestmark = pytest.mark.integration


def caught_signals(pid: int) -> set[signal.Signals]:
    """The signals ``pid`` has a handler for, from ``/proc/PID/status``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            mask = int(line.split()[1], 16)
            return {s for s in signal.Signals if mask & (1 << (s - 1))}
    raise AssertionError(f"no SigCgt for pid {pid}")


def test_a_stand_in_takes_a_sigterm_sent_as_its_ready_line_is_read(tmp_path: Path) -> None:
    argv = [sys.executable, str(FAKE), "-m", "emubroker", "broker"]
    argv += ["--port", "7001", "--admin-port", "9001"]
    env = dict(os.environ, FAKE_CHILD_DIR=str(tmp_path), PYTHONUNBUFFERED="1")
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "starting up\n"
        assert "ready: service pulsar://127.0.0.1:7001" in child.stdout.readline()
        # No handler: a SIGTERM is held blocked until ``sigwait`` takes it. A handler runs
        # only at the interpreter's checks for signals, and one caught after the last check
        # before ``signal.pause()`` left the stand-in sleeping.
        assert signal.SIGTERM not in caught_signals(child.pid)
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=GUARD) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        assert child.stdout is not None
        child.stdout.close()
    assert len((tmp_path / "7001.stops").read_text().splitlines()) == 1
