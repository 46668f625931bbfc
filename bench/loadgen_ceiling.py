"""loadgen's own ceiling beside what the broker delivers to a bare client, and what tracing costs.

Usage: python bench/loadgen_ceiling.py [--sizes 100,1024] [--messages N] [--batched-messages N]
                                       [--only ceiling|tracing|cpu] [--rounds R]
                                       [--baseline TREE] [--batched yes|no|both]

Starts ``emubroker standalone`` and runs, side by side, for payloads of 100 B and 1 KiB, batched
and not:

* the raw loopback relay of ``bench/throughput.py`` (no protocol work: the I/O floor);
* the bare ``protocol.client`` producer and consumer in two processes (``bench/throughput.py``'s
  split case): what the broker delivers when the client does nothing else;
* ``loadgen run`` with one producer and one consumer at rate 0 (as fast as possible), every
  message traced, with ``--workers 1`` and ``--workers 2``.

loadgen's rate is receipted messages over its first send to its last delivery (the manifest's
``first_send_ns`` / ``last_receive_ns``); its ratio to the bare client is the figure to judge
(goal: at least 0.9, so that loadgen is never what limits an experiment). The broker's CPU per
message (psutil, user + system) is printed for every case. ``--only tracing`` runs the batched
100 B case with every message traced, 1 % sampled and none.

``--only cpu`` measures what each message costs the client processes in CPU time, which a busy
machine disturbs far less than it disturbs rates: the bare client's two processes against
``loadgen run`` (runner and workers), traced fully and not at all, alternating case by case in
each round. A process's CPU is read when it has ended (``RUSAGE_CHILDREN``: loadgen's runner
waits for its workers, so theirs is included), and each case runs twice, with
``--batched-messages`` and with a tenth of it, so that start-up, imports and connecting cancel
out: CPU µs per message is the difference of the two runs' CPU over the difference of their
messages. ``--baseline TREE`` runs loadgen from another source tree as well (e.g. ``git archive
main | tar -x -C /tmp/base``), case by case beside this one.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from throughput import bench_relay, broker_process, delete_topic, new_topic, run_split

ROOT = Path(__file__).resolve().parents[1]


def children_cpu() -> float:
    """CPU seconds (user + system) of every ended child process so far, theirs included."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def loadgen_case(
    url: str,
    admin: str,
    n: int,
    size: int,
    batched: bool,
    workers: int,
    sample: float,
    tree: Path = ROOT,
) -> tuple[float, float]:
    """One loadgen run from source tree `tree`; (msg/s, CPU seconds of the whole command)."""
    topic = new_topic()
    # The bare client's settings (bench/throughput.py): 5,000 pending sends, a 5,000-message
    # receive queue, protocol.client's default batch delay of 10 ms.
    batching = "{ enabled = true, max_delay_ms = 10 }" if batched else "{ enabled = false }"
    scenario = f"""
name = "ceiling"
[cluster]
service_url = "{url}"
admin_url = "{admin}"
[[producers]]
name = "p"
topic = "{topic}"
rate = 0
size = {size}
messages = {n}
max_outstanding = 5000
batching = {batching}
[[consumers]]
name = "c"
topic = "{topic}"
subscription = "s"
receiver_queue = 5000
[[phases]]
name = "max"
duration = "600s"
"""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.toml"
        path.write_text(scenario)
        cpu = children_cpu()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "loadgen",
                "run",
                str(path),
                "--workers",
                str(workers),
                "--trace-sample",
                str(sample),
                "--trace-dir",
                f"{tmp}/run",
                "--no-dashboard",
                "--stats-interval",
                "1000",
            ],
            check=True,
            cwd=tree,
            env={**os.environ, "PYTHONPATH": str(tree)},
            stdout=subprocess.DEVNULL,
        )
        cpu = children_cpu() - cpu
        manifest = json.loads((Path(tmp) / "run" / "manifest.json").read_text())
    delete_topic(admin, topic)
    window = (manifest["last_receive_ns"] - manifest["first_send_ns"]) / 1e9
    (check,) = manifest["checks"]["subscriptions"]
    assert check["lost"] == 0, check
    return check["received"] / window, cpu


def bare_case(url: str, admin: str, n: int, size: int, batched: bool) -> tuple[float, float]:
    """The bare protocol.client in two processes; (msg/s, CPU seconds of both processes)."""
    topic = new_topic()
    cpu = children_cpu()
    rate, _ = run_split("protocol", url, topic, n, size, batched)
    cpu = children_cpu() - cpu
    delete_topic(admin, topic)
    return rate, cpu


