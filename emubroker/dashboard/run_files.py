"""Reading a run directory's Parquet files for the replay (``emubroker dashboard RUN_DIR``).

Every file's schema version is checked before its rows are read (the version in its Arrow schema
metadata), and only the columns the replay uses are read, by name (the traces' fields are only
ever appended). Problems are :class:`RunError`, whose message is one line naming the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import msgspec

from emubroker.loadbalance.trace.records import FIELD_NAMES, SCHEMA_VERSION, LoadBalancerTraceRecord
from emubroker.naming import InvalidNameError, TopicName

if TYPE_CHECKING:
    from pathlib import Path

    import pyarrow as pa

__all__ = [
    "NS",
    "Dispatch",
    "RunError",
    "dispatch_table",
    "load_balancer_rows",
    "seconds_table",
]

NS: Final = 1_000_000_000

DISPATCH_SCHEMA_VERSION: Final = b"1"
SECONDS_SCHEMA_VERSION: Final = b"1"


class RunError(Exception):
    """The run directory cannot be replayed; the message is one line naming the problem."""


def _parquet_files(directory: Path) -> list[Path]:
    # Dot-files are traces still being written (or lost with a crash): never complete.
    return sorted(p for p in directory.glob("*.parquet") if not p.name.startswith("."))


def _read(
    path: Path, kind: str, version_key: bytes, version: bytes, columns: list[str]
) -> pa.Table:
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (OSError, ValueError) as exc:
        raise RunError(f"{path}: not a readable Parquet file ({exc})") from None
    found = (schema.metadata or {}).get(version_key)
    if found != version:
        shown = "none" if found is None else found.decode(errors="replace")
        raise RunError(
            f"{path}: unknown {kind} schema version {shown} (this emubroker reads version "
            f"{version.decode()})"
        )
    present = [name for name in columns if name in schema.names]
    return pq.read_table(path, columns=present)


@dataclass
class Dispatch:
    """A subscription's dispatched messages and limit per second (from the dispatch trace)."""

    seconds: list[int] = field(default_factory=list)
    messages: list[int] = field(default_factory=list)
    limits: list[float | None] = field(default_factory=list)


def load_balancer_rows(directory: Path) -> list[LoadBalancerTraceRecord]:
    files = _parquet_files(directory)
    if not files:
        raise RunError(
            f"{directory.parent}: no load-balancer trace (no loadbalance/*.parquet): record the "
            "run with emubroker simulate, or with emubrokerLoadBalancerTraceDir set"
        )
    rows: list[LoadBalancerTraceRecord] = []
    version = str(SCHEMA_VERSION).encode()
    for path in files:
        table = _read(
            path, "load-balancer trace", b"emubroker.schema_version", version, list(FIELD_NAMES)
        )
        try:
            rows.extend(msgspec.convert(table.to_pylist(), list[LoadBalancerTraceRecord]))
        except msgspec.ValidationError as exc:
            raise RunError(f"{path}: unreadable load-balancer trace row ({exc})") from None
    if not rows:
        raise RunError(f"{directory}: the load-balancer trace has no rows")
    rows.sort(key=lambda row: row.wall_ns)
    return rows


def seconds_table(directory: Path) -> dict[int, list[dict[str, Any]]]:
    by_second: dict[int, list[dict[str, Any]]] = {}
    columns = ["second", "role", "topic", "subscription", "messages", "bytes", "backlog"]
    for path in _parquet_files(directory):
        table = _read(
            path,
            "loadgen seconds table",
            b"loadgen.schema_version",
            SECONDS_SCHEMA_VERSION,
            columns,
        )
        for row in table.to_pylist():
            by_second.setdefault(row["second"], []).append(row)
    return by_second


def dispatch_table(directory: Path) -> tuple[dict[tuple[str, str], Dispatch], dict[str, int]]:
    """Per subscription, dispatched messages and limits per second; partitions per topic."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = [
        "wall_ns",
        "event",
        "topic",
        "subscription",
        "messages",
        "subscription_msg_rate",
        "subscription_period",
        "topic_msg_rate",
        "topic_period",
    ]
    tables = [
        _read(path, "dispatch trace", b"emubroker.schema_version", DISPATCH_SCHEMA_VERSION, columns)
        for path in _parquet_files(directory)
    ]
    if not tables:
        return {}, {}
    table = pa.concat_tables(tables)
    table = table.filter(pc.equal(table["event"], "dispatch"))
    second = pc.divide(table["wall_ns"], pa.scalar(NS, pa.int64()))

    def per_second(rate: str, period: str) -> pa.Array:
        # The limit in msg/s (a rate per period of seconds); -1: none at that level.
        limited = pc.greater(table[rate], 0)
        value = pc.divide(
            pc.cast(table[rate], pa.float64()),
            pc.cast(pc.max_element_wise(table[period], 1), pa.float64()),
        )
        return pc.if_else(limited, value, pa.scalar(-1.0))

    grouped = (
        pa.table(
            {
                "topic": table["topic"],
                "subscription": table["subscription"],
                "second": second,
                "messages": table["messages"],
                "sub_limit": per_second("subscription_msg_rate", "subscription_period"),
                "topic_limit": per_second("topic_msg_rate", "topic_period"),
            }
        )
        .group_by(["topic", "subscription", "second"])
        .aggregate([("messages", "sum"), ("sub_limit", "max"), ("topic_limit", "max")])
        .sort_by([("topic", "ascending"), ("subscription", "ascending"), ("second", "ascending")])
    )
    # loadgen's table names a partitioned topic, the dispatch trace its partitions: a
    # partitioned topic's subscription shows its partitions' sums (each partition has the limit).
    sums: dict[tuple[str, str], dict[int, list[float]]] = {}
    partitions: dict[str, int] = {}
    for row in grouped.to_pylist():
        topic, index = _partitioned_name(row["topic"])
        if index >= 0:
            partitions[topic] = max(partitions.get(topic, 0), index + 1)
        limit = row["sub_limit_max"] if row["sub_limit_max"] > 0 else row["topic_limit_max"]
        numbers = sums.setdefault((topic, row["subscription"]), {}).setdefault(
            row["second"], [0, 0.0]
        )
        numbers[0] += row["messages_sum"]
        numbers[1] += max(limit, 0.0)
    result: dict[tuple[str, str], Dispatch] = {}
    for key, numbers_by_second in sums.items():
        entry = result[key] = Dispatch()
        for at in sorted(numbers_by_second):
            messages, limit = numbers_by_second[at]
            entry.seconds.append(at)
            entry.messages.append(int(messages))
            entry.limits.append(limit or None)
    return result, partitions


def _partitioned_name(name: str) -> tuple[str, int]:
    """The partitioned topic of a partition and its index (-1: not a partition)."""
    try:
        topic = TopicName.parse(name)
    except InvalidNameError:
        return name, -1
    return str(topic.partitioned_topic_name), topic.partition_index
