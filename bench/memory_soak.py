"""Memory of a cluster's processes under steady traffic, every message acknowledged.

Usage: python bench/memory_soak.py [--duration S] [--rate R] [--size B] [--brokers N]
       [--topics T] [--max-entries E] [--min-rollover M] [--durable] [--interval S]
       [--tracemalloc]

Starts ``emubroker cluster`` (the stub and N brokers as processes, free loopback ports) with a
``broker.conf`` of the given rollover settings (``managedLedgerMaxEntriesPerLedger``,
``managedLedgerMinLedgerRolloverTimeMinutes``), then, with the official Python client, produces
R unbatched messages a second spread over T topics of ``public/default`` while one consumer
receives and acknowledges every message. Every ``--interval`` seconds it records the resident
memory of each broker and of the stub; at the end it prints the samples, and per process the
growth slope in MiB/s (least squares over the whole run, and over its second half, when a
rolling cluster should be flat). With ``--durable`` it also records the size of the stub's data
directory (its journals, on disk: what compaction keeps bounded).

``--tracemalloc`` (a debugging aid of this harness only, nothing in the product): the children
start with a ``sitecustomize`` that runs ``tracemalloc`` and dumps a snapshot every interval;
the harness prints, per process, the 15 allocation sites that grew most between the snapshot at
a third of the run and the last one. It slows the processes down, so its RSS figures are not
the ones to report.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import tracemalloc
from pathlib import Path

import psutil
import pulsar

ROOT = Path(__file__).resolve().parents[1]

_SITECUSTOMIZE = textwrap.dedent(
    """
    import os, threading, time, tracemalloc
    _dir = os.environ.get("MEMORY_SOAK_TRACEMALLOC_DIR")
    if _dir:
        tracemalloc.start(4)
        _every = float(os.environ["MEMORY_SOAK_TRACEMALLOC_EVERY"])

        def _dump():
            n = 0
            while True:
                time.sleep(_every)
                tracemalloc.take_snapshot().dump(f"{_dir}/{os.getpid()}-{n:04d}.snap")
                n += 1

        threading.Thread(target=_dump, daemon=True).start()
    """
)


def _start_cluster(args: argparse.Namespace, work: Path) -> tuple[subprocess.Popen[str], dict]:
    conf = work / "broker.conf"
    conf.write_text(
        f"managedLedgerMaxEntriesPerLedger={args.max_entries}\n"
        f"managedLedgerMinLedgerRolloverTimeMinutes={args.min_rollover:g}\n"
    )
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    path = [str(ROOT)]
    if args.tracemalloc:
        hook = work / "hook"
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(_SITECUSTOMIZE)
        snaps = work / "snaps"
        snaps.mkdir()
        path.insert(0, str(hook))
        env["MEMORY_SOAK_TRACEMALLOC_DIR"] = str(snaps)
        env["MEMORY_SOAK_TRACEMALLOC_EVERY"] = str(args.interval)
    env["PYTHONPATH"] = os.pathsep.join(path)
    command = [sys.executable, "-m", "emubroker", "cluster", "-n", str(args.brokers)]
    command += ["--port", "0", "--json", "--run-dir", str(work / "run"), "--config", str(conf)]
    if args.durable:
        command += ["--data-dir", str(work / "data")]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=(work / "supervisor.err").open("w"),
        text=True,
        env=env,
        cwd=work,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        event = json.loads(line)
        if event.get("event") == "ready":
            return proc, event
    proc.wait()
    sys.exit(f"the cluster did not start: {(work / 'supervisor.err').read_text()[-2000:]}")


def _stop_cluster(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class _Load:
    """A paced producer per topic and one consumer acknowledging everything, in threads."""

    def __init__(self, service_url: str, args: argparse.Namespace) -> None:
        self.client = pulsar.Client(
            service_url,
            operation_timeout_seconds=60,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
        )
        stamp = int(time.time())
        self.topics = [f"persistent://public/default/soak-{stamp}-{i}" for i in range(args.topics)]
        self.consumer = self.client.subscribe(
            self.topics, "soak", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=1000
        )
        self.producers = [
            self.client.create_producer(
                t, batching_enabled=False, max_pending_messages=10_000, block_if_queue_full=True
            )
            for t in self.topics
        ]
        self.rate, self.payload = args.rate, b"x" * args.size
        self.sent = self.acked = self.failed = 0
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    def _sent(self, result: pulsar.Result, _msg_id: object) -> None:
        if result != pulsar.Result.Ok:
            self.failed += 1

    def _produce(self) -> None:
        began, tick = time.monotonic(), 0.01
        while not self.stop.is_set():
            due = int((time.monotonic() - began) * self.rate)
            while self.sent < due:
                producer = self.producers[self.sent % len(self.producers)]
                producer.send_async(self.payload, self._sent)
                self.sent += 1
            time.sleep(tick)

    def _consume(self) -> None:
        while not self.stop.is_set():
            try:
                msg = self.consumer.receive(timeout_millis=200)
            except pulsar.Timeout:
                continue
            self.consumer.acknowledge(msg)
            self.acked += 1

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=10)
        for producer in self.producers:
            producer.flush()
        self.client.close()


def _disk_mib(directory: Path) -> float:
    files = directory.rglob("*") if directory.exists() else ()
    return sum(f.stat().st_size for f in files if f.is_file()) / 2**20


def _slope(points: list[tuple[float, float]]) -> float:
    if len(points) < 2:
        return float("nan")
    n = len(points)
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    var = sum((t - mx) ** 2 for t, _ in points)
    return sum((t - mx) * (v - my) for t, v in points) / var if var else float("nan")


def _tracemalloc_report(snaps: Path, names: dict[int, str]) -> None:
    for pid, name in names.items():
        if not pid:
            continue  # the data directory
        files = sorted(snaps.glob(f"{pid}-*.snap"))
        if len(files) < 3:
            print(f"{name}: too few snapshots ({len(files)})")
            continue
        first = tracemalloc.Snapshot.load(str(files[len(files) // 3]))
        last = tracemalloc.Snapshot.load(str(files[-1]))
        filters = [tracemalloc.Filter(False, tracemalloc.__file__)]
        stats = last.filter_traces(filters).compare_to(first.filter_traces(filters), "traceback")
        print(
            f"\n{name} (pid {pid}): top growth between {files[len(files) // 3].name} and "
            f"{files[-1].name}"
        )
        for stat in stats[:15]:
            frame = " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in stat.traceback)
            print(f"  {stat.size_diff / 2**10:>9.1f} KiB {stat.count_diff:>+8} blocks  {frame}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=1800, help="seconds of load")
    parser.add_argument("--rate", type=int, default=1000, help="messages per second, in all")
    parser.add_argument("--size", type=int, default=100, help="payload bytes")
    parser.add_argument("--brokers", type=int, default=2)
    parser.add_argument("--topics", type=int, default=4)
    parser.add_argument("--max-entries", type=int, default=5000)
    parser.add_argument("--min-rollover", type=float, default=0.0, help="minutes")
    parser.add_argument("--durable", action="store_true", help="the stub with --data-dir")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--tracemalloc", action="store_true")
    args = parser.parse_args()
    # SIGTERM (nohup'd runs) stops the cluster as Ctrl-C does, through the ``finally`` below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    with tempfile.TemporaryDirectory(prefix="memory-soak-") as tmp:
        work = Path(tmp)
        proc, ready = _start_cluster(args, work)
        try:
            names = {ready["stub"]["pid"]: "stub"}
            names.update({b["pid"]: f"broker {i}" for i, b in enumerate(ready["brokers"])})
            procs = {pid: psutil.Process(pid) for pid in names}
            load = _Load(ready["service_url"], args)
            samples: list[tuple[float, dict[int, float], int, int]] = []
            began = time.monotonic()
            while True:
                now = time.monotonic() - began
                rss = {pid: p.memory_info().rss / 2**20 for pid, p in procs.items()}
                rss[0] = _disk_mib(work / "data")
                samples.append((now, rss, load.sent, load.acked))
                mib = " ".join(f"{v:.1f}" for v in rss.values())
                print(
                    f"{now:.0f} s: {load.sent} sent {load.acked} acked, MiB {mib}", file=sys.stderr
                )
                if now >= args.duration:
                    break
                time.sleep(min(args.interval, args.duration - now + 0.01))
            load.close()
        finally:
            _stop_cluster(proc)
        print(
            f"{args.duration:g} s at {args.rate} msg/s of {args.size} B over {args.topics} "
            f"topics, {args.brokers} brokers, managedLedgerMaxEntriesPerLedger="
            f"{args.max_entries}, managedLedgerMinLedgerRolloverTimeMinutes={args.min_rollover:g}"
            f", stub {'durable' if args.durable else 'in memory'}"
        )
        if args.durable:
            names[0] = "disk"
        header = "".join(f"{names[pid]:>10}" for pid in names)
        print(f"{'t s':>7} {'sent':>9} {'acked':>9}{header}   (RSS MiB)")
        for t, rss, sent, acked in samples:
            print(f"{t:>7.0f} {sent:>9} {acked:>9}" + "".join(f"{rss[p]:>10.1f}" for p in names))
        print(f"failed sends: {load.failed}")
        half = [s for s in samples if s[0] >= args.duration / 2]
        print(f"{'process':<10} {'start':>7} {'end':>7} {'MiB/s':>9} {'2nd half MiB/s':>15}")
        for pid, name in names.items():
            if not pid:
                continue  # the stub's data directory: in the table only
            whole = _slope([(t, rss[pid]) for t, rss, _, _ in samples])
            second = _slope([(t, rss[pid]) for t, rss, _, _ in half])
            start, end = samples[0][1][pid], samples[-1][1][pid]
            print(f"{name:<10} {start:>7.1f} {end:>7.1f} {whole:>9.4f} {second:>15.4f}")
        if args.tracemalloc:
            _tracemalloc_report(work / "snaps", names)


if __name__ == "__main__":
    main()
