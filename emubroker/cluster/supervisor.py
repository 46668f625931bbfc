"""The local cluster's supervisor: one ``storage-stub`` process and N broker processes.

``Cluster.start_all`` (through ``emubroker.cluster.running.open_cluster``) starts the stub, then
every broker at once (they share nothing but the stub, DESIGN.md decision 11, so nothing orders
them). A task per child waits for it to exit: a child that dies while the cluster runs is
reported and, with ``restart``, started again on the same ports (at once the first time, then
backing off while it keeps dying young). A stub that starts again brings the brokers back with
it (an in-memory one restarts them: its data is gone; docs/cluster.md, "When the stub dies").
``stop_all`` stops the brokers first, each with SIGTERM so that it releases its locks and
leadership, waits for them, then stops the stub.

The run directory (``emubroker.cluster.state``) is locked for the supervisor's life and holds
the state file, rewritten after every change, and the control socket through which
``emubroker cluster kill|start|stop`` reach :meth:`Cluster.handle` (``requests``).
"""

from __future__ import annotations

import logging
import os
import re
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Final

import anyio

from emubroker import processes
from emubroker.cluster import control, requests
from emubroker.cluster.spec import ClusterEvent, ClusterSpec
from emubroker.cluster.state import (
    BrokerState,
    ChildState,
    ChildStatus,
    ClusterState,
    ClusterStatus,
    StubState,
    write_state,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import Process, TaskGroup

    from protocol.clock import Clock

__all__ = ["Cluster", "leaf_errors"]

log = logging.getLogger(__name__)

_STUB_READY: Final = re.compile(r"ready on (?P<url>stub://\S+)")
_BROKER_READY: Final = re.compile(
    r"ready: service pulsar://(?P<host>[^\s/]+):(?P<port>\d+) admin http://[^\s/]+:(?P<admin>\d+)"
)
# A child that dies this soon after it started is failing to run, not crashing now and then:
# its next restart waits, doubling from the first delay up to the last.
_YOUNG: Final = 10.0
_FIRST_BACKOFF: Final = 1.0
_MAX_BACKOFF: Final = 30.0


class Cluster:
    """A running cluster; made by ``emubroker.cluster.running.open_cluster``.

    Attributes:
        state: What the state file says, kept current.
    """

    def __init__(
        self,
        spec: ClusterSpec,
        task_group: TaskGroup,
        clock: Clock,
        on_event: Callable[[ClusterEvent], None],
    ) -> None:
        self.spec = spec
        self._tg = task_group
        self._clock = clock
        self._on_event = on_event
        first_admin = spec.first_admin_port()
        self.state = ClusterState(
            supervisor_pid=os.getpid(),
            run_dir=str(spec.run_dir),
            restart=spec.restart,
            stub=StubState(
                log=str(spec.run_dir / "stub.log"),
                data_dir=str(Path(spec.data_dir) / "stub") if spec.data_dir else "",
            ),
            brokers=[
                BrokerState(
                    index=i,
                    port=spec.port + i if spec.port else 0,
                    admin_port=first_admin + i if first_admin else 0,
                    log=str(spec.run_dir / f"broker-{i}.log"),
                )
                for i in range(spec.brokers)
            ],
        )
        self._processes: dict[int, Process] = {}
        self._stub: Process | None = None
        self._busy: set[int] = set()  # brokers being started or restarted
        # Per child (broker index, None for the stub): when it last started, by the clock, and
        # the delay before its last restart.
        self._started_at: dict[int | None, float] = {}
        self._backoff: dict[int | None, float] = {}
        self._stopping = False
        self.stop_requested = anyio.Event()
        # How brokers start: forked by the zygote once it serves (exec'd until then, and if it
        # does not start).
        self._launcher: processes.Launcher = processes.EXEC
        self._zygote_settled = anyio.Event()

    # ---- start and stop ------------------------------------------------------------------

    async def start_all(self) -> None:
        """Start the stub, then every broker; the cluster is ready once they all serve."""
        self._save()
        began = self._clock.now()
        self._tg.start_soon(self._start_zygote)  # imports the brokers' modules meanwhile
        await self._start_stub()
        stub_ready = self._clock.now()
        log.info("storage-stub ready in %.3f s at %s", stub_ready - began, self.state.stub.url)
        await self._zygote_settled.wait()
        brokers_began = self._clock.now()
        self.state.metadata_url = self.spec.metadata_url or self.state.stub.url
        try:
            async with anyio.create_task_group() as starting:
                for broker in self.state.brokers:
                    starting.start_soon(self._start_broker, broker)
        except BaseExceptionGroup as group:
            # One message naming every broker that failed, not a group of them.
            failures = leaf_errors(group)
            if all(isinstance(e, processes.ChildStartError | OSError) for e in failures):
                raise processes.ChildStartError("\n".join(map(str, failures))) from None
            raise
        log.info(
            "brokers ready in %.3f s (%d)",
            self._clock.now() - brokers_began,
            len(self.state.brokers),
        )
        self.state.status = ClusterStatus.READY
        self._save()

    async def stop_all(self) -> None:
        """Stop the brokers (SIGTERM, together), then the stub."""
        self._stopping = True
        failed = self.state.status is ClusterStatus.FAILED
        self.state.status = ClusterStatus.STOPPING
        self._save()
        self.emit("stopping", "stopping the brokers, then the stub")
        async with anyio.create_task_group() as stopping:
            for index, process in list(self._processes.items()):
                stopping.start_soon(self._stop_child, self.state.brokers[index], process)
        if self._stub is not None:
            await self._stop_child(self.state.stub, self._stub)
        await self._launcher.aclose()
        self.state.status = ClusterStatus.FAILED if failed else ClusterStatus.STOPPED
        self._save()
        self.emit("stopped", "cluster stopped")

    async def _stop_child(self, child: ChildState, process: Process) -> None:
        child.exit_code = await processes.stop(process)
        child.status = ChildStatus.STOPPED
        child.pid = None

    # ---- the stub ------------------------------------------------------------------------

    def _stub_argv(self, port: int) -> list[str]:
        argv = [self.spec.python, "-m", "storage_stub", "serve", "--bind", "127.0.0.1"]
        argv += ["--port", str(port), "--log-level", self.spec.log_level]
        if self.state.stub.data_dir:
            argv += ["--data-dir", self.state.stub.data_dir]
        return argv

    async def _start_stub(self) -> None:
        stub = self.state.stub
        port = int(stub.url.rpartition(":")[2]) if stub.url else self.spec.stub_port
        stub.status = ChildStatus.STARTING
        process, ready = await processes.spawn(
            "storage-stub",
            self._stub_argv(port),
            ready=_STUB_READY,
            log_path=Path(stub.log),
            task_group=self._tg,
        )
        if self._stopping:
            await processes.stop(process)
            return
        self._stub = process
        stub.url = ready["url"]
        self._started_at[None] = self._clock.now()
        self._running(stub, process)
        self._tg.start_soon(self._watch_stub, process)

    async def _watch_stub(self, process: Process) -> None:
        code = await process.wait()
        if self._stopping:
            return
        stub = self.state.stub
        self._exited(stub, code)
        self._stub = None
        self.emit(
            "stub-died",
            f"storage-stub {processes.describe_exit(code)}; the brokers lost their storage",
        )
        if self.spec.restart:
            await self._forget_lost_cluster()
            await self._restart(stub, None)

    async def _forget_lost_cluster(self) -> None:
        """Before the stub that died starts again: what it served that cannot come back.

        A stub in memory comes back empty: the cluster it served (the cluster, tenant and
        namespace records, every topic, subscription and message) is gone, and brokers that
        kept running would serve a metadata tree that no longer has them. So its brokers are
        killed first (they hold nothing that survived, and must write nothing into the new
        stub), then started again, and re-create the defaults as at the cluster's first start.
        A durable stub comes back with its data; brokers that still run reconnect to it.
        Either way, once the stub serves, brokers that are down (their session was lost while
        the stub was away) are started again (:meth:`_start_stopped_brokers`).
        """
        if not self.state.stub.data_dir:
            self.emit(
                "stub-data-lost",
                "the storage-stub kept everything in memory: every topic, subscription "
                "and message of this cluster is gone; restarting the brokers, which re-create "
                "the cluster, tenant public and namespace public/default (--data-dir keeps data "
                "across stub restarts)",
                level=logging.WARNING,
            )
            async with anyio.create_task_group() as killing:
                for index, process in list(self._processes.items()):
                    del self._processes[index]  # its watcher stays silent: not a death
                    killing.start_soon(self._kill_broker, self.state.brokers[index], process)

    async def _start_stopped_brokers(self) -> None:
        async with anyio.create_task_group() as starting:
            for broker in self.state.brokers:
                if broker.index not in self._processes and broker.index not in self._busy:
                    starting.start_soon(self._start_broker_again, broker)

    async def _kill_broker(self, broker: BrokerState, process: Process) -> None:
        code = await processes.stop(process, sig=signal.SIGKILL)
        self._exited(broker, code)

    async def _start_broker_again(self, broker: BrokerState) -> None:
        broker.restarts += 1  # counted before the start saves the state
        try:
            await self._start_broker(broker)
        except (processes.ChildStartError, OSError) as exc:
            self._exited(broker, broker.exit_code)
            self.emit("restart-failed", f"broker {broker.index} did not start: {exc}", broker.index)
            if self.spec.restart:
                await self._restart(broker, broker.index)
            return
        self.emit(
            "broker-restarted",
            f"broker {broker.index} restarted with the stub (pid {broker.pid})",
            broker.index,
        )

    # ---- brokers -------------------------------------------------------------------------

    async def _start_zygote(self) -> None:
        """The zygote the brokers fork from (docs/architecture.md, "Brokers fork from a zygote")."""
        python = self.spec.python
        try:
            began = self._clock.now()
            zygote = await processes.Zygote.start(
                [python, "-m", "emubroker.zygote"],
                [python, "-m", "emubroker"],
                log_path=self.spec.run_dir / "zygote.log",
                task_group=self._tg,
            )
        except (processes.ChildStartError, OSError) as exc:
            log.warning("no zygote (%s); brokers start as fresh interpreters", exc)
        else:
            log.info("zygote ready in %.3f s", self._clock.now() - began)
            if self._stopping:
                await zygote.aclose()
            else:
                self._launcher = zygote
        finally:
            self._zygote_settled.set()

    def _broker_argv(self, broker: BrokerState) -> list[str]:
        argv = [self.spec.python, "-m", "emubroker", "broker"]
        argv += ["--port", str(broker.port), "--admin-port", str(broker.admin_port)]
        argv += ["--metadata-url", self.state.metadata_url, "--bookie-url", self.state.stub.url]
        argv += ["--log-level", self.spec.log_level]
        if self.spec.config:
            argv += ["--config", self.spec.config]
        return argv

    async def _start_broker(self, broker: BrokerState) -> None:
        self._busy.add(broker.index)
        began = self._clock.now()
        try:
            broker.status = ChildStatus.STARTING
            self._save()
            process, ready = await processes.spawn(
                f"broker {broker.index}",
                self._broker_argv(broker),
                ready=_BROKER_READY,
                log_path=Path(broker.log),
                task_group=self._tg,
                launcher=self._launcher,
            )
        finally:
            self._busy.discard(broker.index)
        if self._stopping:  # the cluster began to stop while this broker started
            await processes.stop(process)
            return
        # Asked for port 0, it chose: keep those ports for its restarts.
        broker.host = ready["host"]
        broker.port = int(ready["port"])
        broker.admin_port = int(ready["admin"])
        self._processes[broker.index] = process
        self._started_at[broker.index] = now = self._clock.now()
        self._running(broker, process)
        log.info("broker %d ready in %.3f s (pid %d)", broker.index, now - began, process.pid)
        self._tg.start_soon(self._watch_broker, broker, process)

    async def _watch_broker(self, broker: BrokerState, process: Process) -> None:
        code = await process.wait()
        if self._stopping or self._processes.get(broker.index) is not process:
            return
        del self._processes[broker.index]
        self._exited(broker, code)
        self.emit(
            "broker-died",
            f"broker {broker.index} ({broker.broker_id}) {processes.describe_exit(code)}",
            broker.index,
        )
        if self.spec.restart:
            await self._restart(broker, broker.index)

    async def _restart(self, child: ChildState, index: int | None) -> None:
        name = "storage-stub" if index is None else f"broker {index}"
        # The first restart is at once; a restarted child that dies young backs off.
        died_young = child.restarts > 0 and (
            self._clock.now() - self._started_at.get(index, -_YOUNG) < _YOUNG
        )
        delay = _next_backoff(self._backoff.get(index, 0.0)) if died_young else 0.0
        while not self._stopping:
            self._backoff[index] = delay
            if delay:
                log.info("restarting %s in %g s", name, delay)
                await self._clock.sleep(delay)
            if index is not None and (index in self._processes or index in self._busy):
                return  # ``cluster start`` was quicker
            child.restarts += 1
            try:
                if isinstance(child, BrokerState):
                    await self._start_broker(child)
                else:
                    await self._start_stub()
            except (processes.ChildStartError, OSError) as exc:
                self._exited(child, child.exit_code)
                self.emit("restart-failed", f"{name} did not start again: {exc}", index)
                delay = _next_backoff(delay)
                continue
            kind = "stub-restarted" if index is None else "broker-restarted"
            self.emit(kind, f"{name} restarted (pid {child.pid})", index)
            if index is None:
                await self._start_stopped_brokers()
            return

    # ---- what requests from another shell act on (``emubroker.cluster.requests``) ----------

    async def handle(self, request: control.Request) -> control.Reply:
        """Carry out a control request (``kill``, ``start``, ``stop``)."""
        return await requests.handle(self, request)

    def process_of(self, child: ChildState) -> Process | None:
        """The child's running process, if it runs."""
        process = self._processes.get(child.index) if isinstance(child, BrokerState) else self._stub
        return process if process is not None and process.returncode is None else None

    def is_starting(self, child: ChildState) -> bool:
        return isinstance(child, BrokerState) and child.index in self._busy

    async def start_child(self, child: ChildState) -> None:
        """Start a child that is not running; the stub brings the brokers back with it.

        Raises:
            ChildStartError, OSError: It did not start.
        """
        try:
            if isinstance(child, BrokerState):
                await self._start_broker(child)
            else:
                await self._forget_lost_cluster()
                await self._start_stub()
        except (processes.ChildStartError, OSError):
            self._exited(child, child.exit_code)
            raise
        if isinstance(child, StubState):
            self.emit("stub-started", f"storage-stub started (pid {child.pid})")
            await self._start_stopped_brokers()

    # ---- bookkeeping ---------------------------------------------------------------------

    def _running(self, child: ChildState, process: Process) -> None:
        child.pid = process.pid
        child.started_at = processes.start_time(process.pid)
        child.status = ChildStatus.RUNNING
        self._save()

    def _exited(self, child: ChildState, code: int | None) -> None:
        child.pid = None
        child.started_at = None
        child.exit_code = code
        child.status = ChildStatus.DEAD
        self._save()

    def emit(
        self, event: str, message: str, broker: int | None = None, *, level: int = logging.INFO
    ) -> None:
        log.log(level, "%s", message)
        name = logging.getLevelName(level).lower()
        self._on_event(ClusterEvent(event=event, message=message, broker=broker, level=name))

    def _save(self) -> None:
        write_state(self.spec.run_dir, self.state)


def leaf_errors(error: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, or ``[error]``."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for sub in error.exceptions for leaf in leaf_errors(sub)]
    return [error]


def _next_backoff(delay: float) -> float:
    return min(_MAX_BACKOFF, max(_FIRST_BACKOFF, 2 * delay))
