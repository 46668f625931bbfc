"""CPU and wall time of a large simulation: 20 brokers, 1,000 bundles, an hour of light traffic.

    python bench/simulate_scale.py [--duration 60m] [--runs 1] [--trees DIR ...]

Runs ``loadgen/scenarios/scale-20-brokers.toml`` (``--duration`` replaces its one phase's
length) with ``emubroker simulate`` in a fresh process, and prints the simulated time, the CPU
seconds of the process (``time.process_time`` around ``simulate.run``: set-up and shut-down
count, imports do not), the wall seconds, the messages sent and received, how many decisions
the load balancer made and its trace rows (its reports, placements and the leader's shedding
cycles are all in it). The CPU is split in three where loadgen's runner tells its workers to
start (``Go``) and to stop producing (``StopProducers``): the set-up (the cluster, the topics,
every producer and consumer created, looked up and attached), the traffic (per simulated second
of the phase) and the end (draining, closing, the brokers' shut-down). ``--trees`` runs the same
from other source trees, alternately, as ``bench/simulate_speed.py`` does; each line ends with
the load average of the machine when the run ended.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from loadgen import durations

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "loadgen" / "scenarios" / "scale-20-brokers.toml"

_RUN = """
import json, logging, sys, time
from collections import Counter
from pathlib import Path
import pyarrow.parquet as pq
logging.disable(logging.WARNING)
from emubroker import simulate
from loadgen import live_run
from loadgen.messages import Go, StopProducers
marks = {}
broadcast = live_run.LiveRun.broadcast
async def marking(self, message):  # the CPU when the traffic starts and when it stops
    if isinstance(message, Go | StopProducers):
        marks.setdefault(type(message).__name__, time.process_time())
    await broadcast(self, message)
live_run.LiveRun.broadcast = marking
started = time.process_time()
result = simulate.run(sys.argv[1], sys.argv[2])
cpu = time.process_time() - started
go, stop = marks["Go"] - started, marks["StopProducers"] - started
rows = result.run.rows
events = Counter()
for path in Path(sys.argv[2], "loadbalance").glob("*.parquet"):
    events.update(pq.read_table(path, columns=["event"]).column("event").to_pylist())
print(json.dumps({"simulated": result.simulated_seconds, "wall": result.wall_seconds, "cpu": cpu,
                  "setup": go, "traffic": stop - go, "end": cpu - stop,
                  "messages": rows.get("sends", 0) + rows.get("receives", 0),
                  "decisions": len(result.decisions), "loadbalance": dict(events)}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", default="60m", help='the phase\'s length ("60m", "300s")')
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--trees", type=Path, nargs="+", default=[ROOT])
    args = parser.parse_args()
    text = re.sub(r'duration = "60m"', f'duration = "{args.duration}"', SCENARIO.read_text())
    phase = durations.parse_duration(args.duration)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "scale.toml")
        path.write_text(text)
        for _ in range(args.runs):
            for tree in (t.resolve() for t in args.trees):
                done = subprocess.run(
                    [sys.executable, "-c", _RUN, str(path), str(Path(tmp, "run"))],
                    capture_output=True,
                    text=True,
                    check=True,
                    cwd=tree,
                    env=dict(os.environ, PYTHONPATH=str(tree)),
                )
                result = json.loads(done.stdout.strip().splitlines()[-1])
                print(
                    f"{tree.name}: {result['simulated']:.0f} simulated s in "
                    f"{result['cpu']:.1f} CPU s ({result['simulated'] / result['cpu']:.0f}x), "
                    f"{result['wall']:.1f} wall s; CPU s: set-up {result['setup']:.1f}, "
                    f"traffic {result['traffic']:.1f} ({result['traffic'] / phase:.4f} per "
                    f"simulated s), end {result['end']:.1f}; load average "
                    f"{os.getloadavg()[0]:.1f}; {result['messages']:,} messages sent and "
                    f"received; {result['decisions']} decisions; load balancer rows "
                    f"{result['loadbalance']}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
