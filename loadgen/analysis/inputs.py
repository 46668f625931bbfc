"""A run directory's tables, found through Hadoop's file system (local paths or any URI).

A run directory is what `loadgen run` writes (docs/loadgen-trace.md): `manifest.json` and the
tables `sends/`, `receives/`, `seconds/`, `events/`; the brokers' traces join it as
`dispatch/` (docs/dispatch-trace.md) and `loadbalance/` (docs/load-balancer-trace.md) when they
were written there. Every table is checked before any analysis runs: a missing or empty
required table, or a schema version this analysis does not know, stops with a clear message.
The schemas are `emubroker.traceschema`'s, as the writers use them; a column a table's files lack
(they were written before it was added) is read as its default, so older runs stay analysable.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from emubroker.traceschema import BROKER_TRACES, LOADGEN_TABLES, TraceTable, UnreadableTraceError
from emubroker.traceschema.loadgen import SCHEMA_VERSION
from emubroker.traceschema.table import plain_type

__all__ = [
    "AnalysisInputError",
    "Phase",
    "Run",
    "attach_trace",
    "load_run",
]

_LOADGEN_TABLES: Final = ("sends", "receives", "seconds", "events")

_SPARK_TYPES: Final = {int: "bigint", float: "double", str: "string", bool: "boolean"}


class AnalysisInputError(Exception):
    """A run cannot be analysed as it is; the message names the run, the table and why."""


@dataclass(frozen=True)
class Phase:
    """A scenario phase, in seconds after the run's start."""

    name: str
    start_s: float
    end_s: float  # math.inf for a phase without an end


@dataclass
class Run:
    """One run's inputs: its manifest, its phases, and a DataFrame per table present."""

    path: str
    manifest: dict[str, Any]
    tables: dict[str, Any] = field(default_factory=dict)  # name -> DataFrame
    notes: list[str] = field(default_factory=list)  # what is missing and was left out

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id") or self.path.rstrip("/").rsplit("/", 1)[-1])

    @property
    def start_ns(self) -> int:
        """Time zero of every plot: the first second of the schedule."""
        start = self.manifest.get("start_ns") or self.manifest.get("prepared_ns") or 0
        return int(start)

    @property
    def scenario(self) -> dict[str, Any]:
        scenario = self.manifest.get("scenario")
        return scenario if isinstance(scenario, dict) else {}

    @property
    def sample(self) -> float:
        """The fraction of messages with trace rows (`--trace-sample`)."""
        value = self.manifest.get("trace_sample")
        return float(value) if isinstance(value, int | float) and value > 0 else 1.0

    def phases(self) -> list[Phase]:
        """The scenario's phases, then `drain` until the end of the run."""
        phases, at = [], 0.0
        for phase in self.scenario.get("phases") or []:
            duration = _seconds(phase.get("duration"))
            phases.append(Phase(str(phase.get("name", "")), at, at + duration))
            at += duration
        end_ns = self.manifest.get("end_ns")
        if math.isfinite(at) and end_ns:
            phases.append(Phase("drain", at, max(at, (int(end_ns) - self.start_ns) / 1e9)))
        return phases

    def subscriptions(self) -> list[tuple[str, str, str]]:
        """(topic, subscription, type) of the scenario's consumer groups, topics normalised."""
        seen: dict[tuple[str, str], str] = {}
        for group in self.scenario.get("consumers") or []:
            key = (normalize_topic(str(group.get("topic", ""))), str(group.get("subscription")))
            seen.setdefault(key, str(group.get("type", "Exclusive")))
        return [(topic, sub, kind) for (topic, sub), kind in seen.items()]

    def has(self, *names: str) -> bool:
        return all(name in self.tables for name in names)


def normalize_topic(name: str) -> str:
    """`persistent://tenant/ns/topic` for a short name, as Pulsar clients complete it."""
    if "://" in name:
        return name
    parts = name.split("/")
    if len(parts) == 1:
        return f"persistent://public/default/{name}"
    return f"persistent://{name}"


