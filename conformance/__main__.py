"""``python -m conformance``: run the scenarios against both brokers, diff, report.

    python -m conformance [--only NAME|AREA ...] [--records FILE] [--docs docs/compatibility.md]
                          [--pulsar SERVICE_URL ADMIN_URL]

Starts Apache Pulsar standalone (scripts/pulsar-standalone) and ``emubroker standalone`` once
each per profile the chosen scenarios use (conformance/broker.conf plus the profile's keys),
unless ``--pulsar`` names a running one (then only default-profile scenarios run). Prints a
table (scenario, same / differs / allowed) and every difference; ``--docs`` writes the table into
that file under its own heading. Exit code 1 when a difference is not in conformance/allowed.toml,
2 for usage errors.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pulsar

from conformance import brokers, report
from conformance.diff import Difference, diff, load_allowances
from conformance.probe import Probe
from conformance.scenarios import PROFILES, REGISTRY, SCENARIOS, TOLERANCES, select


def warm_up(target: brokers.Target, count: int = 500) -> None:
    """Publish and consume some messages before the scenarios, unrecorded.

    A JVM just started compiles its hot paths during its first seconds of traffic: one run saw
    Pulsar stall two seconds in the first throttled scenario after its start.
    """
    topic = "persistent://public/default/cf-warm-up"
    try:
        with Probe(target).client() as client:
            consumer = client.subscribe(topic, "warm-up")
            producer = client.create_producer(topic)
            for i in range(count):
                producer.send_async(b"w%d" % i, None)
            producer.flush()
            for _ in range(count):
                consumer.acknowledge(consumer.receive(10_000))
    except pulsar.PulsarException as exc:  # the scenarios will say what is wrong
        print(f"conformance: {target.name} warm-up failed: {exc}", file=sys.stderr)


def run_scenarios(target: brokers.Target, names: list[str]) -> dict[str, Any]:
    """Every named scenario's record on one broker; a scenario that fails records its error."""
    warm_up(target)
    records: dict[str, Any] = {}
    for name in names:
        print(f"  {target.name}: {name}", file=sys.stderr, flush=True)
        try:
            records[name] = SCENARIOS[name](Probe(target))
        except Exception as exc:  # a broken scenario is a record too, compared like the others
            traceback.print_exc(limit=3)
            records[name] = {"scenario_failed": f"{type(exc).__name__}: {exc}"}
    return records


@contextlib.contextmanager
def _profile_config(profile: str) -> Iterator[Path]:
    """conformance/broker.conf, plus the profile's keys in a scratch copy."""
    if not PROFILES[profile]:
        yield brokers.CONFIG
        return
    with tempfile.TemporaryDirectory(prefix="conformance-") as scratch:
        path = Path(scratch) / "broker.conf"
        base = brokers.CONFIG.read_text(encoding="utf-8")
        path.write_text(base + "\n".join(PROFILES[profile]) + "\n", encoding="utf-8")
        yield path


@contextlib.contextmanager
def _both(
    pulsar: list[str] | None, profile: str = ""
) -> Iterator[tuple[brokers.Target, brokers.Target]]:
    with contextlib.ExitStack() as stack:
        config = stack.enter_context(_profile_config(profile))
        if pulsar:
            oracle = brokers.Target("pulsar", pulsar[0], pulsar[1], 0)
            emu = stack.enter_context(brokers.emubroker(config))
        else:
            # Pulsar takes a minute or more to start: emubroker starts meanwhile.
            with ThreadPoolExecutor(2) as pool:
                started = pool.submit(stack.enter_context, brokers.pulsar(config))
                emu = stack.enter_context(brokers.emubroker(config))
                oracle = started.result()
        yield oracle, emu


def exit_on_sigterm() -> None:
    """Turn SIGTERM (a CI job's timeout, ``kill``) into ``SystemExit`` in the main thread.

    The default action ends the process at once, skipping the ``finally`` blocks that stop
    Pulsar: its JVM, started detached by ``scripts/pulsar-standalone``, would outlive the run.
    """
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    exit_on_sigterm()
    parser = argparse.ArgumentParser(prog="python -m conformance", description=__doc__)
    parser.add_argument(
        "--only", nargs="+", metavar="NAME",
        help="run only these scenarios, or the scenarios of these areas (wire, admin, ...)",
    )  # fmt: skip
    parser.add_argument("--records", help="write both brokers' records (JSON) to this file")
    parser.add_argument("--docs", help="write the table into this markdown file (whole runs)")
    parser.add_argument(
        "--pulsar", nargs=2, metavar=("SERVICE_URL", "ADMIN_URL"), help="a running Pulsar"
    )
    args = parser.parse_args(argv)
    try:
        names = select(args.only)
    except ValueError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    if args.pulsar:
        names = [name for name in names if not REGISTRY[name].profile]
    try:
        allowances = load_allowances()
    except (OSError, ValueError) as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    began = time.monotonic()
    records: dict[str, dict[str, Any]] = {"pulsar": {}, "emubroker": {}}
    versions: dict[str, object] = {}
    try:
        for profile in dict.fromkeys(REGISTRY[name].profile for name in names):
            chosen = [name for name in names if REGISTRY[name].profile == profile]
            with _both(args.pulsar, profile) as (oracle, emu):
                versions = {t.name: Probe(t).rest("GET", "/admin/v2/brokers/version")["body"]
                            for t in (oracle, emu)}  # fmt: skip
                records["pulsar"] |= run_scenarios(oracle, chosen)
                records["emubroker"] |= run_scenarios(emu, chosen)
    except RuntimeError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 1
    minutes = (time.monotonic() - began) / 60
    if args.records:
        Path(args.records).write_text(json.dumps(records, indent=1, sort_keys=True) + "\n")
    results: list[report.Result] = []
    for name in names:
        differences: list[Difference] = diff(
            records["pulsar"][name], records["emubroker"][name], tolerances=TOLERANCES.get(name)
        )
        results.append(report.judge(name, differences, allowances))
    print(report.table(results))
    print(report.details(results))
    print(report.summary(results, minutes))
    if args.docs and not args.only:  # a subset's table would replace the whole run's
        report.write_section(Path(args.docs), report.table(results), versions, minutes)
    return 1 if any(result.verdict == "differs" for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
