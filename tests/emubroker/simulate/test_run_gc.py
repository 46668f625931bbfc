"""A simulation collects garbage less often while it runs, and restores the collector after."""

from __future__ import annotations

import gc
import importlib
from pathlib import Path
from typing import Any

import pytest

from emubroker.simulate import parse_simulation

# The module, not the package's `run` function of the same name.
run_module = importlib.import_module("emubroker.simulate.run")

SCENARIO = """
name = "gc"

[cluster]
start = { brokers = 1 }

[[phases]]
name = "run"
duration = "1s"
"""


def test_the_collector_runs_every_ten_thousand_allocations_during_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A large simulation's heap holds millions of objects: at Python's default threshold (700)
    # a quarter of its CPU went to the collector.
    seen: list[tuple[int, int, int]] = []

    def loop(*args: Any, **kwargs: Any) -> tuple[None, float, int]:
        seen.append(gc.get_threshold())
        return None, 0.0, 0

    monkeypatch.setattr(run_module, "run_loop", loop)
    before = gc.get_threshold()
    run_module.run(parse_simulation(SCENARIO), tmp_path / "run")
    assert seen == [(run_module.GC_THRESHOLD, *before[1:])]
    assert run_module.GC_THRESHOLD == 10_000
    assert gc.get_threshold() == before
