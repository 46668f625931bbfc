"""``emubroker cluster``: run a local cluster, and look at or poke a running one.

    emubroker cluster [-n 3] [--port 6650] [--admin-port 8080] [--data-dir DIR] [--config FILE]
                      [--metadata-url URL] [--restart] [--json] [--run-dir DIR]
    emubroker cluster status [--json]        # from another shell
    emubroker cluster kill BROKER|stub [--signal KILL]
    emubroker cluster start BROKER|stub
    emubroker cluster stop

The first form runs the supervisor in the foreground: it prints one line containing ``ready``
once every broker serves, then the service URL for clients and each broker's URLs, then one line
per event (a broker died, was restarted, ...). Ctrl-C or SIGTERM stops the cluster, brokers
first. ``--json`` prints the ready line and the events as JSON objects, one per line.
The other forms find the cluster through its run directory (``--run-dir``; by default
``<data-dir>/run`` with ``--data-dir``, else one per user under the temp directory). BROKER is an
index (``0``..``N-1``), ``host:port`` of either of its ports, or one of its URLs; ``stub`` names
the storage-stub.

Exit codes: 0 done (or stopped by a signal); 1 the cluster could not start, or a request failed,
or ``status`` found no running cluster; 2 usage or configuration errors.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
import msgspec

from emubroker.cluster import control
from emubroker.cluster.leftovers import stop_leftovers
from emubroker.cluster.running import leaf_errors, open_cluster
from emubroker.cluster.spec import ClusterEvent, ClusterSpec
from emubroker.cluster.state import (
    CONTROL_SOCKET,
    ClusterState,
    RunDirLockedError,
    default_run_dir,
    read_state,
    run_dir_in_use,
)
from emubroker.config import ConfigError, load_config, read_config_file
from emubroker.processes import ChildStartError
from protocol.clock import AnyioClock

if TYPE_CHECKING:
    from anyio import CancelScope

__all__ = ["add_parser", "run"]

log = logging.getLogger("emubroker.cluster")

# How long ``stop`` waits for the supervisor to finish stopping the cluster.
_STOP_WAIT: Final = 60.0
_STOP_POLL: Final = 0.05


def _location_options(parser: argparse.ArgumentParser, *, default: Any) -> None:
    parser.add_argument(
        "--run-dir",
        default=default,
        help="the cluster's run directory (default: <data-dir>/run, or one per user in the "
        "temp directory)",
    )
    parser.add_argument("--data-dir", default=default, help="the durable cluster's data directory")
    parser.add_argument(
        "--json", action="store_true", default=default, help="machine-readable output"
    )


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add the ``cluster`` command to a CLI's subparsers."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "cluster",
        help="run a local cluster: a storage-stub process and N broker processes",
        description="Run a local cluster (a storage-stub process and N broker processes), "
        "or inspect and control a running one from another shell.",
    )
    parser.add_argument("-n", "--brokers", type=int, default=3, help="brokers (default 3)")
    parser.add_argument(
        "--port", type=int, default=6650, help="first broker's binary port (default 6650; 0: any)"
    )
    parser.add_argument(
        "--admin-port",
        type=int,
        help="first broker's admin port (default 8080, or any with --port 0)",
    )
    parser.add_argument("--config", help="broker.conf (properties) or .toml for every broker")
    parser.add_argument(
        "--metadata-url", help="the brokers' metadata store (default: the stub's metadata service)"
    )
    parser.add_argument(
        "--restart",
        action="store_true",
        help="start a broker or the stub that dies again, on its ports (an in-memory stub "
        "restarts the brokers too: its data is gone)",
    )
    parser.add_argument("--stub-port", type=int, default=0, help="the stub's port (default: any)")
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging level of the supervisor and the children (default INFO)",
    )
    _location_options(parser, default=None)
    actions = parser.add_subparsers(dest="cluster_command", metavar="[ACTION]")
    status = actions.add_parser("status", help="show a running cluster's processes and URLs")
    _location_options(status, default=argparse.SUPPRESS)
    kill = actions.add_parser("kill", help="send a signal to a broker or the stub (default TERM)")
    kill.add_argument("broker", help="index, host:port or URL of a broker, or 'stub'")
    kill.add_argument("--signal", default="TERM", help="KILL, TERM, STOP, CONT, ... or a number")
    _location_options(kill, default=argparse.SUPPRESS)
    start = actions.add_parser("start", help="start a broker or the stub that is not running")
    start.add_argument("broker", help="index, host:port or URL of a broker, or 'stub'")
    _location_options(start, default=argparse.SUPPRESS)
    stop = actions.add_parser("stop", help="stop the cluster (brokers first)")
    _location_options(stop, default=argparse.SUPPRESS)
    return parser


def run(args: argparse.Namespace) -> int:
    """Execute a parsed ``cluster`` command; returns the exit code."""
    logging.basicConfig(
        level=getattr(args, "log_level", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for flag, value in (("--data-dir", args.data_dir), ("--run-dir", args.run_dir)):
        if value and Path(value).exists() and not Path(value).is_dir():
            _echo(f"emubroker cluster: {flag} {value} is not a directory", err=True)
            return 2
    run_dir = Path(args.run_dir) if args.run_dir else default_run_dir(args.data_dir)
    match args.cluster_command:
        case None:
            return _run_cluster(args, run_dir)
        case "status":
            return _status(run_dir, as_json=args.json)
        case "kill":
            return _request(run_dir, control.KillBroker(args.broker, args.signal))
        case "start":
            return _request(run_dir, control.StartBroker(args.broker))
        case "stop":
            return _stop(run_dir)
    raise AssertionError(args.cluster_command)  # pragma: no cover


def _echo(text: str, *, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


# ---- running the cluster ---------------------------------------------------------------------


def _spec(args: argparse.Namespace, run_dir: Path) -> ClusterSpec:
    if args.brokers < 1:
        raise ConfigError(f"-n must be at least 1, got {args.brokers}")
    for flag, first in (("--port", args.port), ("--admin-port", args.admin_port)):
        if first is not None and not (first == 0 or 0 < first <= 65536 - args.brokers):
            raise ConfigError(f"{flag} {first} leaves no room for {args.brokers} brokers")
    if args.config is not None:
        load_config(args.config)  # a bad file stops us before any process starts
        _check_port_keys(Path(args.config), args.brokers)
    return ClusterSpec(
        brokers=args.brokers,
        port=args.port,
        admin_port=args.admin_port,
        run_dir=run_dir,
        data_dir=args.data_dir,
        config=str(Path(args.config).resolve()) if args.config else None,
        metadata_url=args.metadata_url,
        restart=args.restart,
        stub_port=args.stub_port,
        log_level=args.log_level,
    )


# Each broker's ports come from --port and --admin-port (broker i: first + i), over the file.
_ASSIGNED_PORT_KEYS: Final = ("brokerServicePort", "webServicePort")
# Not assigned: one value would be every broker's, so only 0 (a free port each) works for several.
_SHARED_PORT_KEYS: Final = ("brokerServicePortTls", "webServicePortTls")


def _check_port_keys(path: Path, brokers: int) -> None:
    """Say that the cluster assigns the ports a ``--config`` sets; refuse a shared TLS port.

    Raises:
        ConfigError: A TLS port other than 0 for several brokers.
    """
    raw = read_config_file(path)
    assigned = [f"{key}={raw[key]}" for key in _ASSIGNED_PORT_KEYS if raw.get(key, "") != ""]
    if assigned:
        log.warning(
            "%s: %s ignored: the cluster assigns each broker its ports (--port, --admin-port)",
            path,
            ", ".join(assigned),
        )
    for key in _SHARED_PORT_KEYS:
        value = raw.get(key, "")
        if brokers > 1 and value != "" and str(value) != "0":
            raise ConfigError(
                f"{path}: {key}={value} would be the port of all {brokers} brokers; set it to 0 "
                "(each broker takes a free one)"
            )


def _brokers(count: int) -> str:
    return f"{count} broker" if count == 1 else f"{count} brokers"


class _Output:
    """The supervisor's stdout: the ready line, then events; text or JSON lines."""

    def __init__(self, *, as_json: bool) -> None:
        self.as_json = as_json

    def ready(self, state: ClusterState) -> None:
        if self.as_json:
            self._line(msgspec.json.encode({"event": "ready", **state.summary()}).decode())
            return
        self._line(
            f"emubroker cluster ready: {_brokers(len(state.brokers))}, stub {state.stub.url}, "
            f"run dir {state.run_dir}"
        )
        if state.brokers:  # any broker's page shows the whole cluster
            self._line(f"dashboard: {state.brokers[0].admin_url}/dashboard/")
        self._line(f"service {state.service_url}")
        for broker in state.brokers:
            self._line(f"broker {broker.index} {broker.service_url} admin {broker.admin_url}")

    def event(self, event: ClusterEvent) -> None:
        if self.as_json:
            self._line(msgspec.json.encode(event).decode())
        else:
            loud = "WARNING: " if event.level == "warning" else ""
            self._line(loud + event.message)

    @staticmethod
    def _line(text: str) -> None:
        _echo(text)


