"""How a run is made: the options of `loadgen run` beside its scenario."""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["RunOptions"]


class RunOptions(msgspec.Struct, frozen=True, kw_only=True):
    """The options of one run (`loadgen run`'s flags)."""

    workers: int = 1
    client: Literal["native", "official"] = "native"
    trace_dir: str | None = None
    trace_sample: float = 1.0
    histogram_file: str | None = None
    allow_loss: bool = False
    stats_interval: float = 10.0
    dashboard: bool = False
    scenario_file: str | None = None
    command: list[str] = []
