"""Time from ``emubroker cluster -n N`` to its ``ready`` line, and where the time goes.

    python bench/cluster_startup.py [--brokers 1 3 5] [--runs 5] [--baseline TREE]

For each N, starts ``python -m emubroker cluster -n N --port 0`` in a fresh run directory, times
it from the spawn to the ready line, reads the supervisor's own log for the stub's, the zygote's
and the brokers' start-up (``storage-stub ready in``, ``zygote ready in``, ``brokers ready in``;
the stub and the zygote start together, the brokers once both are ready), sums the CPU seconds
(user + system) of the supervisor and every process under it at the ready line, then stops it
with SIGTERM and times the stop. ``unqueued`` is the ready time less the seconds the supervisor
and the zygote, the start's critical path, spent runnable but waiting for a core by then
(Linux's ``/proc/PID/schedstat``): on a shared machine, an estimate of a quiet one's ready time
(the brokers' waits stay in: three brokers on two cores wait for each other on any machine).
The supervisor's own share (interpreter start, imports,
argument parsing) is what remains of the ready time. Runs of different N are interleaved so that
a machine's drift hits them alike.

With ``--baseline TREE`` (another checkout of the repository, e.g. ``git worktree add``), every
run is paired with the same run of that tree, one after the other, and the ratio
current/baseline of each pair is reported as well: on a shared machine the ratios hold when the
absolute times drift.

Then, for the per-process cost: the interpreter alone (``python -c pass``), and the imports each
child pays (``import emubroker.__main__``, ``import storage_stub.__main__``, and the broker's
modules, ``import emubroker.app``).

Prints medians (and min-max) in seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from brokerproc import queued_seconds

ROOT = Path(__file__).resolve().parents[1]
_STUB = re.compile(r"storage-stub ready in ([\d.]+) s")
_BROKERS = re.compile(r"brokers ready in ([\d.]+) s")
_ZYGOTE = re.compile(r"zygote ready in ([\d.]+) s")


def _cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and every process under it."""
    root = psutil.Process(pid)
    total = 0.0
    for process in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            total += times.user + times.system
    return total


def _critical_path_queued(pid: int) -> float:
    """The queued seconds of the supervisor ``pid`` and of its zygote (none before the zygote)."""
    zygotes = []
    for child in psutil.Process(pid).children():
        with contextlib.suppress(psutil.Error):
            if "emubroker.zygote" in child.cmdline():
                zygotes.append(child.pid)
    return queued_seconds(pid) + sum(queued_seconds(zygote) for zygote in zygotes)


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONUNBUFFERED="1")
    # As an installed cluster runs: from bytecode caches (the warm-up runs write them), in both
    # trees alike; without them every process compiles its modules (~0.3 s of CPU each).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def one_run(brokers: int, tree: Path = ROOT) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as run_dir:
        err_path = Path(run_dir) / "supervisor.err"
        with err_path.open("w") as err:
            began = time.perf_counter()
            proc = subprocess.Popen(
                [
                    *(sys.executable, "-m", "emubroker", "cluster", "-n", str(brokers)),
                    *("--port", "0", "--run-dir", str(Path(run_dir) / "run")),
                ],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=_env(tree),
                cwd=tree,
            )
            assert proc.stdout is not None
            try:
                for line in proc.stdout:
                    if "ready" in line:
                        break
                else:
                    raise RuntimeError(f"no ready line: {err_path.read_text()}")
                ready = time.perf_counter() - began
                cpu = _cpu(proc.pid)
                queued = _critical_path_queued(proc.pid)
                stopping = time.perf_counter()
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=60)
                stop = time.perf_counter() - stopping
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                proc.stdout.close()
        log = err_path.read_text()
    stub_match, brokers_match = _STUB.search(log), _BROKERS.search(log)
    if stub_match is None or brokers_match is None:
        raise RuntimeError(f"no timings in the supervisor's log:\n{log}")
    stub, broker_time = float(stub_match[1]), float(brokers_match[1])
    zygote_match = _ZYGOTE.search(log)  # none in a tree from before the zygote
    zygote = float(zygote_match[1]) if zygote_match else 0.0
    return {
        "ready": ready,
        "unqueued": ready - queued,
        "cpu": cpu,
        "supervisor": ready - max(stub, zygote) - broker_time,
        "stub": stub,
        "zygote": zygote,
        "brokers": broker_time,
        "stop": stop,
    }


def process_time(code: str) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=_env(ROOT), cwd=ROOT)
    return time.perf_counter() - began


def _summary(values: list[float]) -> str:
    return f"{statistics.median(values):6.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", type=int, nargs="+", default=[1, 3, 5])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="another tree to pair every run with")
    args = parser.parse_args()

    for tree in (ROOT, args.baseline):
        if tree is not None:
            one_run(1, tree)  # warm the file cache and write the bytecode caches
    results: dict[int, list[dict[str, float]]] = {n: [] for n in args.brokers}
    paired: dict[int, list[dict[str, float]]] = {n: [] for n in args.brokers}
    for _ in range(args.runs):
        for n in args.brokers:
            if args.baseline is not None:
                paired[n].append(one_run(n, args.baseline))
            results[n].append(one_run(n))
    columns = ["ready", "unqueued", "cpu", "supervisor", "stub", "zygote", "brokers", "stop"]
    load = os.getloadavg()[0]
    print(
        f"emubroker cluster -n N --port 0, {args.runs} runs each: median (min-max) seconds; "
        f"load {load:.1f}"
    )
    print(f"{'N':>3}  " + "  ".join(f"{c:>20}" for c in columns))
    for n, runs in results.items():
        cells = [_summary([r[c] for r in runs]) for c in columns]
        print(f"{n:>3}  " + "  ".join(f"{cell:>20}" for cell in cells))
    if args.baseline is not None:
        print(f"\nbaseline {args.baseline}, then current/baseline pair by pair")
        for n, runs in paired.items():
            cells = [_summary([r[c] for r in runs]) for c in columns]
            print(f"{n:>3}  " + "  ".join(f"{cell:>20}" for cell in cells))
        for n in args.brokers:
            ratios = [
                _summary(
                    [cur[c] / base[c] for cur, base in zip(results[n], paired[n], strict=True)]
                )
                if all(base[c] for base in paired[n])
                else "-"
                for c in columns
            ]
            print(f"{n:>3}  " + "  ".join(f"{cell:>20}" for cell in ratios))

    baselines = {
        "python -c pass": "pass",
        "import storage_stub.__main__": "import storage_stub.__main__",
        "import emubroker.__main__": "import emubroker.__main__",
        "import emubroker.app": "import emubroker.app",
    }
    print(f"\nper-process cost, {args.runs} runs each: median (min-max) seconds")
    for label, code in baselines.items():
        times = [process_time(code) for _ in range(args.runs)]
        print(f"  {label:<32} {_summary(times)}")


if __name__ == "__main__":
    main()