async def _cancel_on_signal(signals: Any, scope: CancelScope) -> None:
    async for signum in signals:
        log.info("%s received, stopping the cluster", signal.Signals(signum).name)
        scope.cancel()
        return


async def _serve(spec: ClusterSpec, output: _Output) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with anyio.create_task_group() as tg:
            # Also during start-up: a signal then stops what already started.
            tg.start_soon(_cancel_on_signal, signals, tg.cancel_scope)
            async with open_cluster(spec, on_event=output.event) as cluster:
                output.ready(cluster.state)
                await cluster.stop_requested.wait()
            tg.cancel_scope.cancel()


def _run_cluster(args: argparse.Namespace, run_dir: Path) -> int:
    try:
        spec = _spec(args, run_dir)
    except ConfigError as exc:
        _echo(f"emubroker cluster: {exc}", err=True)
        return 2
    if not run_dir_in_use(run_dir):
        _stop_leftovers(run_dir)
    try:
        anyio.run(_serve, spec, _Output(as_json=args.json), backend="asyncio")
    except (*_START_ERRORS, BaseExceptionGroup) as exc:
        errors = leaf_errors(exc)
        if not all(isinstance(error, _START_ERRORS) for error in errors):
            raise
        for error in errors:
            _echo(f"emubroker cluster: cannot start: {error}", err=True)
        return 1
    return 0


