"""Diff two scenario records, and judge each difference against the allow-list."""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ALLOWED = Path(__file__).with_name("allowed.toml")
MISSING = "<missing>"


@dataclass(frozen=True)
class Difference:
    """One path whose value differs: Pulsar's and emubroker's."""

    path: str
    pulsar: Any
    emubroker: Any


_ANY = object()


@dataclass(frozen=True)
class Allowance:
    """An accepted difference: a scenario, a glob over paths, and why.

    ``emubroker`` (or ``pulsar``), when given, is the value that side must have: an entry for
    names emubroker lacks (``emubroker = "<missing>"``) does not also hide a name it adds.
    """

    scenario: str
    path: str
    reason: str
    pulsar: Any = _ANY
    emubroker: Any = _ANY

    def covers(self, scenario: str, difference: Difference) -> bool:
        """Whether this allowance accepts that difference of that scenario."""
        return (
            scenario == self.scenario
            and fnmatch.fnmatchcase(difference.path, self.path)
            and self.pulsar in (_ANY, difference.pulsar)
            and self.emubroker in (_ANY, difference.emubroker)
        )


def load_allowances(path: Path = ALLOWED) -> list[Allowance]:
    """The ``[[allowed]]`` tables of the allow-list; each needs scenario, path and reason."""
    with path.open("rb") as f:
        tables = tomllib.load(f).get("allowed", [])
    allowances = []
    for i, table in enumerate(tables):
        missing = {"scenario", "path", "reason"} - table.keys()
        if missing:
            raise ValueError(f"{path}: allowed entry {i + 1} lacks {', '.join(sorted(missing))}")
        unknown = table.keys() - {"scenario", "path", "reason", "pulsar", "emubroker"}
        if unknown:
            raise ValueError(f"{path}: allowed entry {i + 1} has unknown {', '.join(unknown)}")
        allowances.append(Allowance(**table))
    return allowances


def _close(a: Any, b: Any, tolerance: float) -> bool:
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool):
        return abs(a - b) <= tolerance * max(abs(a), abs(b))
    return False


def diff(
    pulsar: Any, emubroker: Any, path: str = "", tolerance: float | None = None,
    tolerances: dict[str, float] | None = None,
) -> list[Difference]:  # fmt: skip
    """The paths (``a.b[2].c``) where two JSON-able values differ.

    Dicts are compared key by key (a key on one side only is ``<missing>`` on the other), lists
    element by element when their lengths agree, else as a whole. Numbers under a top-level key
    of ``tolerances`` may differ by that relative amount.
    """
    tolerances = tolerances or {}
    if isinstance(pulsar, dict) and isinstance(emubroker, dict):
        out = []
        for key in sorted(pulsar.keys() | emubroker.keys(), key=str):
            sub = f"{path}.{key}" if path else str(key)
            tol = tolerances.get(str(key), tolerance) if not path else tolerance
            out += diff(pulsar.get(key, MISSING), emubroker.get(key, MISSING), sub, tol, tolerances)
        return out
    if isinstance(pulsar, list) and isinstance(emubroker, list) and len(pulsar) == len(emubroker):
        out = []
        for i, (a, b) in enumerate(zip(pulsar, emubroker, strict=True)):
            out += diff(a, b, f"{path}[{i}]", tolerance, tolerances)
        return out
    if pulsar == emubroker and type(pulsar) is type(emubroker):
        return []
    if tolerance is not None and _close(pulsar, emubroker, tolerance):
        return []
    return [Difference(path, pulsar, emubroker)]
