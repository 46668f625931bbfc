"""Start-up and stop time of the ``pulsar_cluster`` fixture, against ``pulsar_broker``'s.

    python bench/fixture_startup.py [--brokers 1 3 5] [--runs 20] [--process-runs 3]

For each N, times ``run_pulsar_cluster(N)`` (what the fixture runs) from the call until the
handle is yielded (every broker serving on its ports, broker 0 leading) and from the end of the
block until everything stopped. Each cluster run is paired with a run of
``run_broker_in_thread()`` (what ``pulsar_broker`` runs), one after the other, and the ratio of
each pair is reported as well: on a shared machine the ratios hold when absolute times drift.
Modules are imported before the first run (a test session pays that once); one warm-up run of
each is not counted. Then ``mode="processes"`` for the largest N, a few runs, unpaired.

Prints medians (and min-max) in milliseconds.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from emubroker.testing import run_broker_in_thread, run_pulsar_cluster


def timed(open_: Callable[[], AbstractContextManager[Any]]) -> tuple[float, float]:
    """(start, stop) seconds of one run."""
    began = time.perf_counter()
    with open_():
        ready = time.perf_counter()
    return ready - began, time.perf_counter() - ready


def summary(values: list[float], scale: float = 1000.0) -> str:
    med = statistics.median(values) * scale
    return f"{med:8.1f} ({min(values) * scale:.1f}-{max(values) * scale:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", type=int, nargs="+", default=[1, 3, 5])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--process-runs", type=int, default=3)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the brokers' start-up warnings, once per broker

    timed(run_broker_in_thread)
    for n in args.brokers:
        timed(lambda n=n: run_pulsar_cluster(n))
    print("runs", args.runs, "(medians, min-max, ms)")
    print(f"{'what':<24} {'start':>22} {'stop':>22} {'start / pulsar_broker':>22}")
    rows: dict[str, tuple[list[float], list[float], list[float]]] = {}
    baseline: tuple[list[float], list[float]] = ([], [])
    for _ in range(args.runs):
        for n in args.brokers:
            start, stop = timed(lambda n=n: run_pulsar_cluster(n))
            base_start, base_stop = timed(run_broker_in_thread)
            baseline[0].append(base_start)
            baseline[1].append(base_stop)
            starts, stops, ratios = rows.setdefault(f"pulsar_cluster({n})", ([], [], []))
            starts.append(start)
            stops.append(stop)
            ratios.append(start / base_start)
    print(f"{'pulsar_broker':<24} {summary(baseline[0]):>22} {summary(baseline[1]):>22}")
    for name, (starts, stops, ratios) in rows.items():
        ratio = summary(ratios, scale=1.0)
        print(f"{name:<24} {summary(starts):>22} {summary(stops):>22} {ratio:>22}")
    if args.process_runs:
        n = max(args.brokers)
        runs = [
            timed(lambda: run_pulsar_cluster(n, mode="processes")) for _ in range(args.process_runs)
        ]
        print(
            f"{f'processes({n})':<24} {summary([r[0] for r in runs]):>22} "
            f"{summary([r[1] for r in runs]):>22}"
        )


if __name__ == "__main__":
    main()
