"""Clusters loadgen starts for a run (`cluster.start`), as processes on free loopback ports.

`start = { brokers = 1, storage = ... }` runs one broker:

* `memory`: `emubroker standalone` (the fastest; a killed broker loses what it held);
* `durable`: `emubroker standalone --data-dir RUN/data` (a killed broker restarts with every
  acknowledged message);
* `stub`: `storage-stub serve` plus `emubroker broker` against it: the stub's fault injection
  is reachable (stub events), and a restarted broker finds its data in the stub.

Processes are started with `python -m`, so the run uses the emubroker installed beside loadgen,
and their output goes to `RUN/logs/*.log`. `brokers > 1` runs `emubroker cluster`
(`loadgen.local_cluster.ClusterProcess`): a stub and N brokers, killed and restarted through the
supervisor's `kill` and `start` commands.
"""

from __future__ import annotations

import re
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio

from emubroker.processes import stop
from loadgen.control import BrokerInfo, ClusterLayout
from loadgen.local_cluster import STOP_TIMEOUT, ClusterProcess, ClusterStartError, start_child
from loadgen.scenario import Start
from protocol.clock import Clock
from storage_stub.client import open_stub_client
from storage_stub.faults import FaultConfig

if TYPE_CHECKING:
    from anyio.abc import Process, TaskGroup

__all__ = [
    "ClusterProcess",
    "ClusterStartError",
    "LocalCluster",
    "StubFaultsClient",
    "start_local_cluster",
]

_BROKER_READY: Final = re.compile(r"ready: service (\S+) admin (\S+)")
_STUB_READY: Final = re.compile(r"storage-stub ready on (stub://\S+)")
_BROKER: Final = "broker-0"  # its log is logs/broker-0.log


