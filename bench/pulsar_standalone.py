"""Start-up time and memory of Apache Pulsar standalone beside ``emubroker standalone``.

    python bench/pulsar_standalone.py [--runs 3] [--messages 1000]

Each run starts both, one after the other (the order alternates between runs, so that a shared
machine's drift hits them alike), and for each measures:

- start-up: from the exec to the first ``GET /admin/v2/brokers/health`` that answers ``ok``
  (Pulsar: ``scripts/pulsar-standalone start``, which polls the same endpoint every 0.2 s; emubroker
  is polled here every 0.2 s too);
- RSS when healthy, and after ``--messages`` messages were produced and consumed through it (the
  official Python client, 100-byte payloads, one topic).

Then stops it (Pulsar: ``scripts/pulsar-standalone stop``; emubroker: SIGINT) and prints medians.
Pulsar's heap is fixed by the script (``-Xms768m -Xmx768m``, 512 MiB direct memory).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil
import pulsar

ROOT = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024
_QUIET = logging.getLogger("bench.client")
_QUIET.setLevel(logging.CRITICAL)


def _healthy(admin_url: str) -> bool:
    try:
        with urllib.request.urlopen(admin_url + "/admin/v2/brokers/health", timeout=2) as answer:
            return bool(answer.read() == b"ok")
    except OSError:
        return False


def _traffic(service_url: str, messages: int) -> None:
    client = pulsar.Client(service_url, logger=_QUIET)
    try:
        topic = "persistent://public/default/bench-startup"
        consumer = client.subscribe(topic, "s")
        producer = client.create_producer(topic)
        for _ in range(messages):
            producer.send_async(b"x" * 100, None)
        producer.flush()
        for _ in range(messages):
            consumer.acknowledge(consumer.receive(10_000))
    finally:
        client.close()


def run_emubroker(messages: int) -> tuple[float, float, float]:
    """(start-up s, RSS MiB when healthy, RSS MiB after the traffic)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    started = time.monotonic()
    popen = subprocess.Popen(
        [sys.executable, "-m", "emubroker", "standalone", "--port", "0", "--admin-port", "0",
         "--bind", "127.0.0.1", "--log-level", "WARNING"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        assert popen.stdout is not None
        line = popen.stdout.readline()
        while line and " ready: " not in line:  # the ready line names the ports chosen
            line = popen.stdout.readline()
        service, admin = line.split("service ")[1].split(" admin ")
        admin = admin.strip()
        while not _healthy(admin):
            time.sleep(0.2)
        startup = time.monotonic() - started
        process = psutil.Process(popen.pid)
        rss_ready = process.memory_info().rss / MIB
        _traffic(service, messages)
        return startup, rss_ready, process.memory_info().rss / MIB
    finally:
        popen.send_signal(signal.SIGINT)
        popen.wait(30)


def run_pulsar(messages: int) -> tuple[float, float, float]:
    """(start-up s, RSS MiB when healthy, RSS MiB after the traffic)."""
    script = str(ROOT / "scripts" / "pulsar-standalone")
    with tempfile.TemporaryDirectory(prefix="pulsar-bench-") as scratch:
        started = time.monotonic()
        done = subprocess.run(
            [script, "start", "--dir", scratch], capture_output=True, text=True, check=False
        )
        startup = time.monotonic() - started
        try:
            if done.returncode != 0:
                raise RuntimeError(done.stderr.strip())
            words = done.stdout.split()
            service = words[words.index("service") + 1]
            process = psutil.Process(int(Path(scratch, "pulsar.pid").read_text()))
            rss_ready = process.memory_info().rss / MIB
            _traffic(service, messages)
            return startup, rss_ready, process.memory_info().rss / MIB
        finally:
            subprocess.run([script, "stop", "--dir", scratch], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--messages", type=int, default=1000)
    args = parser.parse_args()
    subprocess.run([str(ROOT / "scripts" / "pulsar-standalone"), "install"], check=True)
    results: dict[str, list[tuple[float, float, float]]] = {"emubroker": [], "pulsar": []}
    runners = {"emubroker": run_emubroker, "pulsar": run_pulsar}
    for i in range(args.runs):
        order = ["emubroker", "pulsar"] if i % 2 == 0 else ["pulsar", "emubroker"]
        for name in order:
            result = runners[name](args.messages)
            results[name].append(result)
            startup, ready, after = result
            print(
                f"run {i + 1} {name}: start-up {startup:.2f} s, RSS {ready:.0f} MiB healthy, "
                f"{after:.0f} MiB after {args.messages} messages",
                flush=True,
            )
    print(f"\nmedians of {args.runs} runs:")
    print("| broker | start-up (exec → health ok) | RSS healthy | RSS after traffic |")
    print("|---|---|---|---|")
    for name, rows in results.items():
        startup, ready, after = (statistics.median(column) for column in zip(*rows, strict=True))
        spread = f"{min(r[0] for r in rows):.2f}–{max(r[0] for r in rows):.2f}"
        print(f"| {name} | {startup:.2f} s ({spread}) | {ready:.0f} MiB | {after:.0f} MiB |")


if __name__ == "__main__":
    main()