def cpu_rounds(url: str, admin: str, args: argparse.Namespace) -> None:
    """`--only cpu`: rates and client CPU µs per message, case beside case, round by round."""
    trees = [("", ROOT)] + ([("baseline ", Path(args.baseline))] if args.baseline else [])
    batchings = {"yes": [True], "no": [False], "both": [False, True]}[args.batched]
    rows: dict[tuple[str, int, bool], list[tuple[float, float]]] = {}
    for round_ in range(args.rounds):
        for size in [int(s) for s in args.sizes.split(",")]:
            for batched in batchings:
                n = args.batched_messages if batched else args.messages
                cases: list[tuple[str, Callable[..., tuple[float, float]], tuple[Any, ...]]] = [
                    ("bare protocol.client, 2 procs", bare_case, ())
                ]
                for label, sample in (("trace all", 1.0), ("trace none", 0.0)):
                    for prefix, tree in trees:
                        name = f"{prefix}loadgen, {args.workers} workers, {label}"
                        cases.append((name, loadgen_case, (args.workers, sample, tree)))
                for name, fn, extra in cases:
                    _, small = fn(url, admin, n // 10, size, batched, *extra)
                    rate, big = fn(url, admin, n, size, batched, *extra)
                    per_message = (big - small) / (n - n // 10) * 1e6
                    rows.setdefault((name, size, batched), []).append((rate, per_message))
                    print(
                        f"round {round_ + 1} {name:<45} {size:>5} {batched!s:>5} "
                        f"{rate:>10,.0f} msg/s {per_message:>6.1f} us/msg",
                        flush=True,
                    )
    header = ("case", "size", "batched", "msg/s", "vs bare", "client us/msg", "vs bare")
    print("{:<45} {:>5} {:>7} {:>10} {:>8} {:>13} {:>8}".format(*header))
    for (case, size, batched), runs in rows.items():
        rate = statistics.median(r for r, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        bare = rows[("bare protocol.client, 2 procs", size, batched)]
        bare_rate = statistics.median(r for r, _ in bare)
        bare_cpu = statistics.median(c for _, c in bare)
        flag = "yes" if batched else "no"
        print(
            f"{case:<45} {size:>5} {flag:>7} {rate:>10,.0f} {rate / bare_rate:>8.2f} "
            f"{cpu:>13.1f} {cpu / bare_cpu:>8.2f}"
        )


def measure(broker, n: int, fn, *args):  # type: ignore[no-untyped-def]
    """fn(*args), and the broker's CPU µs per message meanwhile."""
    before = sum(broker.cpu_times()[:2])
    result = fn(*args)
    return result, (sum(broker.cpu_times()[:2]) - before) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--messages", type=int, default=40_000, help="unbatched messages per case")
    parser.add_argument("--batched-messages", type=int, default=300_000)
    parser.add_argument("--only", choices=["ceiling", "tracing", "cpu"])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--baseline", help="--only cpu: a source tree to run loadgen from too")
    parser.add_argument("--batched", choices=["yes", "no", "both"], default="yes")
    parser.add_argument("--workers", type=int, default=2, help="--only cpu: loadgen's workers")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows: dict[tuple[str, int, bool], list[tuple[float, float]]] = {}
    with broker_process() as (url, admin, broker):
        if args.only == "cpu":
            cpu_rounds(url, admin, args)
            return
        for _ in range(args.rounds):
            if args.only != "tracing":
                for size in sizes:
                    relay = bench_relay(args.batched_messages, size)
                    rows.setdefault(("raw loopback relay", size, False), []).append((relay, 0.0))
                    for batched in (False, True):
                        n = args.batched_messages if batched else args.messages
                        topic = new_topic()
                        (rate, _), cpu = measure(
                            broker, n, run_split, "protocol", url, topic, n, size, batched
                        )
                        delete_topic(admin, topic)
                        rows.setdefault(
                            ("bare protocol.client, 2 procs", size, batched), []
                        ).append((rate, cpu))
                        for workers in (1, 2):
                            (rate, _), cpu = measure(
                                broker, n, loadgen_case, url, admin, n, size, batched, workers, 1.0
                            )
                            rows.setdefault(
                                (f"loadgen, {workers} worker(s), trace all", size, batched), []
                            ).append((rate, cpu))
            if args.only != "ceiling":
                n = args.batched_messages
                for label, sample in (("trace all", 1.0), ("trace 1 %", 0.01), ("trace none", 0.0)):
                    (rate, _), cpu = measure(
                        broker, n, loadgen_case, url, admin, n, 100, True, 2, sample
                    )
                    rows.setdefault((f"loadgen, 2 worker(s), {label}", 100, True), []).append(
                        (rate, cpu)
                    )
    header = ("case", "size", "batched", "msg/s (median)", "vs bare client", "broker us/msg")
    print("{:<40} {:>5} {:>7} {:>15} {:>15} {:>14}".format(*header))
    for (case, size, batched), runs in rows.items():
        rate = statistics.median(r for r, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        bare = rows.get(("bare protocol.client, 2 procs", size, batched))
        ratio = (
            f"{rate / statistics.median(r for r, _ in bare):.2f}"
            if bare and "loadgen" in case
            else ""
        )
        flag = "yes" if batched else "no"
        print(f"{case:<40} {size:>5} {flag:>7} {rate:>15,.0f} {ratio:>15} {cpu:>14.1f}")


if __name__ == "__main__":
    main()
