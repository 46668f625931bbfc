"""The run directory of a local cluster and the state file in it.

``emubroker cluster`` keeps, in its run directory:

- ``state.json``: a :class:`ClusterState` (pids, ports, URLs, statuses), rewritten atomically
  (write then rename) after every change, so another shell always reads a whole file;
- ``control.sock``: the supervisor's control socket (``emubroker.cluster.control``);
- ``lock``: held (``flock``) by the running supervisor, so two supervisors never share a run
  directory and ``status`` can tell a live cluster from the leftovers of a dead one;
- ``stub.log``, ``broker-<index>.log``: each child's output.

The storage-stub is named ``stub`` on the command line; a broker by its index (``0`` ..
``N-1``, as ``status`` lists them), by ``host:port`` of either of its ports (the admin one is its
Pulsar broker id, what ``leaderBroker`` answers), or by one of its URLs.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "STATE_FILE",
    "STUB",
    "BrokerState",
    "ChildState",
    "ChildStatus",
    "ClusterState",
    "ClusterStatus",
    "RunDirLockedError",
    "UnknownBrokerError",
    "default_run_dir",
    "find_broker",
    "hold_run_dir",
    "read_state",
    "run_dir_in_use",
    "write_state",
]

STATE_FILE: Final = "state.json"
STUB: Final = "stub"
"""How ``kill`` and ``start`` name the storage-stub process."""
CONTROL_SOCKET: Final = "control.sock"
LOCK_FILE: Final = "lock"
STATE_VERSION: Final = 1


class ChildStatus(enum.StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    DEAD = "dead"  # exited on its own or was killed; not restarted (yet)
    STOPPED = "stopped"  # stopped with the cluster


class ClusterStatus(enum.StrEnum):
    STARTING = "starting"
    READY = "ready"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"


class ChildState(msgspec.Struct, kw_only=True):
    """One child process as the supervisor last saw it.

    Attributes:
        pid: Its process id while it runs.
        started_at: Its start time as the OS records it (``psutil``'s ``create_time``): with the
            pid, it tells our process from a later one that reused the pid.
        status: Starting, running, dead or stopped.
        exit_code: How it last ended (negative: killed by that signal).
        restarts: How many times the supervisor started it again.
        log: Where its output goes.
    """

    pid: int | None = None
    started_at: float | None = None
    status: ChildStatus = ChildStatus.STARTING
    exit_code: int | None = None
    restarts: int = 0
    log: str = ""


class BrokerState(ChildState, kw_only=True):
    """One broker: its ports and URLs stay the same across restarts.

    Attributes:
        index: Its place in the cluster, ``0`` .. ``N-1``.
        host: The advertised host.
        port: The binary protocol port (``brokerServicePort``).
        admin_port: The admin HTTP port (``webServicePort``).
    """

    index: int
    host: str = "127.0.0.1"
    port: int = 0
    admin_port: int = 0

    @property
    def broker_id(self) -> str:
        """Pulsar's broker id: ``host:webServicePort``."""
        return f"{self.host}:{self.admin_port}"

    @property
    def service_url(self) -> str:
        return f"pulsar://{self.host}:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://{self.host}:{self.admin_port}"


class StubState(ChildState, kw_only=True):
    """The ``storage-stub`` process (bookie stub + metadata service).

    Attributes:
        url: ``stub://host:port``.
        data_dir: Its journal directory; ``""`` when in memory.
    """

    url: str = ""
    data_dir: str = ""


class ClusterState(msgspec.Struct, kw_only=True):
    """What ``state.json`` holds.

    Attributes:
        version: Of this layout (fields are only ever added, with defaults).
        status: Of the cluster as a whole.
        supervisor_pid: The ``emubroker cluster`` process.
        run_dir: The run directory.
        metadata_url: What the brokers use as metadata store (the stub's, or ``--metadata-url``).
        restart: Whether dead children are started again.
        stub: The stub process.
        brokers: The brokers, by index.
    """

    version: int = STATE_VERSION
    status: ClusterStatus = ClusterStatus.STARTING
    supervisor_pid: int = 0
    run_dir: str = ""
    metadata_url: str = ""
    restart: bool = False
    stub: StubState = msgspec.field(default_factory=StubState)
    brokers: list[BrokerState] = msgspec.field(default_factory=list)

    @property
    def service_url(self) -> str:
        """One URL for clients naming every broker: ``pulsar://h:p1,h:p2,...``."""
        return "pulsar://" + ",".join(f"{b.host}:{b.port}" for b in self.brokers)

    def summary(self) -> dict[str, object]:
        """The state with the derived URLs spelt out (``--json`` output)."""
        data: dict[str, Any] = msgspec.to_builtins(self)
        data["service_url"] = self.service_url
        for broker, out in zip(self.brokers, data["brokers"], strict=True):
            out.update(
                broker_id=broker.broker_id,
                service_url=broker.service_url,
                admin_url=broker.admin_url,
            )
        return data


class UnknownBrokerError(LookupError):
    """No broker of the cluster answers to that name."""


class RunDirLockedError(RuntimeError):
    """Another supervisor runs in this run directory."""


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(ClusterState)


def default_run_dir(data_dir: str | None = None) -> Path:
    """``<data-dir>/run`` for a durable cluster, else one per user under the temp directory."""
    if data_dir:
        return Path(data_dir) / "run"
    return Path(tempfile.gettempdir()) / f"emubroker-{os.getuid()}" / "cluster"


def write_state(run_dir: Path, state: ClusterState) -> None:
    """Replace ``state.json`` atomically."""
    target = run_dir / STATE_FILE
    partial = target.with_suffix(".tmp")
    partial.write_bytes(msgspec.json.format(_ENCODER.encode(state)) + b"\n")
    partial.replace(target)


def read_state(run_dir: Path) -> ClusterState:
    """Read ``state.json``.

    Raises:
        FileNotFoundError: No cluster ever ran in ``run_dir``.
        ValueError: The file is not a cluster state.
    """
    try:
        return _DECODER.decode((run_dir / STATE_FILE).read_bytes())
    except msgspec.DecodeError as exc:
        raise ValueError(f"{run_dir / STATE_FILE} is not a cluster state file: {exc}") from exc


@contextlib.contextmanager
def hold_run_dir(run_dir: Path) -> Iterator[None]:
    """Create ``run_dir`` and hold its lock for the life of the block.

    Raises:
        RunDirLockedError: Another supervisor holds it.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunDirLockedError(
                f"a cluster is already running in {run_dir}; stop it with "
                f"'emubroker cluster stop --run-dir {run_dir}' or choose another --run-dir"
            ) from None
        yield
    finally:
        os.close(fd)  # releases the lock


def run_dir_in_use(run_dir: Path) -> bool:
    """Whether a live supervisor holds ``run_dir``'s lock."""
    try:
        fd = os.open(run_dir / LOCK_FILE, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def find_broker(state: ClusterState, name: str) -> BrokerState:
    """The broker called ``name``: an index, ``host:port`` of either port, or a URL.

    Raises:
        UnknownBrokerError: None matches; the message lists what would.
    """
    if name.isdecimal():
        index = int(name)
        if index < len(state.brokers):
            return state.brokers[index]
    else:
        address = (name.partition("://")[2] or name).rstrip("/")
        for broker in state.brokers:
            if address in (f"{broker.host}:{broker.port}", broker.broker_id):
                return broker
    choices = ", ".join(f"{b.index} ({b.host}:{b.port}, {b.broker_id})" for b in state.brokers)
    raise UnknownBrokerError(
        f"no broker {name!r} in this cluster; brokers: {choices} (and {STUB!r}, the storage-stub)"
    )
