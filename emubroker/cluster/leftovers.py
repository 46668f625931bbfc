"""Children a supervisor left running when it died without stopping them (``kill -9``).

Children run in sessions of their own (``emubroker.processes``), so they outlive a
supervisor that could not stop them. The state file names them by pid and start time; a process
with that pid *and* that start time is ours (a pid alone may have been reused since).
``emubroker cluster stop`` and the next ``emubroker cluster`` in the same run directory stop
them, brokers first, as the supervisor would have.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Final

import psutil

from emubroker.processes import STOP_TIMEOUT

if TYPE_CHECKING:
    from emubroker.cluster.state import ChildState, ClusterState

__all__ = ["stop_leftovers"]

log = logging.getLogger(__name__)

# psutil reports start times rounded to the clock tick (10 ms on Linux).
_START_TIME_SLACK: Final = 0.05


def _ours(child: ChildState) -> psutil.Process | None:
    if child.pid is None or child.started_at is None:
        return None
    try:
        process = psutil.Process(child.pid)
        if abs(process.create_time() - child.started_at) > _START_TIME_SLACK:
            return None
    except psutil.Error:
        return None
    return process


def _stop(processes: list[psutil.Process], timeout: float) -> None:
    for process in processes:
        log.warning("stopping pid %s, left running by an earlier supervisor", process.pid)
        with contextlib.suppress(psutil.Error):  # it may have exited meanwhile
            process.terminate()
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=timeout)


def stop_leftovers(state: ClusterState, *, timeout: float = STOP_TIMEOUT) -> list[int]:
    """Stop the children named in ``state`` that still run: brokers, then the stub.

    Returns:
        The pids that were stopped.
    """
    brokers = [p for p in map(_ours, state.brokers) if p is not None]
    stub = [p for p in [_ours(state.stub)] if p is not None]
    _stop(brokers, timeout)
    _stop(stub, timeout)
    return [p.pid for p in brokers + stub]