def _seconds(value: Any) -> float:
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9.]+|inf)\s*(ms|s|m|h)?\s*", value)
        if match:
            scale = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}[match.group(2) or "s"]
            return float(match.group(1)) * scale
    return math.inf


def _uri(path: str) -> str:
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", path):
        return path.rstrip("/")
    return Path(path).absolute().as_uri()


class _FileSystem:
    """Hadoop's FileSystem through Spark's JVM: local paths, hdfs://, s3a://, ... alike."""

    def __init__(self, spark: Any) -> None:
        self._jvm = spark.sparkContext._jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _path(self, uri: str) -> tuple[Any, Any]:
        path = self._jvm.org.apache.hadoop.fs.Path(uri)
        return path, path.getFileSystem(self._conf)

    def exists(self, uri: str) -> bool:
        path, fs = self._path(uri)
        return bool(fs.exists(path))

    def data_files(self, uri: str) -> list[str]:
        """Visible files under `uri` (Spark skips names starting with `.` or `_`)."""
        path, fs = self._path(uri)
        if not fs.exists(path):
            return []
        names = []
        for status in fs.listStatus(path):
            name = status.getPath().getName()
            if not name.startswith((".", "_")):
                names.append(name)
        return names


def load_run(spark: Any, path: str) -> Run:
    """Read `path`'s manifest and open every table present.

    Raises:
        AnalysisInputError: no manifest, an unknown schema version, a table without the
            columns of its schema, or neither `sends` nor `receives` with rows.
    """
    uri = _uri(path)
    fs = _FileSystem(spark)
    if not fs.exists(uri):
        raise AnalysisInputError(f"{path}: no such run directory")
    manifest_uri = f"{uri}/manifest.json"
    if not fs.exists(manifest_uri):
        raise AnalysisInputError(
            f"{path}: no manifest.json: not a loadgen run directory (loadgen run --trace-dir)"
        )
    text = _read_text(spark, manifest_uri)
    try:
        manifest = json.loads(text)
    except ValueError as exc:
        raise AnalysisInputError(f"{path}: manifest.json is not JSON ({exc})") from None
    version = manifest.get("schema_version")
    if version != SCHEMA_VERSION:
        raise AnalysisInputError(
            f"{path}: trace schema version {version!r} is not one this analysis reads "
            f"({SCHEMA_VERSION}); analyse it with the emubroker that wrote it"
        )
    run = Run(path=path, manifest=manifest)
    for name in _LOADGEN_TABLES:
        frame = _open(spark, fs, run, f"{uri}/{name}", LOADGEN_TABLES[name])
        if frame is not None:
            run.tables[name] = frame
        elif name == "events":
            run.notes.pop()  # a scenario without events has no events table: nothing missing
    if not run.has("sends") and not run.has("receives"):
        raise AnalysisInputError(
            f"{path}: tables sends/ and receives/ are both missing or empty: nothing to analyse"
            + (f" ({'; '.join(run.notes)})" if run.notes else "")
        )
    for name, table in BROKER_TRACES.items():
        frame = _open(spark, fs, run, f"{uri}/{name}", table, _WHAT[name])
        if frame is not None:
            _check_row_versions(frame, path, table)
            run.tables[name] = frame
    return run


def _read_text(spark: Any, uri: str) -> str:
    if uri.startswith("file:"):
        from urllib.parse import urlparse
        from urllib.request import url2pathname

        return Path(url2pathname(urlparse(uri).path)).read_text(encoding="utf-8")
    return str(spark.read.text(uri, wholetext=True).first()[0])


def _open(
    spark: Any,
    fs: _FileSystem,
    run: Run,
    uri: str,
    table: TraceTable,
    what: str = "",
) -> Any | None:
    """The table's DataFrame (its schema's columns), or None with a note if missing or empty."""
    name = table.name
    what = what or f"table {name}"
    if not fs.exists(uri):
        run.notes.append(
            f"no {what} ({name}/ does not exist)"
            if what != f"table {name}"
            else f"table {name} is missing ({name}/ does not exist)"
        )
        return None
    if not fs.data_files(uri):
        run.notes.append(f"{what} is empty (no Parquet files in {name}/)")
        return None
    try:
        frame = _conform(spark.read.parquet(uri), table)
    except UnreadableTraceError as exc:
        raise AnalysisInputError(f"{run.path}: {exc}") from None
    # Writers create a file with its first rows (docs/loadgen-trace.md, dispatch-trace.md),
    # so a table with files has rows: no Spark job is spent on asking.
    return frame


