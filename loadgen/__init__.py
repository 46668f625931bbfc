"""loadgen: a load generator for Pulsar with scenarios, fault events and per-message traces.

`loadgen produce|consume` take `pulsar-perf`'s flags; `loadgen run SCENARIO.toml` runs an
experiment with phases and timed events. Every run writes its traces (Parquet, schema in
docs/loadgen-trace.md) under one directory per run.
"""

from __future__ import annotations

__version__ = "0.1.0"
