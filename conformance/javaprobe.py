"""The official Java client as an observer of what the Python client cannot see (ClientProbe.java).

The program runs from its source (Java 11+ single-file launch) on the class path of the Pulsar
broker the harness installs (``scripts/pulsar-standalone classpath``), whose jars carry the Java
client of the same version; so it needs nothing beyond what the oracle needs.

A JVM's start costs seconds on a loaded machine, so every job of ``JOBS`` runs in one JVM per
broker, the first time a scenario asks for one of them (``observe``), and the results are kept.
"""

from __future__ import annotations

import functools
import json
import subprocess
from typing import Any

from conformance.brokers import ROOT, Target

PROGRAM = ROOT / "conformance" / "java" / "ClientProbe.java"
TIMEOUT_S = 120
_RESULT = "PROBE-RESULT "


@functools.cache
def classpath() -> str:
    """The installed Pulsar's jars (``scripts/pulsar-standalone classpath``)."""
    done = subprocess.run(
        [str(ROOT / "scripts" / "pulsar-standalone"), "classpath"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip() or "scripts/pulsar-standalone classpath failed")
    return done.stdout.strip()


# The scenarios' jobs, "MODE ARGS..." by name (the modes are ClientProbe.java's).
JOBS: dict[str, str] = {}
_results: dict[str, dict[str, Any]] = {}


def job(name: str, command: str) -> str:
    """Declare a job (at import); returns its name for ``observe``."""
    if name in JOBS or " " in name:
        raise ValueError(f"bad or repeated job name {name!r}")
    JOBS[name] = command
    return name


def observe(target: Target, name: str) -> Any:
    """The result of job ``name`` against ``target`` (all jobs run at the first call)."""
    key = f"{target.name} {target.service_url} {target.pid}"
    if key not in _results:
        _results[key] = run(target, [f"{n} {c}" for n, c in JOBS.items()])
    return _results[key][name]


def run(target: Target, jobs: list[str]) -> dict[str, Any]:
    """Run the program's jobs ("NAME MODE ARGS...") against ``target``; its JSON result.

    Raises:
        RuntimeError: the program printed no result (its stderr's last lines say why).
    """
    done = subprocess.run(
        # A short-lived program: the first JIT tier and the serial collector start it faster.
        ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", classpath(), str(PROGRAM),
         target.service_url, *jobs],
        capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    for line in done.stdout.splitlines():
        if line.startswith(_RESULT):
            result: dict[str, Any] = json.loads(line[len(_RESULT) :])
            return result
    tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-5:])
    raise RuntimeError(f"ClientProbe gave no result (exit {done.returncode}): {tail}")
