"""Simulated seconds per wall second of ``emubroker simulate``, by cluster size and traffic.

    python bench/simulate_speed.py [--brokers 3 10] [--topics 100] [--rates 0 0.1 1]
                                   [--duration 120] [--runs 3]

For each broker count and per-topic rate, builds a scenario of ``--topics`` topics over
``4 x brokers`` bundles, one producer and one consumer per topic sending ``rate`` msg/s each
(0: no producer or consumer at all, the cluster's own load-balancing and keep-alive work only),
and runs it ``--runs`` times on the virtual clock for ``--duration`` simulated seconds, each run
in a fresh process (the first run of a process pays its imports). Prints, per case, the median
and range of simulated seconds per wall second and of wall microseconds per message (sent plus
received). The whole run, set-up and shut-down included, counts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_RUN = """
import json, logging, sys
logging.disable(logging.WARNING)
from emubroker import simulate
result = simulate.run(sys.argv[1], sys.argv[2])
rows = result.run.rows
print(json.dumps({"simulated": result.simulated_seconds, "wall": result.wall_seconds,
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


def run_once(path: Path, out: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _RUN, str(path), str(out)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", type=int, nargs="+", default=[3, 10])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--rates", type=float, nargs="+", default=[0.0, 0.1, 1.0])
    parser.add_argument("--duration", type=float, default=120.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(
        f"{'brokers':>7} {'topics':>6} {'msg/s/topic':>11} {'sim s/wall s':>22} "
        f"{'wall us/message':>22}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for brokers in args.brokers:
            for rate in args.rates:
                path = Path(tmp, f"b{brokers}-r{rate:g}.toml")
                path.write_text(scenario(brokers, args.topics, rate, args.duration))
                runs = [run_once(path, Path(tmp, "run")) for _ in range(args.runs)]
                speed = [r["simulated"] / r["wall"] for r in runs]
                cost = [1e6 * r["wall"] / r["messages"] for r in runs if r["messages"]]
                cost_text = (
                    f"{statistics.median(cost):8.0f} ({min(cost):.0f}-{max(cost):.0f})"
                    if cost
                    else f"{'-':>8}"
                )
                print(
                    f"{brokers:>7} {args.topics:>6} {rate:>11g} "
                    f"{statistics.median(speed):8.1f} ({min(speed):.1f}-{max(speed):.1f})"
                    f"{'':>4} {cost_text}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
