"""What ``emubroker cluster kill|start|stop`` do to a running cluster (``Cluster.handle``).

A request names a child as the command line does: ``stub`` for the storage-stub, a broker by
its index, ``host:port`` or URL (``emubroker.cluster.state.find_broker``). Every answer is one
:class:`~emubroker.cluster.control.Reply`; a name, a signal or a state that does not fit is an
answer with ``ok=False`` and the reason, never an exception.

The requests act on what :class:`Supervised` names; the supervisor's ``Cluster`` is one (it
calls :func:`handle` with itself), so this module needs nothing of the supervisor's.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from emubroker import processes
from emubroker.cluster import control
from emubroker.cluster.state import (
    STUB,
    BrokerState,
    ChildState,
    ClusterState,
    UnknownBrokerError,
    find_broker,
)

if TYPE_CHECKING:
    import anyio
    from anyio.abc import Process

__all__ = ["Supervised", "handle"]


class Supervised(Protocol):
    """What a request acts on: a running cluster's state, processes and events."""

    @property
    def state(self) -> ClusterState: ...

    @property
    def stop_requested(self) -> anyio.Event: ...

    def process_of(self, child: ChildState) -> Process | None:
        """The child's running process, if it runs."""
        ...

    def is_starting(self, child: ChildState) -> bool: ...

    async def start_child(self, child: ChildState) -> None:
        """Start a child that is not running (raises ChildStartError or OSError)."""
        ...

    def emit(
        self, event: str, message: str, broker: int | None = None, *, level: int = logging.INFO
    ) -> None: ...


async def handle(cluster: Supervised, request: control.Request) -> control.Reply:
    """Carry out ``request`` on ``cluster``."""
    match request:
        case control.StopCluster():
            cluster.stop_requested.set()
            return control.Reply(ok=True, message="stopping the cluster")
        case control.KillBroker(name, sig_name):
            try:
                child = _find(cluster.state, name)
                sig = processes.parse_signal(sig_name)
            except (UnknownBrokerError, ValueError) as exc:
                return control.Reply(ok=False, message=str(exc))
            process = cluster.process_of(child)
            if process is None:
                return control.Reply(ok=False, message=f"{_called(child)} is not running")
            process.send_signal(sig)
            message = f"sent {sig.name} to {_called(child)} (pid {process.pid})"
            index = child.index if isinstance(child, BrokerState) else None
            event = "stub-signalled" if index is None else "broker-signalled"
            cluster.emit(event, message, index)
            return control.Reply(ok=True, message=message)
        case control.StartBroker(name):
            try:
                child = _find(cluster.state, name)
            except UnknownBrokerError as exc:
                return control.Reply(ok=False, message=str(exc))
            if cluster.process_of(child) is not None or cluster.is_starting(child):
                return control.Reply(ok=False, message=f"{_called(child)} is running or starting")
            try:
                await cluster.start_child(child)
            except (processes.ChildStartError, OSError) as exc:
                return control.Reply(ok=False, message=str(exc))
            message = f"{_called(child)} started (pid {child.pid})"
            if isinstance(child, BrokerState):
                cluster.emit("broker-started", message, child.index)
                return control.Reply(ok=True, message=message)
            running = sum(cluster.process_of(b) is not None for b in cluster.state.brokers)
            brokers = len(cluster.state.brokers)
            return control.Reply(ok=True, message=f"{message}; {running} of {brokers} brokers run")
    raise AssertionError(f"unhandled request {request!r}")  # pragma: no cover


def _find(state: ClusterState, name: str) -> ChildState:
    return state.stub if name.strip().lower() == STUB else find_broker(state, name)


def _called(child: ChildState) -> str:
    return f"broker {child.index}" if isinstance(child, BrokerState) else "the storage-stub"
