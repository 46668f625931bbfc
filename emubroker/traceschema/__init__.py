"""Every trace's schema, for the code that writes it and the code that reads it.

A leaf: it imports nothing of ours, so loadgen, its analysis and the brokers all use it
(pyproject's import contracts). ``table.TraceTable`` holds the rules every trace follows;
``loadgen`` has the run's tables, ``dispatch`` and ``loadbalance`` the brokers' traces.
"""

from __future__ import annotations

from emubroker.traceschema.dispatch import DISPATCH
from emubroker.traceschema.loadbalance import LOADBALANCE
from emubroker.traceschema.loadgen import LOADGEN_TABLES
from emubroker.traceschema.table import TraceTable, UnreadableTraceError

__all__ = [
    "BROKER_TRACES",
    "DISPATCH",
    "LOADBALANCE",
    "LOADGEN_TABLES",
    "TraceTable",
    "UnreadableTraceError",
]

BROKER_TRACES = {"dispatch": DISPATCH, "loadbalance": LOADBALANCE}
"""The brokers' traces, by their directory in a run."""
