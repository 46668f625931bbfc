"""Runs that belong together, joined into one: a `loadgen produce` and a `loadgen consume`.

pulsar-perf users measure a topic with two commands at once, one producing and one consuming;
each writes a run directory of its own, the first without deliveries and the second without
sends, and neither alone can say what was lost, duplicated or how long messages took end to end.
Runs given to `loadgen analyze` that share a topic and overlap in time are analysed as one run
(`--join` joins all the runs given, overlapping or not): its tables are the runs' tables
together, and its scenario their producers and consumers.

Messages are identified by (producer index, sequence id) within a run (docs/loadgen-trace.md),
so runs are joined only if at most one of them produces to each topic, and only with the same
trace sample (sampling picks the same messages in every run only at the same fraction). A
consume run's deliveries of messages sent outside the producing runs' time (a backlog of earlier
runs on a reused subscription) are left out: their ids would collide with this run's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loadgen.analysis.inputs import AnalysisInputError, Run, normalize_topic

__all__ = ["Grouped", "group_runs"]


@dataclass(frozen=True)
class Grouped:
    """A run to analyse (one given, or several joined) and what to tell about how it was made."""

    label: str
    run: Run
    lines: tuple[str, ...] = ()


def _topics(run: Run, role: str) -> set[str]:
    return {normalize_topic(str(g.get("topic", ""))) for g in run.scenario.get(role) or []}


def _window(run: Run) -> tuple[int, float]:
    end = run.manifest.get("end_ns")
    return run.start_ns, float(end) if end else float("inf")


def _related(a: Run, b: Run) -> bool:
    """They share a topic and their times overlap."""
    shared = (_topics(a, "producers") | _topics(a, "consumers")) & (
        _topics(b, "producers") | _topics(b, "consumers")
    )
    (a_start, a_end), (b_start, b_end) = _window(a), _window(b)
    return bool(shared) and a_start <= b_end and b_start <= a_end


def _why_not(runs: Sequence[Run]) -> str | None:
    """Why these runs cannot be joined, or None if they can."""
    producers: dict[str, str] = {}
    for run in runs:
        for topic in sorted(_topics(run, "producers")):
            if topic in producers:
                return (
                    f"runs {producers[topic]} and {run.run_id} both produce to {topic} "
                    "(their messages' ids would collide)"
                )
            producers[topic] = run.run_id
    samples = {run.sample for run in runs}
    if len(samples) > 1:
        return f"their trace samples differ ({', '.join(f'{s:g}' for s in sorted(samples))})"
    return None


def group_runs(runs: Sequence[tuple[str, Run]], *, join: bool = False) -> list[Grouped]:
    """The runs to analyse: those that belong together joined (all of them with `join`).

    Raises:
        AnalysisInputError: `join` was asked for runs that cannot be joined.
    """
    parent = list(range(len(runs)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i in range(len(runs)):
        for j in range(i + 1, len(runs)):
            if join or _related(runs[i][1], runs[j][1]):
                parent[root(j)] = root(i)
    groups: dict[int, list[int]] = {}
    for i in range(len(runs)):
        groups.setdefault(root(i), []).append(i)
    grouped: list[Grouped] = []
    for members in groups.values():
        labels = [runs[i][0] for i in members]
        chosen = [runs[i][1] for i in members]
        if len(members) == 1:
            grouped.append(Grouped(labels[0], chosen[0]))
            continue
        names = " and ".join(labels)
        reason = _why_not(chosen)
        if reason is not None:
            if join:
                raise AnalysisInputError(f"--join: {names} cannot be joined: {reason}")
            line = f"not joined: {names} share a topic and overlap in time, but {reason}"
            grouped += [
                Grouped(label, run, (line,)) for label, run in zip(labels, chosen, strict=True)
            ]
            continue
        why = "as --join asks" if join else "they share a topic and overlap in time"
        line = f"joined: {names} are analysed as one run ({why})"
        grouped.append(Grouped(" + ".join(labels), _joined(chosen, line), (line,)))
    return grouped


def _joined(runs: Sequence[Run], line: str) -> Run:
    first = min(runs, key=lambda run: run.start_ns)
    ends = [int(run.manifest["end_ns"]) for run in runs if run.manifest.get("end_ns")]
    manifest: dict[str, Any] = {
        **first.manifest,
        "run_id": "+".join(run.run_id for run in runs),
        "start_ns": first.start_ns,
        "end_ns": max(ends) if ends else None,
        "scenario": {
            "name": " + ".join(str(run.scenario.get("name", "?")) for run in runs),
            "description": line,
            "producers": [g for run in runs for g in run.scenario.get("producers") or []],
            "consumers": [g for run in runs for g in run.scenario.get("consumers") or []],
            # Time zero is the earliest run's start: its phases are the joined run's.
            "phases": first.scenario.get("phases") or [],
        },
        "joined": [{"run_id": run.run_id, "path": run.path} for run in runs],
    }
    for key, pick in (("first_send_ns", min), ("last_receive_ns", max)):
        values = [int(run.manifest[key]) for run in runs if run.manifest.get(key)]
        manifest[key] = pick(values) if values else None
    tables: dict[str, Any] = {}
    for run in runs:
        for name, frame in run.tables.items():
            tables[name] = tables[name].unionByName(frame) if name in tables else frame
    producing = [run for run in runs if run.has("sends")]
    if producing and "receives" in tables:
        from pyspark.sql import functions as F

        low = min(run.start_ns for run in producing)
        high = max(_window(run)[1] for run in producing)
        sent = F.col("send_ns") >= F.lit(low)
        if high != float("inf"):
            sent &= F.col("send_ns") <= F.lit(int(high))
        tables["receives"] = tables["receives"].where(sent)
    notes: list[str] = []
    for run in runs:
        for note in run.notes:
            table = re.search(r"\b(\w+)/", note)
            if (table is None or table[1] not in tables) and note not in notes:
                notes.append(note)
    return Run(
        path=" + ".join(run.path for run in runs), manifest=manifest, tables=tables, notes=notes
    )
