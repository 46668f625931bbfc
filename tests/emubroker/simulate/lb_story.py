"""A simulation's load balancing as text: what a failing real-time comparison prints.

A decision that differs between the clocks is explained by the numbers behind it: the reports
the leader read (each broker's usage and rates as written, and why it was written) and, per
shed, the loads the strategy compared and the bundle's short-term rate it offloaded by.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

if TYPE_CHECKING:
    from emubroker.simulate import SimulationResult

__all__ = ["load_balancing_story"]


def _line(at: float, row: dict[str, object]) -> str:
    event = row["event"]
    who = str(row["broker"]).rsplit(":", 1)[-1]
    if event == "report":
        return (
            f"{at:7.2f} {who} report {row['reason']:<12} usage {row['weighted_max_usage']:.3f} "
            f"cpu {row['cpu_percent']:.1f}% msg/s in {row['msg_rate_in']:.1f} "
            f"out {row['msg_rate_out']:.1f} bundles {row['num_bundles']}"
        )
    moved = f"{row['bundle']} {row['source_broker']} -> {row['dest_broker']}"
    if event == "shed":
        return (
            f"{at:7.2f} {who} shed {moved}: load {row['broker_load']:.3f} "
            f"cluster {row['cluster_load']:.3f} threshold {row['threshold']:.3f} "
            f"dest {row['dest_load']:.3f} bundle msg/s {row['bundle_msg_rate']:.1f} "
            f"offload {row['to_offload']:.0f} {row['offload_unit']}"
        )
    return f"{at:7.2f} {who} {event} {moved} {row['reason']}".rstrip()


def load_balancing_story(result: SimulationResult, *, until: float = float("inf")) -> str:
    """Every load-balancer trace row of a run up to ``until`` seconds, one line each, in time
    order, with the run directory (kept by pytest's ``tmp_path``) on the first line."""
    start_ns = json.loads((result.run_dir / "manifest.json").read_text())["start_ns"]
    rows = []
    for path in sorted((result.run_dir / "loadbalance").glob("*.parquet")):
        rows.extend(pq.read_table(path).to_pylist())
    rows.sort(key=lambda row: row["wall_ns"])
    lines = [f"{result.run_dir}:"]
    for row in rows:
        at = (row["wall_ns"] - start_ns) / 1e9
        if at <= until:
            lines.append(_line(at, row))
    return "\n".join(lines)
