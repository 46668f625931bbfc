"""The Java client observer of the differential harness: its jobs, its one JVM, its output."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from conformance import javaprobe
from conformance.brokers import Target

PULSAR = Target("pulsar", "pulsar://127.0.0.1:1", "http://127.0.0.1:2", 10)
EMU = Target("emubroker", "pulsar://127.0.0.1:3", "http://127.0.0.1:4", 11)


def test_the_scenarios_jobs_are_declared_with_their_modes() -> None:
    import conformance.scenarios  # noqa: F401  (declares the jobs)

    modes = {command.split()[0] for command in javaprobe.JOBS.values()}
    assert modes == {"failover", "multi-schema", "transactions"}
    with pytest.raises(ValueError, match="repeated"):
        javaprobe.job(next(iter(javaprobe.JOBS)), "transactions")
    with pytest.raises(ValueError, match="bad"):
        javaprobe.job("two words", "transactions")


def test_every_job_runs_in_one_jvm_per_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, list[str]]] = []

    def run(target: Target, jobs: list[str]) -> dict[str, Any]:
        calls.append((target.name, jobs))
        return {job.split()[0]: target.name for job in jobs}

    monkeypatch.setattr(javaprobe, "run", run)
    monkeypatch.setattr(javaprobe, "JOBS", {"a": "transactions", "b": "multi-schema t"})
    monkeypatch.setattr(javaprobe, "_results", {})
    assert javaprobe.observe(PULSAR, "a") == "pulsar"
    assert javaprobe.observe(PULSAR, "b") == "pulsar"
    assert javaprobe.observe(EMU, "b") == "emubroker"
    assert calls == [
        ("pulsar", ["a transactions", "b multi-schema t"]),
        ("emubroker", ["a transactions", "b multi-schema t"]),
    ]


def _answer(monkeypatch: pytest.MonkeyPatch, stdout: str, stderr: str = "") -> None:
    done = subprocess.CompletedProcess([], 1, stdout=stdout, stderr=stderr)
    monkeypatch.setattr(javaprobe, "classpath", lambda: "lib/*")
    monkeypatch.setattr(javaprobe.subprocess, "run", lambda *a, **k: done)


def test_the_result_line_is_found_among_the_clients_log_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _answer(monkeypatch, 'INFO: starting\nPROBE-RESULT {"a": {"build": "ok"}}\nINFO: closed\n')
    assert javaprobe.run(PULSAR, ["a transactions"]) == {"a": {"build": "ok"}}


def test_no_result_line_is_an_error_quoting_the_last_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _answer(monkeypatch, "INFO: starting\n", "error: cannot find symbol\n  Schema.NOPE\n")
    with pytest.raises(RuntimeError, match=r"no result \(exit 1\): .*Schema\.NOPE"):
        javaprobe.run(PULSAR, ["a transactions"])
