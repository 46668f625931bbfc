"""pulsar-admin and pulsar-perf answered as Pulsar answers them (``scripts/peers admin --oracle``).

``scripts/peers`` runs the same command script against Apache Pulsar standalone and against
emubroker, leaving per command N: ``N.cmd`` (the script's line), ``N.rc``, ``N.out`` (stdout) and
``N.err``. ``compare PULSAR_DIR EMU_DIR...`` turns each answer into a record — the exit code, the
output (JSON when it parses, else its lines) and, on failure, the error's first line — with only
the normalisations that must differ between two brokers (times, addresses and ports, ledger ids,
versions, generated names, rates), diffs it with :func:`conformance.diff.diff`, and judges each
difference against ``allowed.toml`` under the scenario ``admin/<command words>``.

``perf DIR`` checks pulsar-perf's final aggregates ("N records sent", "N records received")
against the topic's stats after the run (``msgInCounter``, the subscription's ``msgOutCounter``)
as Pulsar's broker answers them for the same run.
"""

from __future__ import annotations

import fnmatch
import json
import re
import sys
from pathlib import Path
from typing import Any

from conformance.diff import Allowance, Difference, diff, load_allowances

# Values that differ between any two brokers, whatever they emulate: replaced by "<volatile>".
VOLATILE_KEYS = (
    "msgRate*", "msgThroughput*", "*AckRate", "averageMsgSize", "*Timestamp*", "*TimeStamp*",
    "*timestamp*", "connectedSince", "lastUpdate*", "address", "clientVersion", "*Version",
    "ledgerId", "ledgers", "storageSize", "producerName", "consumerName", "*Url", "*UrlTls",
    "lastConfirmedEntry", "cursorLedger", "cursorLedgerLastEntry", "*Time", "*Since",
    "brokerId", "leaderBroker", "currentLedger*", "compactedLedger", "metadata",
)  # fmt: skip

_TIME = re.compile(r"\d{4}-\d\d-\d\d[T ][\d:.,]+(Z|[+-]\d\d:?\d\d)?|\b1[5-9]\d{11}\b")
_ADDRESS = re.compile(r"(localhost|127\.0\.0\.1|[\w-]+(\.[\w-]+)+):\d{2,5}")
_POSITION = re.compile(r"\b\d+:(-?\d+)(:-?\d+)*\b")
_VERSION = re.compile(r"\b\d+\.\d+\.\d+(-SNAPSHOT)?\b")
_NOISE = re.compile(r"SLF4J|^\s+at |^\s*$|WARNING: |^\[.*\] (INFO|WARN|DEBUG) ")


def normalise_text(text: str) -> str:
    """A line or string with times, addresses, ledger ids and versions replaced."""
    text = _TIME.sub("<time>", text)
    text = _ADDRESS.sub("<address>", text)
    text = _POSITION.sub(lambda m: "<ledger>:" + m.group(1), text)
    return _VERSION.sub("<version>", text)


def normalise(value: Any) -> Any:
    """A JSON value with the volatile keys' values replaced and every string normalised."""
    if isinstance(value, dict):
        return {
            key: "<volatile>"
            if any(fnmatch.fnmatchcase(key, glob) for glob in VOLATILE_KEYS)
            else normalise(sub)
            for key, sub in value.items()
        }
    if isinstance(value, list):
        return [normalise(sub) for sub in value]
    if isinstance(value, str):
        return normalise_text(value)
    return value


def record(directory: Path, n: int) -> dict[str, Any]:
    """Command n's answer: exit code, normalised output and, on failure, the error's first line."""
    rc = int((directory / f"{n}.rc").read_text().strip())
    out = (directory / f"{n}.out").read_text()
    try:
        stdout: Any = normalise(json.loads(out))
    except ValueError:
        stdout = [normalise_text(line) for line in out.splitlines() if line.strip()]
    answer: dict[str, Any] = {"exit": rc, "stdout": stdout}
    if rc != 0:
        lines = (directory / f"{n}.err").read_text().splitlines()
        errors = [line for line in lines if not _NOISE.search(line)]
        answer["error"] = normalise_text(errors[0].strip()) if errors else ""
    return answer


def scenario(command: str) -> str:
    """``admin/`` and the command's words before its first argument (``admin/topics stats``)."""
    words = []
    for word in command.split():
        if word.startswith(("-", "@")) or "/" in word:
            break
        words.append(word)
    return "admin/" + " ".join(words[:2])


