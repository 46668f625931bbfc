"""Verdicts per scenario, the table, and its section in docs/compatibility.md."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from conformance.diff import Allowance, Difference

HEADING = "## Differential run against Apache Pulsar standalone"


@dataclass(frozen=True)
class Result:
    """A scenario's differences, split into allowed (with their reasons) and not."""

    scenario: str
    allowed: list[tuple[Difference, str]]
    unexplained: list[Difference]

    @property
    def verdict(self) -> str:
        """``same`` (no difference), ``allowed`` (all allowed) or ``differs``."""
        if self.unexplained:
            return "differs"
        return "allowed" if self.allowed else "same"


def judge(scenario: str, differences: list[Difference], allowances: list[Allowance]) -> Result:
    """Split a scenario's differences by whether an allowance covers them."""
    allowed, unexplained = [], []
    for difference in differences:
        reason = next((a.reason for a in allowances if a.covers(scenario, difference)), None)
        if reason is None:
            unexplained.append(difference)
        else:
            allowed.append((difference, reason))
    return Result(scenario, allowed, unexplained)


def table(results: list[Result]) -> str:
    """The markdown table: scenario, verdict, counts of allowed and other differences."""
    rows = ["| scenario | verdict | allowed differences | other differences |", "|---|---|---|---|"]
    for r in results:
        rows.append(f"| {r.scenario} | {r.verdict} | {len(r.allowed)} | {len(r.unexplained)} |")
    return "\n".join(rows)


def _short(value: object, limit: int = 160) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def summary(results: list[Result], minutes: float) -> str:
    """One line: how many scenarios ran, how many were the same, allowed, differing; the time."""
    counts = dict.fromkeys(("same", "allowed", "differs"), 0)
    for r in results:
        counts[r.verdict] += 1
    return (
        f"{len(results)} scenarios: {counts['same']} same, {counts['allowed']} allowed, "
        f"{counts['differs']} differ ({minutes:.1f} minutes)"
    )


def details(results: list[Result]) -> str:
    """Unexplained differences one per line with both values; allowed ones counted by reason."""
    lines = []
    for r in results:
        for d in r.unexplained:
            lines.append(f"DIFFERS {r.scenario} {d.path}: pulsar {_short(d.pulsar)} "
                         f"emubroker {_short(d.emubroker)}")  # fmt: skip
        reasons: dict[str, list[str]] = {}
        for d, reason in r.allowed:
            reasons.setdefault(reason, []).append(d.path)
        for reason, paths in reasons.items():
            lines.append(f"allowed {r.scenario} {_short(paths, 100)} ({len(paths)}): {reason}")
    return "\n".join(lines)


def write_section(
    path: Path, body: str, versions: dict[str, object] | None = None, minutes: float | None = None
) -> None:
    """Replace (or append) our section of the file, leaving the other sections alone."""
    versions = versions or {}
    intro = (
        "`scripts/differential` runs each scenario of `conformance/scenarios/` (one module per "
        "area: wire, admin, topics, cluster, stats, data, throttling; `--only AREA|SCENARIO...` "
        "runs a subset) against Apache Pulsar standalone (`scripts/pulsar-standalone`) and "
        "`emubroker standalone`, both started once per profile with the keys of "
        "`conformance/broker.conf` (the `classic-limiter` profile adds "
        "`dispatchRateLimiterFactoryClassName=...Classic`, so Pulsar starts twice in a whole "
        "run), with the same official Python client (and, for what it cannot observe, "
        "Failover's ACTIVE_CONSUMER_CHANGE, GET_OR_CREATE_SCHEMA and transactions, the official "
        "Java client of Pulsar's own jars: `conformance/java/ClientProbe.java`, one JVM per "
        "broker), "
        "and diffs what a user observes: wire answers (receipts, client errors, redelivery "
        "counts), admin REST status codes and JSON bodies, the keys of topic and internal stats, "
        "the names on `/metrics`, deliveries under a dispatch rate (per second within 5 %, the "
        "whole backlog published and the consumer attached a rate period after the limiter's "
        "build so both start with one bucket; a slow consumer's per refill, its cycle being "
        "longer than a second). Only what must differ is normalised: timestamps, addresses, ledger "
        "ids, versions. Each accepted difference is listed with its reason in "
        "`conformance/allowed.toml`; any other fails the run. Last run, Pulsar "
        f"{versions.get('pulsar', '?')} and emubroker {versions.get('emubroker', '?')}"
        + (f", took {minutes:.0f} minutes in all:" if minutes is not None else ":")
    )
    section = f"{HEADING}\n\n{intro}\n\n{body}\n"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Compatibility\n"
    start = text.find(HEADING)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + len(HEADING))
        text = text[:start] + section + (text[end + 1 :] if end >= 0 else "")
    path.write_text(text, encoding="utf-8")
