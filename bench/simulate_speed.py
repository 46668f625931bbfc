"""Simulated seconds per CPU second of ``emubroker simulate``, by cluster size and traffic.

    python bench/simulate_speed.py [--brokers 3 10] [--topics 100] [--rates 0 0.1 1]
                                   [--duration 120] [--runs 3] [--trees DIR ...]

For each broker count and per-topic rate, builds a scenario of ``--topics`` topics over
``4 x brokers`` bundles, one producer and one consumer per topic sending ``rate`` msg/s each
(0: no producer or consumer at all, the cluster's own load-balancing and keep-alive work only),
and runs it ``--runs`` times on the virtual clock for ``--duration`` simulated seconds, each run
in a fresh process (the first run of a process pays its imports). The run is measured in CPU
seconds of its process (``time.process_time``, from the call of ``simulate.run`` to its return:
set-up and shut-down count, imports do not), not wall seconds: on a machine shared with other
jobs a wall-clock figure says more about the neighbours than about the simulator. Prints, per
case, the median and range of simulated seconds per CPU second and of CPU microseconds per
message (sent plus received).

``--trees`` compares source trees (e.g. one exported with ``git archive``): each round runs
every tree once, one after the other, so that load on the machine falls on all of them alike,
and the line of each tree after the first gives its CPU per run relative to the first's
(median of the per-round ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_RUN = """
import json, logging, sys, time
logging.disable(logging.WARNING)
from emubroker import simulate
started = time.process_time()
result = simulate.run(sys.argv[1], sys.argv[2])
cpu = time.process_time() - started
rows = result.run.rows
print(json.dumps({"simulated": result.simulated_seconds, "wall": result.wall_seconds, "cpu": cpu,
                  "messages": rows.get("sends", 0) + rows.get("receives", 0)}))
"""


def scenario(brokers: int, topics: int, rate: float, duration: float) -> str:
    lines = [
        f'name = "bench-{brokers}b-{topics}t-{rate:g}"',
        "seed = 1",
        "[cluster.start]",
        f"brokers = {brokers}",
        f"config = {{ defaultNumberOfNamespaceBundles = {4 * brokers} }}",
    ]
    for index in range(topics):
        lines += ["[[topics]]", f'name = "bench-{index}"']
        if rate:
            lines += [
                "[[producers]]",
                f'name = "p{index}"',
                f'topic = "bench-{index}"',
                f"rate = {rate}",
                "size = 100",
                "[[consumers]]",
                f'name = "c{index}"',
                f'topic = "bench-{index}"',
                'subscription = "bench"',
            ]
    lines += ["[[phases]]", 'name = "run"', f'duration = "{duration:g}s"']
    return "\n".join(lines) + "\n"


def run_once(path: Path, out: Path, tree: Path = ROOT) -> dict[str, float]:
    """One simulation of the scenario at ``path`` in a fresh process, with ``tree``'s code."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(
        [sys.executable, "-c", _RUN, str(path), str(out)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tree,
        env=env,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _range(values: list[float], digits: int) -> str:
    median = statistics.median(values)
    return f"{median:8.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", type=int, nargs="+", default=[3, 10])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--rates", type=float, nargs="+", default=[0.0, 0.1, 1.0])
    parser.add_argument("--duration", type=float, default=120.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--trees", type=Path, nargs="+", default=[ROOT])
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.trees]
    print(
        f"{'tree':>8} {'brokers':>7} {'topics':>6} {'msg/s/topic':>11} {'sim s/CPU s':>24} "
        f"{'CPU us/message':>24} {'CPU vs 1st':>10}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for brokers in args.brokers:
            for rate in args.rates:
                path = Path(tmp, f"b{brokers}-r{rate:g}.toml")
                path.write_text(scenario(brokers, args.topics, rate, args.duration))
                runs: list[list[dict[str, float]]] = [[] for _ in trees]
                for _ in range(args.runs):
                    for index, tree in enumerate(trees):
                        runs[index].append(run_once(path, Path(tmp, "run"), tree))
                for index, tree_runs in enumerate(runs):
                    speed = [r["simulated"] / r["cpu"] for r in tree_runs]
                    cost = [1e6 * r["cpu"] / r["messages"] for r in tree_runs if r["messages"]]
                    ratios = [
                        r["cpu"] / first["cpu"] for r, first in zip(tree_runs, runs[0], strict=True)
                    ]
                    print(
                        f"{trees[index].name[-8:]:>8} {brokers:>7} {args.topics:>6} {rate:>11g} "
                        f"{_range(speed, 1)} {_range(cost, 0) if cost else '-':>24} "
                        f"{statistics.median(ratios):>10.2f}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
