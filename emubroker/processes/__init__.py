"""Child processes: start one (exec'd, or forked by a zygote), wait for its ready line, stop it.

A leaf: it imports nothing of ours, so ``emubroker.cluster`` and ``loadgen`` (which starts
brokers, the stub and ``emubroker cluster`` as processes) share it.
"""

from __future__ import annotations

from emubroker.processes.children import (
    EXEC,
    READY_TIMEOUT,
    STOP_TIMEOUT,
    ChildStartError,
    Exec,
    Launcher,
    describe_exit,
    parse_signal,
    spawn,
    start_time,
    stop,
)
from emubroker.processes.zygote import ForkedProcess, Zygote

__all__ = [
    "EXEC",
    "READY_TIMEOUT",
    "STOP_TIMEOUT",
    "ChildStartError",
    "Exec",
    "ForkedProcess",
    "Launcher",
    "Zygote",
    "describe_exit",
    "parse_signal",
    "spawn",
    "start_time",
    "stop",
]
