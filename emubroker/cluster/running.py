"""Running a cluster from Python: :func:`open_cluster` (the supervisor is ``Cluster``)."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from emubroker import processes
from emubroker.cluster import control
from emubroker.cluster.state import CONTROL_SOCKET, ClusterStatus, hold_run_dir
from emubroker.cluster.supervisor import Cluster, leaf_errors
from protocol.clock import AnyioClock

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from emubroker.cluster.spec import ClusterEvent, ClusterSpec
    from protocol.clock import Clock

__all__ = ["leaf_errors", "open_cluster"]


@asynccontextmanager
async def open_cluster(
    spec: ClusterSpec,
    *,
    on_event: Callable[[ClusterEvent], None] = lambda event: None,
    clock: Clock | None = None,
) -> AsyncIterator[Cluster]:
    """Start a cluster; stop it (brokers first, then the stub) when the block exits.

    Args:
        spec: What to run.
        on_event: Told about deaths, restarts and requests while the cluster runs.
        clock: Times restart back-off; the event loop's by default.

    Yields:
        The cluster, once every broker serves.

    Raises:
        RunDirLockedError: Another supervisor runs in ``spec.run_dir``.
        ChildStartError: The stub or a broker did not start (everything started is stopped).
        OSError: A child cannot be spawned.
    """
    failure: Exception | None = None
    with hold_run_dir(spec.run_dir):
        async with anyio.create_task_group() as tg:
            cluster = Cluster(spec, tg, clock or AnyioClock(), on_event)
            try:
                try:
                    await cluster.start_all()
                except (processes.ChildStartError, OSError) as exc:
                    # Raised as itself below, not inside the task group's exception group.
                    cluster.state.status = ClusterStatus.FAILED
                    failure = exc
                else:
                    await tg.start(
                        control.serve_control, spec.run_dir / CONTROL_SOCKET, cluster.handle
                    )
                    yield cluster
            finally:
                with anyio.CancelScope(shield=True):
                    await cluster.stop_all()
                tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
