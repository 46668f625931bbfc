"""Start and stop the two brokers of a differential run, as child processes on loopback."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = Path(__file__).with_name("broker.conf")
_READY = re.compile(r"ready: service (pulsar://\S+) admin (http://\S+)")


@dataclass(frozen=True)
class Target:
    """One broker under test: its name in records and its two URLs."""

    name: str
    service_url: str
    admin_url: str
    pid: int


def config_keys(path: Path = CONFIG) -> list[str]:
    """The ``KEY=VALUE`` lines of a broker.conf, without comments."""
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def start_pulsar(scratch: Path, config: Path = CONFIG) -> Target:
    """``scripts/pulsar-standalone start`` (installs Pulsar first when missing)."""
    script = str(ROOT / "scripts" / "pulsar-standalone")
    subprocess.run([script, "install"], check=True, stdout=subprocess.DEVNULL)
    extra = [arg for kv in config_keys(config) for arg in ("--conf", kv)]
    done = subprocess.run(
        [script, "start", "--dir", str(scratch), *extra], capture_output=True, text=True
    )
    match = _READY.search(done.stdout)
    if done.returncode != 0 or match is None:
        raise RuntimeError(f"Pulsar did not start: {done.stderr.strip() or done.stdout.strip()}")
    pid = int((scratch / "pulsar.pid").read_text().strip())
    return Target("pulsar", match.group(1), match.group(2), pid)


def stop_pulsar(scratch: Path) -> None:
    """``scripts/pulsar-standalone stop``: SIGTERM, SIGKILL after a minute."""
    subprocess.run([str(ROOT / "scripts" / "pulsar-standalone"), "stop", "--dir", str(scratch)])


@contextlib.contextmanager
def emubroker(config: Path = CONFIG, timeout: float = 60.0) -> Iterator[Target]:
    """``emubroker standalone --port 0 --admin-port 0 --config CONFIG`` of this tree."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    popen = subprocess.Popen(
        [sys.executable, "-m", "emubroker", "standalone", "--port", "0", "--admin-port", "0",
         "--bind", "127.0.0.1", "--config", str(config), "--log-level", "WARNING"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    assert popen.stdout is not None
    try:
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        match = None
        while match is None and time.monotonic() < deadline:
            line = popen.stdout.readline()
            if not line:
                break
            seen.append(line)
            match = _READY.search(line)
        if match is None:
            raise RuntimeError("emubroker did not start: " + "".join(seen[-10:]))
        threading.Thread(target=popen.stdout.read, daemon=True).start()  # keep draining
        yield Target("emubroker", match.group(1), match.group(2), popen.pid)
    finally:
        if popen.poll() is None:
            popen.send_signal(signal.SIGINT)
            try:
                popen.wait(30)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()


@contextlib.contextmanager
def pulsar(config: Path = CONFIG) -> Iterator[Target]:
    """Pulsar standalone in a scratch directory removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="pulsar-oracle-") as scratch:
        try:
            yield start_pulsar(Path(scratch), config)
        finally:
            stop_pulsar(Path(scratch))
