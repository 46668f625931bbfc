"""emubroker: a Python emulator of an Apache Pulsar cluster for the official Pulsar clients."""

from __future__ import annotations

__version__ = "0.1.0"
"""The package's version, as in pyproject.toml (a test keeps them equal). A constant rather than
``importlib.metadata.version("emubroker")``: that lookup imports ``importlib.metadata`` and scans
``sys.path``'s distributions, ~8 ms of CPU and ~0.8 MiB in a starting broker, and it reported
nothing from a source tree never installed (docs/performance.md, "Start-up where users wait")."""
