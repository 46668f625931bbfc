"""A child process loadgen starts (a broker, the stub, a cluster supervisor), logged to a file."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path
from typing import IO, Final

import anyio
import anyio.abc

from protocol.clock import Clock

__all__ = ["READY_TIMEOUT", "STOP_TIMEOUT", "ChildProcess", "ClusterStartError"]

READY_TIMEOUT: Final = 30.0
"""Seconds a process may take to print its ready line (a broker starts in well under one)."""

STOP_TIMEOUT: Final = 10.0


class ClusterStartError(Exception):
    """The cluster could not be started; the message says why (and where its log is)."""


class ChildProcess:
    """One child process with its output in a log file.

    Args:
        name: Names it in messages; its log is ``<log_dir>/<name>.log``.
        command: What to run.
        log_dir: Where its log goes.
        stop_timeout: Seconds it may take to stop after SIGTERM before it is killed.
    """

    def __init__(
        self, name: str, command: list[str], log_dir: Path, *, stop_timeout: float = STOP_TIMEOUT
    ) -> None:
        self.name = name
        self.stop_timeout = stop_timeout
        self.command = command
        self.log_path = log_dir / f"{name}.log"
        self.process: anyio.abc.Process | None = None
        self._log: IO[bytes] | None = None

    async def start(self, ready: re.Pattern[str], clock: Clock) -> re.Match[str]:
        """Start it and wait for its ready line.

        Raises:
            ClusterStartError: it exited or did not get ready in time.
        """
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._log = self.log_path.open("ab")
        self.process = await anyio.open_process(
            self.command, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = clock.now() + READY_TIMEOUT
        while True:
            text = self.log_path.read_bytes()[offset:].decode(errors="replace")
            if match := ready.search(text):
                return match
            if self.process.returncode is not None or clock.now() > deadline:
                await self.stop()
                tail = "\n".join(text.strip().splitlines()[-5:])
                why = "exited" if self.process.returncode is not None else "did not get ready"
                raise ClusterStartError(f"{self.name} {why} (log {self.log_path}):\n{tail}")
            await clock.sleep(0.05)

    def signal(self, signum: signal.Signals) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signum)

    async def wait(self) -> None:
        if self.process is not None:
            await self.process.wait()

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not stop in time."""
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            with anyio.move_on_after(self.stop_timeout):
                await self.process.wait()
            if self.process.returncode is None:
                self.process.kill()
                await self.process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
