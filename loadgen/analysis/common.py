"""What every analysis shares: the run's context, collected tables, events, time and topics."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from loadgen.analysis.inputs import Phase, Run

__all__ = [
    "DISRUPTIONS",
    "LOAD_MANAGER_ACTIONS",
    "Context",
    "Event",
    "Table",
    "base_topic",
    "collect",
    "local_frame",
    "phase_names",
    "phase_of",
    "seconds_since",
]

DISRUPTIONS: Final = frozenset(
    {"UnloadTopic", "UnloadNamespace", "UnloadBundle", "SplitBundle", "KillBroker", "unload"}
)
"""Events that move or stop topics: their delivery gaps and anomalies are looked for."""


@dataclass(frozen=True)
class Table:
    """An output table, collected: column names and rows (plain Python values)."""

    name: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]

    def column(self, name: str) -> list[Any]:
        index = self.columns.index(name)
        return [row[index] for row in self.rows]


@dataclass(frozen=True)
class Event:
    """Something that happened to the cluster: a scenario event or a load-manager decision.

    Attributes:
        at_ns: When it started (wall clock, ns since the epoch).
        source: `loadgen` (the scenario's events table) or `load-manager` (its trace).
        action: e.g. `UnloadTopic`, `KillBroker`, `unload`, `split`.
        target: What it acted on: a topic, `tenant/ns`, `tenant/ns/0x.._0x..`, `broker-0`.
        detail: One line for a person (the outcome, or from -> to and the reason).
    """

    at_ns: int
    source: str
    action: str
    target: str
    detail: str = ""
    params: dict[str, Any] = field(default_factory=dict, compare=False)

    def label(self) -> str:
        return f"{self.action} {self.target}".strip()


@dataclass
class Context:
    """One run being analysed: its inputs, Spark, its events and its time zero.

    It also keeps the aggregates several analyses share (`shared`), so that each pass over
    the big tables is made once per run; `release` frees them when the jobs are done.
    """

    spark: Any
    run: Run
    events: list[Event]
    skew_threshold: float = 0.10
    _shared: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def start_ns(self) -> int:
        return self.run.start_ns

    @property
    def phases(self) -> list[Phase]:
        return self.run.phases()

    @property
    def warmup_s(self) -> float:
        """The scenario's warm-up (`warmup`, seconds): left out of the mean rates."""
        value = self.run.scenario.get("warmup")
        return float(value) if isinstance(value, int | float) and value > 0 else 0.0

    def table(self, name: str) -> Any:
        return self.run.tables[name]

    def shared(self, name: str, build: Callable[[Context], Any]) -> Any:
        """The run's aggregate `name`: built by `build` the first time, then kept in memory.

        It is computed at once, in a Spark job group of its own (`shared:NAME`), so that the
        Spark UI (and the benchmark) show its cost apart from the analysis that first asked.
        """
        if name not in self._shared:
            sc = self.spark.sparkContext
            group = sc.getLocalProperty("spark.jobGroup.id")
            description = sc.getLocalProperty("spark.job.description")
            sc.setJobGroup(f"shared:{name}", f"{self.run.run_id}: {name} (shared)")
            try:
                frame = build(self).persist()
                frame.count()
            finally:
                if group is not None:
                    sc.setJobGroup(group, description or group)
            self._shared[name] = frame
        return self._shared[name]

    def release(self) -> None:
        """Free the shared aggregates (the collected tables are all the report needs)."""
        for frame in self._shared.values():
            frame.unpersist()
        self._shared.clear()


def collect(frame: Any, name: str, order: list[str] | None = None) -> Table:
    """Run `frame` (ordered by `order`) and keep its rows as a `Table` called `name`.

    The tables collected are small: they are sorted in one partition, which spares the
    sampling job of a global `orderBy` (the same order: ascending, nulls first).
    """
    if order:
        frame = frame.repartition(1).sortWithinPartitions(*order)
    rows = [tuple(row) for row in frame.collect()]
    return Table(name, tuple(frame.columns), rows)


def local_frame(
    spark: Any, rows: Sequence[Sequence[Any]], schema: Sequence[tuple[str, str]]
) -> Any:
    """A small DataFrame of `rows` (Python values) with columns `schema` ((name, SQL type)).

    Built from literals in the JVM: `createDataFrame` would start Python workers to read a
    Python list, seconds on a small machine for a table of a few rows.
    """
    from pyspark.sql import functions as F

    if not rows:
        return spark.range(0).select(
            *(F.lit(None).cast(kind).alias(column) for column, kind in schema)
        )
    structs = [
        F.struct(
            *(
                F.lit(value).cast(kind).alias(column)
                for value, (column, kind) in zip(row, schema, strict=True)
            )
        )
        for row in rows
    ]
    return spark.range(1).select(F.inline(F.array(*structs)))


def seconds_since(column: Any, start_ns: int) -> Any:
    """Seconds since the run's start, as a double, of a column of epoch nanoseconds."""
    from pyspark.sql import functions as F

    return (column - F.lit(start_ns)).cast("double") / 1e9


def phase_of(seconds: Any, phases: list[Phase], names: list[str] | None = None) -> Any:
    """The phase name at `seconds` after the start (`before` and `after` outside them).

    Given `names` (`phase_names(phases)`), the name's index in it instead: a number groups
    faster than a string.
    """
    from pyspark.sql import functions as F

    def value(name: str) -> Any:
        return F.lit(name if names is None else names.index(name))

    if not phases:
        return value("run")
    expr = F.when(seconds < F.lit(phases[0].start_s), value("before"))
    for phase in phases:
        expr = expr.when(seconds < F.lit(phase.end_s), value(phase.name))
    return expr.otherwise(value("after"))


def phase_names(phases: list[Phase]) -> list[str]:
    """Every name `phase_of` can give for `phases`, once each."""
    if not phases:
        return ["run"]
    return list(dict.fromkeys(["before", *(phase.name for phase in phases), "after"]))


def base_topic(column: Any) -> Any:
    """The topic without its `-partition-N` suffix."""
    from pyspark.sql import functions as F

    return F.regexp_replace(column, r"-partition-[0-9]+$", "")


def scenario_events(run: Run) -> list[Event]:
    """The scenario's events table as `Event`s (empty without one)."""
    if not run.has("events"):
        return []
    events = []
    for row in run.tables["events"].orderBy("fired_ns").collect():
        try:
            params = json.loads(row["params"]) if row["params"] else {}
        except ValueError:
            params = {}
        detail = f"{row['outcome']}: {row['detail']}" if row["detail"] else row["outcome"]
        events.append(
            Event(int(row["fired_ns"]), "loadgen", row["action"], row["target"], detail, params)
        )
    return events


LOAD_MANAGER_ACTIONS: Final = {"shed": "unload", "split": "split", "placement": "placement"}
"""The load manager's decisions in its trace (docs/load-balancer-trace.md), as event actions.

A `shed` row is the leader's decision to unload a bundle, made just before the unload (the
event `unload`); TransferShedder's cycles that decide nothing (`label = Skip`) are not events.
An owner's `unload` row carries out a decision already here (a shed or a split) or an admin
call (the scenario's own event): it stays in the `lb_timeline` table, not among the events.
"""


def load_manager_events(run: Run) -> list[Event]:
    """Unloads (shed decisions), splits and placements from the load-balancer trace."""
    if not run.has("loadbalance"):
        return []
    from pyspark.sql import functions as F

    rows = (
        run.tables["loadbalance"]
        .where(F.col("event").isin(*LOAD_MANAGER_ACTIONS) & (F.col("label") != "Skip"))
        .orderBy("wall_ns")
        .collect()
    )
    events = []
    for row in rows:
        action = LOAD_MANAGER_ACTIONS[row["event"]]
        why = f" ({row['strategy']}: {row['reason']})" if row["reason"] else ""
        if action == "split":
            detail = f"{row['source_broker']}: into {row['split_children']}{why}"
        else:
            moved = f"{row['source_broker']} -> " if row["source_broker"] else "-> "
            detail = f"{moved}{row['dest_broker'] or '(next lookup)'}{why}"
        events.append(Event(int(row["wall_ns"]), "load-manager", action, row["bundle"], detail))
    return events
