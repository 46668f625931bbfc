"""Task steps and rounds of the event loop in one ``emubroker simulate`` run, by task.

    python bench/simulate_steps.py [--brokers 3] [--topics 100] [--rate 1] [--duration 30]

Runs ``bench/simulate_speed.py``'s scenario once on the virtual clock with a trio
``Instrument`` that counts each task's steps and their CPU (the instrument's own cost
included), and the rounds of the loop (its I/O waits). In a simulation every step is a round
of trio's loop paid per message, so the counts say which task wakes how often per message
sent (docs/performance.md). Tasks are named by the last three parts of their function's
qualified name.
"""

from __future__ import annotations

import argparse
import collections
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simulate_speed import scenario

from emubroker import simulate
from emubroker.simulate import loop


class Steps(trio.abc.Instrument):
    """Steps and their CPU per task name; rounds of the loop."""

    def __init__(self) -> None:
        self.steps: collections.Counter[str] = collections.Counter()
        self.cpu: collections.Counter[str] = collections.Counter()
        self.rounds = 0
        self._started = 0.0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._started = time.process_time()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        name = ".".join(task.name.split(".")[-3:])
        self.steps[name] += 1
        self.cpu[name] += time.process_time() - self._started

    def before_io_wait(self, timeout: float) -> None:
        self.rounds += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--rate", type=float, default=1.0)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    steps = Steps()
    run = loop.anyio.run

    def instrumented(*a: Any, **kw: Any) -> Any:
        kw["backend_options"] = {**(kw.get("backend_options") or {}), "instruments": [steps]}
        return run(*a, **kw)

    loop.anyio.run = instrumented  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "scenario.toml")
        path.write_text(scenario(args.brokers, args.topics, args.rate, args.duration))
        started = time.process_time()
        result = simulate.run(path, Path(tmp, "run"))
        cpu = time.process_time() - started
    sent = result.run.rows.get("sends", 0)
    per = max(sent, 1)
    print(
        f"CPU {cpu:.2f} s, {sent} sent, {sum(steps.steps.values())} task steps "
        f"({sum(steps.steps.values()) / per:.2f} per message sent), {steps.rounds} rounds "
        f"({steps.rounds / per:.2f})"
    )
    for name, count in steps.steps.most_common(args.top):
        print(f"{name:48.48s} {count:8d} {count / per:7.2f}/msg {steps.cpu[name]:7.2f} s")


if __name__ == "__main__":
    main()
