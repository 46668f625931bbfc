"""Time from exec of ``emubroker standalone`` to its ready line, its CPU and its idle memory.

    python bench/standalone_startup.py [--runs 10] [--baseline TREE]

Each run spawns ``python -m emubroker standalone --port 0 --admin-port 0`` and measures:

- ``ready``: seconds from the spawn to the ready line on stdout;
- ``cpu``: the process's CPU seconds at that moment: the time its threads ran on a core, to the
  nanosecond (Linux's ``/proc/PID/task/*/schedstat``), else user + system from psutil (clock
  ticks of 10 ms);
- ``unqueued``: ``ready`` minus the seconds the process spent runnable but waiting for a core
  by then (Linux's ``/proc/PID/schedstat``; 0 elsewhere): on a shared machine, what the start
  would take on a quiet one;
- ``rss``: its resident memory in MiB one second later (idle, nothing connected).

Then the process is stopped with SIGINT. Runs use bytecode caches, as an installed broker does;
``--no-bytecode-cache`` removes the trees' own caches (``emubroker``, ``protocol``,
``storage_stub``) and runs with PYTHONDONTWRITEBYTECODE=1, so that every start compiles them from
source, as a checkout run with that setting does. With ``--baseline TREE`` (another checkout, e.g.
``git worktree add --detach /tmp/base main``) every run is paired with the same run of that tree,
one right after the other, and the ratio current/baseline of each pair is printed as well: on a
shared machine the ratios hold when the absolute figures drift. Medians (min-max).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil
from brokerproc import queued_seconds, running_seconds

ROOT = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024
FIGURES = ("ready", "unqueued", "cpu", "rss")


PACKAGES = ("emubroker", "protocol", "storage_stub")


def one_run(tree: Path, *, cached: bool = True) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONUNBUFFERED="1")
    if cached:
        # As an installed broker runs: from bytecode caches (the warm-up run writes them).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    began = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "emubroker", "standalone", "--port", "0", "--admin-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=tree,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "ready" in line:
                break
        else:
            raise RuntimeError("no ready line")
        ready = time.perf_counter() - began
        me = psutil.Process(proc.pid)
        times = me.cpu_times()
        running = running_seconds(proc.pid)
        queued = queued_seconds(proc.pid)
        time.sleep(1.0)
        rss = me.memory_info().rss / MIB
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    cpu = running if running is not None else times.user + times.system
    return {"ready": ready, "unqueued": ready - queued, "cpu": cpu, "rss": rss}


def _summary(values: list[float]) -> str:
    return f"{statistics.median(values):6.3f} ({min(values):.3f}-{max(values):.3f})"


def _row(label: str, runs: list[dict[str, float]]) -> str:
    return f"{label:<18}" + "  ".join(f"{_summary([r[f] for r in runs]):>22}" for f in FIGURES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--baseline", type=Path, help="another tree to pair every run with")
    parser.add_argument(
        "--no-bytecode-cache", action="store_true", help="compile the trees' modules every start"
    )
    args = parser.parse_args()
    cached = not args.no_bytecode_cache

    trees = [tree for tree in (ROOT, args.baseline) if tree is not None]
    for tree in trees:
        if not cached:
            for package in PACKAGES:
                for cache in list((tree / package).rglob("__pycache__")):
                    shutil.rmtree(cache)
        one_run(tree, cached=cached)  # warm the file cache (and write the bytecode caches)
    current: list[dict[str, float]] = []
    baseline: list[dict[str, float]] = []
    for _ in range(args.runs):
        if args.baseline is not None:
            baseline.append(one_run(args.baseline, cached=cached))
        current.append(one_run(ROOT, cached=cached))
    how = "bytecode caches" if cached else "no bytecode caches"
    load = os.getloadavg()[0]
    print(f"emubroker standalone, {args.runs} runs, {how}: median (min-max); load {load:.1f}")
    print(f"{'':<18}" + "  ".join(f"{f + (' MiB' if f == 'rss' else ' s'):>22}" for f in FIGURES))
    print(_row("current", current))
    if args.baseline is not None:
        print(_row("baseline", baseline))
        ratios = [
            {f: cur[f] / base[f] for f in FIGURES}
            for cur, base in zip(current, baseline, strict=True)
        ]
        print(_row("current/baseline", ratios))


if __name__ == "__main__":
    main()