def _write_config(path: Path, config: dict[str, Any]) -> None:
    lines = []
    for key, value in config.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        lines.append(f"{key}={text}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


_RUN_DIR_KEYS: Final = ("emubrokerDispatchTraceDir", "emubrokerLoadBalancerTraceDir")
"""Broker settings naming a directory: a relative one lives in the run directory, so a
scenario's `config = { emubrokerDispatchTraceDir = "dispatch" }` puts the broker's dispatch
trace beside loadgen's tables, where `loadgen analyze` reads it (and
`emubrokerLoadBalancerTraceDir = "loadbalance"` its load-balancer trace)."""


def _in_run_dir(config: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    resolved = dict(config)
    for key in _RUN_DIR_KEYS:
        value = resolved.get(key)
        if isinstance(value, str) and value and not Path(value).is_absolute():
            resolved[key] = str((run_dir / value).absolute())
    return resolved


class LocalCluster:
    """A broker (and maybe a stub) loadgen runs; implements `control.BrokerProcesses`."""

    def __init__(self, start: Start, run_dir: Path, clock: Clock) -> None:
        self.start = start
        self.run_dir = run_dir
        self.clock = clock
        self.logs = run_dir / "logs"
        self.stub: Process | None = None
        self.broker: Process | None = None
        self.layout: ClusterLayout | None = None
        self._broker_args: list[str] = []
        self._task_group: TaskGroup | None = None

    async def launch(self, task_group: TaskGroup) -> ClusterLayout:
        """Start the processes (``task_group`` copies their output to their logs).

        Raises:
            ClusterStartError: a process did not start.
        """
        self._task_group = task_group
        python = [sys.executable, "-m"]
        args = ["--port", "0", "--admin-port", "0", "--bind", "127.0.0.1", "--log-level", "WARNING"]
        if self.start.config:
            config = self.run_dir / "broker.conf"
            _write_config(config, _in_run_dir(self.start.config, self.run_dir))
            args += ["--config", str(config)]
        stub_url = None
        if self.start.storage == "stub":
            self.stub, ready = await start_child(
                "storage-stub",
                [*python, "storage_stub", "serve", "--port", "0", "--bind", "127.0.0.1"],
                self.logs,
                _STUB_READY,
                task_group,
            )
            stub_url = ready.group(1)
            command = [
                *python,
                "emubroker",
                "broker",
                "--metadata-url",
                stub_url,
                "--bookie-url",
                stub_url,
            ]
        else:
            command = [*python, "emubroker", "standalone"]
            if self.start.storage == "durable":
                command += ["--data-dir", str(self.run_dir / "data")]
        self._broker_args = command
        self.broker, match = await start_child(
            _BROKER, [*command, *args], self.logs, _BROKER_READY, task_group
        )
        service_url, admin_url = match.group(1), match.group(2)
        # A restart must come back on the same ports, where the clients reconnect.
        self._ports = [
            "--port",
            service_url.rsplit(":", 1)[1],
            "--admin-port",
            admin_url.rsplit(":", 1)[1],
        ]
        self.layout = ClusterLayout(
            service_url=service_url,
            admin_url=admin_url,
            brokers=[BrokerInfo("broker-0", service_url, admin_url)],
            stub_url=stub_url,
            started_by_loadgen=True,
            storage=self.start.storage,
        )
        return self.layout

    async def kill(self, broker: int | str, signal_name: str) -> str:
        process = self._broker(broker)
        if process.returncode is None:
            process.send_signal(signal.Signals[f"SIG{signal_name}"])
        await process.wait()
        return f"{_BROKER} stopped by SIG{signal_name}"

    async def restart(self, broker: int | str) -> str:
        process = self._broker(broker)
        if process.returncode is None:
            return f"{_BROKER} is running"
        args = ["--bind", "127.0.0.1", "--log-level", "WARNING", *self._ports]
        if self.start.config:
            args += ["--config", str(self.run_dir / "broker.conf")]
        assert self._task_group is not None  # a broker runs: launch gave it
        self.broker, _ = await start_child(
            _BROKER, [*self._broker_args, *args], self.logs, _BROKER_READY, self._task_group
        )
        return f"{_BROKER} restarted"

    def _broker(self, broker: int | str) -> Process:
        if broker != 0 or self.broker is None:
            raise ClusterStartError(f"no broker {broker}")
        return self.broker

    async def aclose(self) -> None:
        """Stop the broker, then the stub."""
        with anyio.CancelScope(shield=True):
            if self.broker is not None:
                await stop(self.broker, grace=STOP_TIMEOUT)
            if self.stub is not None:
                await stop(self.stub, grace=STOP_TIMEOUT)


class StubFaultsClient:
    """`control.StubFaultControl` over the stub's control requests (one connection per call)."""

    def __init__(self, url: str, clock: Clock) -> None:
        self.url = url
        self.clock = clock

    async def configure(self, config: dict[str, Any]) -> str:
        import msgspec

        try:
            faults = msgspec.convert(config, FaultConfig)
        except msgspec.ValidationError as exc:
            raise ValueError(f"bad stub fault config: {exc}") from None
        async with open_stub_client(self.url, clock=self.clock) as client:
            await client.configure_faults(faults)
        return "configured"

    async def fail_next(self, count: int, ops: list[str] | None) -> str:
        async with open_stub_client(self.url, clock=self.clock) as client:
            await client.fail_next(count, ops)
        return f"next {count} requests fail"

    async def stall(self, seconds: float) -> str:
        async with open_stub_client(self.url, clock=self.clock) as client:
            await client.stall(seconds)
        return f"stalled {seconds:g} s"

    async def clear(self) -> str:
        async with open_stub_client(self.url, clock=self.clock) as client:
            await client.clear_faults()
        return "cleared"


def start_local_cluster(
    start: Start, run_dir: Path, clock: Clock, *, stub_process: bool = False
) -> LocalCluster | ClusterProcess:
    """The launcher for `start` (call `launch` on it): one broker, or `emubroker cluster`.

    `stub_process`: events kill or restart the stub, which only `emubroker cluster` does.
    """
    if start.brokers == 1 and not stub_process:
        return LocalCluster(start, run_dir, clock)
    config = None
    if start.config:
        config = run_dir / "broker.conf"
        _write_config(config, _in_run_dir(start.config, run_dir))
    return ClusterProcess(start, run_dir, clock, config)