_START_ERRORS: Final = (ChildStartError, RunDirLockedError, OSError)


def _stop_leftovers(run_dir: Path) -> list[int]:
    try:
        state = read_state(run_dir)
    except (FileNotFoundError, ValueError):
        return []
    return stop_leftovers(state)


# ---- from another shell ----------------------------------------------------------------------


def _status(run_dir: Path, *, as_json: bool) -> int:
    try:
        state = read_state(run_dir)
    except FileNotFoundError:
        _echo(f"no cluster has run in {run_dir}", err=True)
        return 1
    except ValueError as exc:
        _echo(f"emubroker cluster: {exc}", err=True)
        return 1
    running = run_dir_in_use(run_dir)
    if as_json:
        _echo(msgspec.json.encode({"supervisor_running": running, **state.summary()}).decode())
        return 0 if running else 1
    supervisor = (
        f"{state.status} (supervisor pid {state.supervisor_pid})"
        if running
        else f"not running (last state: {state.status})"
    )
    _echo(f"cluster in {run_dir}: {supervisor}")
    _echo(f"service {state.service_url}")
    _echo(f"metadata {state.metadata_url}")
    stub = state.stub
    _echo(
        f"stub      {stub.url}  {_child_text(stub.status, stub.pid, stub.exit_code)}  "
        f"restarts {stub.restarts}  {'durable ' + stub.data_dir if stub.data_dir else 'in memory'}"
    )
    for b in state.brokers:
        _echo(
            f"broker {b.index}  {b.host}:{b.port}  admin {b.admin_url}  "
            f"{_child_text(b.status, b.pid, b.exit_code)}  restarts {b.restarts}"
        )
    return 0 if running else 1


def _child_text(status: str, pid: int | None, exit_code: int | None) -> str:
    if pid is not None:
        return f"{status} pid {pid}"
    if exit_code is not None:
        return f"{status} (exit status {exit_code})"
    return str(status)


def _request(run_dir: Path, request: control.Request) -> int:
    try:
        reply = anyio.run(control.call, run_dir / CONTROL_SOCKET, request)
    except control.ControlError as exc:
        _echo(f"emubroker cluster: {exc}", err=True)
        return 1
    _echo(reply.message, err=not reply.ok)
    return 0 if reply.ok else 1


async def _wait_released(run_dir: Path) -> bool:
    clock = AnyioClock()
    deadline = clock.now() + _STOP_WAIT
    while run_dir_in_use(run_dir):
        if clock.now() > deadline:
            return False
        await clock.sleep(_STOP_POLL)
    return True


def _stop(run_dir: Path) -> int:
    if not run_dir_in_use(run_dir):
        stopped = _stop_leftovers(run_dir)
        _echo(
            f"no supervisor runs in {run_dir}; "
            + (f"stopped leftover processes {stopped}" if stopped else "nothing to stop")
        )
        return 0
    code = _request(run_dir, control.StopCluster())
    if code == 0 and not anyio.run(_wait_released, run_dir):
        _echo(f"the cluster did not stop within {_STOP_WAIT:g} s", err=True)
        return 1
    return code
