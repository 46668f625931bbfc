"""`cluster.start.brokers > 1`: an `emubroker cluster` supervisor loadgen starts for the run.

`ClusterProcess` runs `emubroker cluster -n N --port 0 --json` (one storage-stub process and N
broker processes on free loopback ports) and reads its JSON ready line: the service URL naming
every broker, each broker's URLs, the stub's URL. It implements `control.BrokerProcesses` with
the supervisor's own commands, `emubroker cluster kill BROKER --signal SIG` (then waits for the
supervisor's `broker-died` event) and `emubroker cluster start BROKER` (which returns once the
broker serves again, on its old ports). The supervisor runs without `--restart`: a killed broker
stays down until the scenario restarts it. `broker = "stub"` kills and starts the storage-stub
the same way (`emubroker cluster kill|start stub`); a scenario with such an event always runs
its cluster this way, even with one broker.

Storage: `memory` and `stub` both keep the stub in memory (its fault injection is reachable
either way); `durable` gives the cluster `--data-dir RUN/data`. The supervisor's run directory
(state file, control socket, the children's logs) is `RUN/logs/cluster`, or, when that path is
too long for a Unix socket, a short directory under the temp directory moved there at the end.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio

from emubroker.processes import ChildStartError, spawn, stop
from loadgen.control import BrokerInfo, ClusterLayout, ControlError
from loadgen.events import STUB
from loadgen.scenario import Start
from protocol.clock import Clock

if TYPE_CHECKING:
    from anyio.abc import Process, TaskGroup

__all__ = [
    "READY_TIMEOUT",
    "STOP_TIMEOUT",
    "ClusterProcess",
    "ClusterStartError",
    "start_child",
]

READY_TIMEOUT: Final = 30.0
"""Seconds a process may take to print its ready line (a broker starts in well under one)."""
STOP_TIMEOUT: Final = 10.0
"""Seconds a broker or the stub may take to stop after SIGTERM before it is killed."""
_READY: Final = re.compile(r'^\{"event":"ready".*\}$')
SUPERVISOR_STOP_TIMEOUT: Final = 40.0
"""The supervisor gives each child 15 s to stop, brokers first, then the stub."""
DIED_TIMEOUT: Final = 30.0
"""Seconds a killed broker may take to exit (SIGTERM: its graceful shutdown)."""
COMMAND_TIMEOUT: Final = 60.0
"""Seconds `emubroker cluster kill|start` may take (start waits for the broker's ready line)."""
_MAX_SOCKET_PATH: Final = 100
"""Unix socket paths are limited to 107 bytes on Linux (108 with the terminating NUL)."""


class ClusterStartError(Exception):
    """The cluster could not be started; the message says why (and where its log is)."""


async def start_child(
    name: str, command: list[str], logs: Path, ready: re.Pattern[str], task_group: TaskGroup
) -> tuple[Process, re.Match[str]]:
    """Start a child of loadgen's, its output in ``logs/<name>.log``; wait for its ready line.

    Raises:
        ClusterStartError: it exited or did not get ready in time (the message quotes its last
            lines and names its log).
        OSError: the command cannot be started.
    """
    await anyio.Path(logs).mkdir(parents=True, exist_ok=True)
    try:
        return await spawn(
            name,
            command,
            ready=ready,
            log_path=logs / f"{name}.log",
            task_group=task_group,
            ready_within=READY_TIMEOUT,
            own_session=False,
        )
    except ChildStartError as exc:
        raise ClusterStartError(str(exc)) from None


class ClusterProcess:
    """An `emubroker cluster` loadgen runs; implements `control.BrokerProcesses`.

    Args:
        start: The scenario's `cluster.start`.
        run_dir: The run's directory.
        clock: Paces the waits.
        config: A `broker.conf` every broker loads, if the scenario sets any.
    """

    def __init__(self, start: Start, run_dir: Path, clock: Clock, config: Path | None) -> None:
        self.start = start
        self.run_dir = run_dir
        self.clock = clock
        self.config = config
        self.logs = run_dir / "logs"
        self.cluster_dir = self.logs / "cluster"
        self._short_dir = False
        if len(str((self.cluster_dir / "control.sock").absolute())) > _MAX_SOCKET_PATH:
            self.cluster_dir = Path(tempfile.mkdtemp(prefix="loadgen-cluster-"))
            self._short_dir = True
        self.log_path = self.logs / "cluster.log"
        self.supervisor: Process | None = None
        self.layout: ClusterLayout | None = None

    async def launch(self, task_group: TaskGroup) -> ClusterLayout:
        """Start the cluster and wait for its ready line (``task_group`` copies its output).

        Raises:
            ClusterStartError: the supervisor exited or did not get ready.
        """
        command = [
            sys.executable,
            "-m",
            "emubroker",
            "cluster",
            "-n",
            str(self.start.brokers),
            "--port",
            "0",
            "--json",
            "--log-level",
            "WARNING",
            "--run-dir",
            str(self.cluster_dir.absolute()),
        ]
        if self.config is not None:
            command += ["--config", str(self.config.absolute())]
        if self.start.storage == "durable":
            command += ["--data-dir", str((self.run_dir / "data").absolute())]
        self.supervisor, match = await start_child(
            "cluster", command, self.logs, _READY, task_group
        )
        line = match.group(0)
        try:
            ready = json.loads(line)
            brokers = [
                BrokerInfo(f"broker-{b['index']}", b["service_url"], b["admin_url"])
                for b in ready["brokers"]
            ]
            stub_url = ready["stub"]["url"]
        except (ValueError, KeyError, TypeError) as exc:
            await stop(self.supervisor, grace=SUPERVISOR_STOP_TIMEOUT)
            raise ClusterStartError(
                f"unreadable ready line of emubroker cluster ({exc}): {line}"
            ) from None
        self.layout = ClusterLayout(
            service_url=ready["service_url"],
            admin_url=brokers[0].admin_url,
            brokers=brokers,
            stub_url=stub_url,
            started_by_loadgen=True,
            storage=self.start.storage,
        )
        return self.layout

    async def kill(self, broker: int | str, signal_name: str) -> str:
        offset = self._log_size()
        await self._command("kill", str(broker), "--signal", signal_name)
        if broker == STUB:
            await self._wait_for_event("stub-died", None, offset)
            return f"stub stopped by SIG{signal_name}"
        await self._wait_for_event("broker-died", broker, offset)
        return f"broker-{broker} stopped by SIG{signal_name}"

    async def restart(self, broker: int | str) -> str:
        return await self._command("start", str(broker))

    async def _command(self, *args: str) -> str:
        """Run `emubroker cluster ARGS --run-dir DIR`; its answer.

        Raises:
            ControlError: it failed (the supervisor's reason).
        """
        command = [sys.executable, "-m", "emubroker", "cluster", *args]
        command += ["--run-dir", str(self.cluster_dir.absolute())]
        with anyio.fail_after(COMMAND_TIMEOUT):
            done = await anyio.run_process(command, check=False)
        answer = (done.stdout + done.stderr).decode(errors="replace").strip()
        if done.returncode != 0:
            raise ControlError(f"emubroker cluster {' '.join(args)}: {answer}")
        return answer

    def _log_size(self) -> int:
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    async def _wait_for_event(
        self, event: str, broker: int | str | None, offset: int
    ) -> dict[str, Any]:
        """The supervisor's next `event` about `broker` after `offset` in its output.

        Raises:
            ControlError: it did not come within `DIED_TIMEOUT`.
        """
        deadline = self.clock.now() + DIED_TIMEOUT
        while self.clock.now() < deadline:
            text = self.log_path.read_bytes()[offset:].decode(errors="replace")
            for line in text.splitlines():
                if line.startswith("{"):
                    record = json.loads(line)
                    if record.get("event") == event and record.get("broker") == broker:
                        return dict(record)
            await self.clock.sleep(0.05)
        raise ControlError(f"broker {broker}: no {event} event within {DIED_TIMEOUT:g} s")

    async def aclose(self) -> None:
        """Stop the supervisor, which stops the brokers, then the stub.

        A run directory made under the temp directory (a long run path) is moved to
        `RUN/logs/cluster` once the cluster stopped, so that every log ends up in the run.
        """
        with anyio.CancelScope(shield=True):
            if self.supervisor is not None:
                await stop(self.supervisor, grace=SUPERVISOR_STOP_TIMEOUT)
            if self._short_dir:
                shutil.move(self.cluster_dir, self.logs / "cluster")
                self.cluster_dir, self._short_dir = self.logs / "cluster", False
