"""Child processes: start one, wait for its ready line, stop it (the supervisor's and loadgen's).

A leaf: it imports nothing of ours, so ``emubroker.cluster`` and ``loadgen`` (which starts
brokers, the stub and ``emubroker cluster`` as processes) share it.
"""

from __future__ import annotations

from emubroker.processes.children import (
    READY_TIMEOUT,
    STOP_TIMEOUT,
    ChildStartError,
    describe_exit,
    parse_signal,
    spawn,
    start_time,
    stop,
)

__all__ = [
    "READY_TIMEOUT",
    "STOP_TIMEOUT",
    "ChildStartError",
    "describe_exit",
    "parse_signal",
    "spawn",
    "start_time",
    "stop",
]
