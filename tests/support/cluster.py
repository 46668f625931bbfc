"""``emubroker cluster`` as a subprocess for integration tests, always cleaned up.

``cluster_process(run_dir, *args)`` starts ``python -m emubroker cluster --json --port 0
--run-dir RUN_DIR *args``, waits for the ready line and yields a :class:`ClusterProcess`; on the
way out it stops the supervisor with SIGTERM and, should the supervisor be gone or hang, stops
whatever it left running, so no test leaves a broker behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from emubroker.cluster.leftovers import stop_leftovers
from emubroker.cluster.state import read_state

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 90.0
COMMAND = (sys.executable, "-m", "emubroker", "cluster")


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")


def run_cli(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """``emubroker cluster ARGS`` to completion, output captured."""
    return subprocess.run(
        [*COMMAND, *args], capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=timeout
    )


class ClusterProcess:
    """A running supervisor: its ready line, its later events, and the CLI against it."""

    def __init__(self, proc: subprocess.Popen[str], run_dir: Path) -> None:
        self.proc = proc
        self.run_dir = run_dir
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.ready: dict[str, Any] = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                self.lines.put(json.loads(line))

    def wait_event(self, kind: str, timeout: float = 60.0) -> dict[str, Any]:
        """The next event of this kind (earlier ones of other kinds are kept in ``seen``)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                event = self.lines.get(timeout=0.1)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"no {kind!r} event within {timeout}s: {self.seen}"
                    ) from None
                if not self._reader.is_alive() and self.lines.empty():  # stdout closed
                    raise AssertionError(
                        f"the supervisor exited ({self.proc.poll()}) before a "
                        f"{kind!r} event: {self.seen}"
                    ) from None
                continue
            self.seen.append(event)
            if event.get("event") == kind:
                return event

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``emubroker cluster ARGS --run-dir RUN_DIR`` from "another shell"."""
        return run_cli(*args, "--run-dir", str(self.run_dir))

    def broker(self, index: int) -> dict[str, Any]:
        return dict(self.ready["brokers"][index])

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout)
        return code


@contextlib.contextmanager
def cluster_process(run_dir: Path, *args: str) -> Iterator[ClusterProcess]:
    """Run a cluster; see the module docstring."""
    proc = subprocess.Popen(
        [*COMMAND, "--json", "--port", "0", "--run-dir", str(run_dir), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # the supervisor's log; each child's is in the run dir
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    running = ClusterProcess(proc, run_dir)
    try:
        running.ready = running.wait_event("ready", START_TIMEOUT)
        yield running
    finally:
        try:
            running.stop()
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        with contextlib.suppress(FileNotFoundError, ValueError):
            stop_leftovers(read_state(run_dir))
        if proc.stdout is not None:
            proc.stdout.close()
