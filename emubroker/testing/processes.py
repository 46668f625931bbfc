"""A test cluster of real processes: ``emubroker cluster``'s supervisor, driven in-thread.

The supervisor (``emubroker.cluster.open_cluster``) runs on a background thread's event loop
and starts the ``storage-stub`` process and N ``emubroker broker`` processes on free ports, with
a run directory of their own (removed afterwards). ``kill`` is SIGKILL (the broker's metadata
session then expires after ``metadataStoreSessionTimeoutMillis``), ``stop`` is SIGTERM
(Pulsar's graceful shutdown), ``start`` starts the broker again on its ports.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from anyio.from_thread import start_blocking_portal

from emubroker.cluster import ClusterSpec, open_cluster
from emubroker.cluster.control import KillBroker, Reply, StartBroker
from emubroker.cluster.state import ChildStatus
from emubroker.testing.backend import BrokerHandle
from emubroker.testing.errors import PulsarClusterError
from protocol.clock import AnyioClock
from storage_stub.client import open_stub_client

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from anyio.from_thread import BlockingPortal

    from emubroker.cluster import Cluster
    from storage_stub.client import StubClient

__all__ = ["ProcessCluster", "run_process_cluster"]

_EXIT_TIMEOUT: Final = 30.0
_POLL: Final = 0.02


class ProcessCluster:
    """The broker processes of :func:`run_process_cluster` (a ``ClusterBackend``)."""

    mode = "processes"

    def __init__(self, portal: BlockingPortal, cluster: Cluster, stub: StubClient) -> None:
        self.portal = portal
        self.stub = stub
        self._cluster = cluster

    def brokers(self) -> list[BrokerHandle]:
        return [
            BrokerHandle(
                index=b.index, id=b.broker_id, service_url=b.service_url, admin_url=b.admin_url
            )
            for b in self._cluster.state.brokers
        ]

    def is_running(self, index: int) -> bool:
        return self._cluster.state.brokers[index].status is ChildStatus.RUNNING

    def kill(self, index: int) -> None:
        self._signal(index, "KILL")

    def stop(self, index: int) -> None:
        self._signal(index, "TERM")

    def start(self, index: int) -> None:
        self._ask(StartBroker(str(index)))

    def _signal(self, index: int, signal: str) -> None:
        self._ask(KillBroker(str(index), signal))
        self.portal.call(self._exited, index)

    def _ask(self, request: KillBroker | StartBroker) -> None:
        reply: Reply = self.portal.call(self._cluster.handle, request)
        if not reply.ok:
            raise PulsarClusterError(f"the cluster supervisor refused: {reply.message}")

    async def _exited(self, index: int) -> None:
        # The supervisor marks the broker dead once it has reaped the process.
        clock = AnyioClock()
        deadline = clock.now() + _EXIT_TIMEOUT
        broker = self._cluster.state.brokers[index]
        while broker.status is ChildStatus.RUNNING:
            if clock.now() > deadline:
                raise PulsarClusterError(
                    f"broker {index} (pid {broker.pid}) did not exit within {_EXIT_TIMEOUT:g} s"
                )
            await clock.sleep(_POLL)


def _properties(overrides: Mapping[str, Any]) -> str:
    def text(value: Any) -> str:
        return str(value).lower() if isinstance(value, bool) else str(value)

    return "".join(f"{key}={text(value)}\n" for key, value in overrides.items())


@contextlib.contextmanager
def run_process_cluster(brokers: int, overrides: Mapping[str, Any]) -> Iterator[ProcessCluster]:
    """Start a supervisor with ``brokers`` broker processes; stop everything on exit.

    Args:
        brokers: How many.
        overrides: ``broker.conf`` keys every broker loads (written to a file in the run
            directory).
    """
    with contextlib.ExitStack() as stack:
        run_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="emubroker-")))
        config = run_dir / "broker.conf"
        config.write_text(_properties(overrides))
        spec = ClusterSpec(
            brokers=brokers,
            port=0,
            run_dir=run_dir / "run",
            config=str(config),
            log_level="WARNING",
        )
        portal = stack.enter_context(start_blocking_portal("asyncio"))
        cluster = stack.enter_context(portal.wrap_async_context_manager(open_cluster(spec)))
        stub = stack.enter_context(
            portal.wrap_async_context_manager(open_stub_client(cluster.state.stub.url))
        )
        yield ProcessCluster(portal, cluster, stub)