def _conform(frame: Any, table: TraceTable) -> Any:
    """`frame` with the table's columns in schema order, those its files lack as their defaults.

    Raises:
        UnreadableTraceError: a column without a default (one of the first version) is absent.
    """
    from pyspark.sql import functions as F

    filled = table.absent(frame.columns)
    types = {field.name: plain_type(field.type)[0] for field in table.fields}
    return frame.select(
        *(
            F.lit(filled[name]).cast(_SPARK_TYPES[types[name]]).alias(name)
            if name in filled
            else F.col(name)
            for name in table.field_names
        )
    )


def _check_row_versions(frame: Any, path: str, table: TraceTable) -> None:
    from pyspark.sql import functions as F

    name, known = table.name, table.version
    low, high = frame.agg(F.min("schema_version"), F.max("schema_version")).first()
    if low != known or high != known:
        found = str(low) if low == high else f"{low} to {high}"
        raise AnalysisInputError(
            f"{path}: table {name} has schema version {found}; this analysis reads version "
            f"{known} only"
        )


_WHAT: Final = {"dispatch": "dispatch trace", "loadbalance": "load-balancer trace"}


def attach_trace(spark: Any, run: Run, name: str, location: str) -> None:
    """Read the brokers' trace `name` (`dispatch`, `loadbalance`) from `location` for `run`.

    For brokers that wrote their trace outside the run directory (a cluster started by hand,
    `emubrokerLoadBalancerTraceDir` naming a directory of its own): such a directory may hold
    several runs, so the rows kept are those of the run's window, from `prepared_ns` (else
    `start_ns`) to `end_ns`, and, for the load-balancer trace, each broker's last load report
    before it (the usage the run started from). It replaces the run directory's own trace.

    Raises:
        AnalysisInputError: no such directory, no Parquet file in it (a broker completes its
            file when it stops), no row in the run's window, or an unknown schema version.
    """
    from pyspark.sql import functions as F

    table, what = BROKER_TRACES[name], _WHAT[name]
    uri = _uri(location)
    fs = _FileSystem(spark)
    if not fs.exists(uri):
        raise AnalysisInputError(f"{location}: no such {what} directory")
    if not fs.data_files(uri):
        raise AnalysisInputError(
            f"{location}: no {what} files (a broker completes its file when it stops: "
            "stop the cluster before analysing)"
        )
    frame = spark.read.parquet(uri)
    absent = [c for c in table.field_names if c not in frame.columns and c not in table.defaults]
    if absent:
        more = f" (and {len(absent) - 1} more)" if len(absent) > 1 else ""
        raise AnalysisInputError(f"{location}: not a {what}: no column {absent[0]}{more}")
    frame = _conform(frame, table)
    columns = table.field_names
    manifest = run.manifest
    low = int(manifest.get("prepared_ns") or run.start_ns)
    wall = F.col("wall_ns")
    window = wall >= F.lit(low)
    if manifest.get("end_ns"):
        window &= wall <= F.lit(int(manifest["end_ns"]))
    kept = frame.where(window)
    if name == "loadbalance":
        before = frame.where((F.col("event") == "report") & (wall < F.lit(low)))
        last = before.groupBy("broker").agg(F.max("wall_ns").alias("wall_ns"))
        kept = kept.unionByName(before.join(last, ["broker", "wall_ns"]).select(*columns))
    if kept.where(window).limit(1).count() == 0:
        raise AnalysisInputError(
            f"{location}: no {what} rows in the time of run {run.run_id} "
            "(is it the trace of that run's brokers?)"
        )
    _check_row_versions(kept, location, table)
    run.tables[name] = kept
    run.notes = [
        note for note in run.notes if not note.startswith((f"no {what} ", f"{what} is empty"))
    ]
