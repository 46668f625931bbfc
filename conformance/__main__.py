"""``python -m conformance``: run the scenarios against both brokers, diff, report.

    python -m conformance [--only NAME ...] [--records FILE] [--docs docs/compatibility.md]
                          [--pulsar SERVICE_URL ADMIN_URL]

Starts Apache Pulsar standalone (scripts/pulsar-standalone) and ``emubroker standalone`` once
each, with the keys of conformance/broker.conf, unless ``--pulsar`` names a running one. Prints a
table (scenario, same / differs / allowed) and every difference; ``--docs`` writes the table into
that file under its own heading. Exit code 1 when a difference is not in conformance/allowed.toml,
2 for usage errors.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import traceback
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from conformance import brokers, report
from conformance.diff import Difference, diff, load_allowances
from conformance.probe import Probe
from conformance.scenarios import SCENARIOS, TOLERANCES


def run_scenarios(target: brokers.Target, names: list[str]) -> dict[str, Any]:
    """Every named scenario's record on one broker; a scenario that fails records its error."""
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
def _both(pulsar: list[str] | None) -> Iterator[tuple[brokers.Target, brokers.Target]]:
    with contextlib.ExitStack() as stack:
        if pulsar:
            oracle = brokers.Target("pulsar", pulsar[0], pulsar[1], 0)
            emu = stack.enter_context(brokers.emubroker())
        else:
            # Pulsar takes a minute or more to start: emubroker starts meanwhile.
            with ThreadPoolExecutor(2) as pool:
                started = pool.submit(stack.enter_context, brokers.pulsar())
                emu = stack.enter_context(brokers.emubroker())
                oracle = started.result()
        yield oracle, emu


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m conformance", description=__doc__)
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these scenarios")
    parser.add_argument("--records", help="write both brokers' records (JSON) to this file")
    parser.add_argument("--docs", help="write the table into this markdown file")
    parser.add_argument(
        "--pulsar", nargs=2, metavar=("SERVICE_URL", "ADMIN_URL"), help="a running Pulsar"
    )
    args = parser.parse_args(argv)
    names = args.only or list(SCENARIOS)
    unknown = [name for name in names if name not in SCENARIOS]
    if unknown:
        print(f"conformance: unknown scenario(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    try:
        allowances = load_allowances()
    except (OSError, ValueError) as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    try:
        with _both(args.pulsar) as (oracle, emu):
            versions = {t.name: Probe(t).rest("GET", "/admin/v2/brokers/version")["body"]
                        for t in (oracle, emu)}  # fmt: skip
            records = {"pulsar": run_scenarios(oracle, names)}
            records["emubroker"] = run_scenarios(emu, names)
    except RuntimeError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 1
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
    if args.docs:
        report.write_section(Path(args.docs), report.table(results), versions)
    return 1 if any(result.verdict == "differs" for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
