"""``emubroker standalone`` as a child process, for the abuse, fuzz and soak benchmarks.

``--root DIR`` lets a benchmark run the broker of another checkout (e.g. an export of ``main``)
side by side with this one: the broker is started with ``DIR`` as its working directory and first
on ``PYTHONPATH``, so its packages win over the ones installed in this virtualenv.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1024 * 1024


@dataclass
class Broker:
    url: str
    admin: str
    process: psutil.Process
    popen: subprocess.Popen[str]

    def rss_mib(self) -> float:
        return self.process.memory_info().rss / MIB

    def alive(self) -> bool:
        return self.popen.poll() is None


def start_broker(
    *args: str,
    root: str = ROOT,
    env: dict[str, str] | None = None,
    timeout: float = 60.0,
    drain: bool = True,
) -> Broker:
    """Start ``emubroker standalone --port 0 --admin-port 0 ARGS`` and wait for its ready line.

    With ``drain`` False the caller must read ``broker.popen.stdout`` (or the broker blocks).
    """
    environ = dict(os.environ if env is None else env)
    # glibc keeps large freed blocks in its heap once it has freed one (its mmap threshold
    # rises); a fixed threshold hands them back, so RSS follows what the broker really holds.
    environ.setdefault("MALLOC_MMAP_THRESHOLD_", str(128 * 1024))
    environ["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [environ.get("PYTHONPATH", "")])])
    popen = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "emubroker",
            "standalone",
            "--port",
            "0",
            "--admin-port",
            "0",
            "--log-level",
            "WARNING",
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=root,
        env=environ,
    )
    assert popen.stdout is not None
    deadline = time.monotonic() + timeout
    url = admin = None
    lines: list[str] = []
    while time.monotonic() < deadline:
        line = popen.stdout.readline()
        if not line:
            break
        lines.append(line)
        match = re.search(r"(pulsar://\S+).*(http://\S+)", line)
        if "ready" in line and match:
            url, admin = match.groups()
            break
    if url is None or admin is None:
        popen.kill()
        popen.wait()
        raise RuntimeError("broker did not print a ready line:\n" + "".join(lines[-20:]))
    if drain:
        threading.Thread(target=popen.stdout.read, daemon=True).start()  # keep the pipe drained
    return Broker(url, admin, psutil.Process(popen.pid), popen)


def stop_broker(broker: Broker) -> int | None:
    """Stop it cleanly (SIGINT), or kill it after 30 s; returns its exit code."""
    if broker.popen.poll() is None:
        broker.popen.send_signal(signal.SIGINT)
        try:
            broker.popen.wait(30)
        except subprocess.TimeoutExpired:
            broker.popen.kill()
            broker.popen.wait()
    return broker.popen.returncode


@contextlib.contextmanager
def broker_process(*args: str, root: str = ROOT) -> Iterator[Broker]:
    broker = start_broker(*args, root=root)
    try:
        yield broker
    finally:
        stop_broker(broker)


def write_config(path: str, keys: dict[str, object]) -> str:
    """Write ``broker.conf`` keys as Java properties; returns the path."""
    with open(path, "w", encoding="utf-8") as f:
        for key, value in keys.items():
            f.write(f"{key}={value}\n")
    return path


def running_seconds(pid: int) -> float | None:
    """Seconds the threads of ``pid`` have run on a core, to the nanosecond (Linux's schedstat).

    None where schedstat is absent. The kernel's user + system times count in clock ticks
    (10 ms): too coarse for a start-up of ~0.3 s whose changes are a few milliseconds.
    """
    total = 0
    found = False
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[0])
        except OSError:
            continue  # a thread that ended meanwhile
        found = True
    return total / 1e9 if found else None


def queued_seconds(pid: int) -> float:
    """Seconds ``pid`` has been runnable but not running (0 where Linux's schedstat is absent).

    What a start-up timing on a shared machine spent waiting for a core, not starting.
    """
    try:
        fields = Path(f"/proc/{pid}/schedstat").read_text().split()
    except OSError:
        return 0.0
    return int(fields[1]) / 1e9
