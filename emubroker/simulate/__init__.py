"""``emubroker simulate``: a cluster, its bookie stub and loadgen's traffic on a virtual clock.

The one part of ``emubroker`` that composes the broker with ``loadgen`` (its scenario format,
its workers and its traces), so that a load-balancing experiment of many minutes runs in one
process in seconds and gives the same traces every time. docs/simulate.md describes it.
"""

from __future__ import annotations

from emubroker.simulate.run import Decision, SimulationResult, decisions_of, run, trace_digests
from emubroker.simulate.scenario import (
    Simulation,
    SimulationError,
    load_simulation,
    parse_simulation,
)

__all__ = [
    "Decision",
    "Simulation",
    "SimulationError",
    "SimulationResult",
    "decisions_of",
    "load_simulation",
    "parse_simulation",
    "run",
    "trace_digests",
]