def commands(directory: Path) -> list[tuple[int, str]]:
    """The script's commands in order: (N, line)."""
    numbered = [(int(p.stem), p.read_text().strip()) for p in directory.glob("*.cmd")]
    return sorted(numbered)


def _judge(
    name: str, differences: list[Difference], allowances: list[Allowance]
) -> tuple[list[Difference], list[Difference]]:
    allowed = [d for d in differences if any(a.covers(name, d) for a in allowances)]
    return [d for d in differences if d not in allowed], allowed


def compare(pulsar: Path, emubrokers: list[Path], allowances: list[Allowance]) -> int:
    """Print a line per command (exit codes, then the verdict); the number not allowed."""
    failures = 0
    header = ["command", "Pulsar"] + [d.name for d in emubrokers] + ["verdict"]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    details = []
    for n, command in commands(pulsar):
        name = scenario(command)
        expected = record(pulsar, n)
        exits = [str(expected["exit"])]
        verdicts = []
        for directory in emubrokers:
            actual = record(directory, n)
            exits.append(str(actual["exit"]))
            # The cluster's answers are judged by exit code only: its brokers, bundles and
            # owners differ from a standalone's by design.
            if directory is not emubrokers[0]:
                if actual["exit"] != expected["exit"]:
                    verdicts.append(f"{directory.name}: exit differs")
                    failures += 1
                continue
            bad, allowed = _judge(name, diff(expected, actual), allowances)
            failures += len(bad)
            for d in bad:
                details.append(
                    f"{command}: {d.path}: Pulsar {d.pulsar!r}, emubroker {d.emubroker!r}"
                )
            if bad:
                verdicts.append(
                    f"{len(bad)} differences" + (f" (+{len(allowed)} allowed)" if allowed else "")
                )
            elif allowed:
                verdicts.append(f"same but {len(allowed)} allowed")
        verdict = "; ".join(verdicts) or "same"
        print(f"| `{command}` | " + " | ".join(exits) + f" | {verdict} |")
    print()
    for line in details:
        print(line[:400])
    print(f"admin oracle: {failures} differences not allowed")
    return failures


_SENT = re.compile(r"Aggregated throughput stats --- (\d+) records sent")
_RECEIVED = re.compile(r"Aggregated throughput stats --- (\d+) records received")


def perf(directory: Path) -> int:
    """Print pulsar-perf's aggregates beside the topic's counters; 1 if they disagree."""
    sent = _SENT.search((directory / "perf-produce.out").read_text())
    received = _RECEIVED.search((directory / "perf-consume.out").read_text())
    try:
        stats = json.loads((directory / "perf-stats.json").read_text())
    except ValueError:
        print("pulsar-perf check: no topic stats (see perf-stats.err)")
        return 1
    msg_in = stats.get("msgInCounter")
    msg_out = stats.get("subscriptions", {}).get("perf", {}).get("msgOutCounter")
    print(
        f"pulsar-perf check: records sent {sent and sent.group(1)}, topic msgInCounter {msg_in}; "
        f"records received {received and received.group(1)}, subscription msgOutCounter {msg_out}"
    )
    # What Pulsar's own broker shows for the same run: every record sent is counted in (pulsar-perf
    # produce sends one past --num-messages, and counts it); consume stops counting at
    # --num-messages while the broker has already dispatched what followed (1000 received, 1001
    # dispatched), so the subscription's count lies between what was received and what was sent.
    ok = (
        sent is not None
        and received is not None
        and isinstance(msg_in, int)
        and isinstance(msg_out, int)
        and int(sent.group(1)) == msg_in
        and int(received.group(1)) <= msg_out <= msg_in
    )
    print(
        "pulsar-perf check: "
        + ("matches the broker's stats" if ok else "DIFFERS from the broker's stats")
    )
    return 0 if ok else 1


def main(argv: list[str]) -> int:
    """``compare PULSAR_DIR EMU_DIR...`` or ``perf DIR``."""
    if len(argv) >= 3 and argv[0] == "compare":
        return 1 if compare(Path(argv[1]), [Path(a) for a in argv[2:]], load_allowances()) else 0
    if len(argv) == 2 and argv[0] == "perf":
        return perf(Path(argv[1]))
    print(
        "usage: python -m conformance.admin_cli compare PULSAR_DIR EMU_DIR... | perf DIR",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
