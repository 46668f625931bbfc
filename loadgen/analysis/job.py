"""What an analysis job is: everything about it declared once (`jobs.JOBS` lists them).

A `Job` holds its Spark work (`run`), the tables it needs, the text of its report section,
the tables and figures that section shows, and its headline numbers (what they mean and how
they are read from its tables). The report, `summary.json` and the figures read it from here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from loadgen.analysis.common import Context, Table
from loadgen.analysis.inputs import Run

__all__ = ["Headline", "Job", "JobResult", "SectionFigure"]


class SectionFigure(Protocol):
    """A figure of a job's section (`plots.Figure`): a PNG of the runs side by side."""

    title: str

    def render(self, runs: Sequence[tuple[str, JobResult]]) -> bytes | None: ...


@dataclass(frozen=True)
class Headline:
    """Headline numbers: each key with what it means, and how a run's result gives them.

    `read` returns a value (or None) for each of `labels`' keys it can give.
    """

    labels: Mapping[str, str]
    read: Callable[[JobResult], dict[str, Any]]


@dataclass(frozen=True)
class Job:
    """One analysis: its name (the Spark job group), what it answers, what it reads and shows.

    Attributes:
        explain: The report section's text.
        tables: The tables its section shows (every table is written as CSV).
        flags: Table -> the column whose non-zero value marks a row as bad (shown red).
        figures: Its section's figures.
        headline: Its headline numbers (in report order, after the run's own).
    """

    name: str
    title: str
    run: Callable[[Context], dict[str, Table]]
    needs: tuple[str, ...] = ()
    needs_any: tuple[str, ...] = ()
    explain: str = ""
    tables: tuple[str, ...] = ()
    flags: Mapping[str, str] = field(default_factory=dict)
    figures: tuple[SectionFigure, ...] = ()
    headline: Headline | None = None

    def missing(self, run: Run) -> str | None:
        """Why this job cannot run on `run`, or None if it can."""
        absent = [name for name in self.needs if not run.has(name)]
        if self.needs_any and not any(run.has(name) for name in self.needs_any):
            absent.append(" or ".join(self.needs_any))
        return f"needs table {', '.join(absent)}" if absent else None


@dataclass
class JobResult:
    """What the jobs made of one run: tables by name, and the jobs skipped with the reason.

    `jobs` are the declarations the run went through (their headline numbers and sections).
    """

    context: Context
    tables: dict[str, Table]
    skipped: dict[str, str]
    jobs: tuple[Job, ...] = ()
