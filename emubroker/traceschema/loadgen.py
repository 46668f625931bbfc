"""loadgen's run tables, version 1: one record per table, documented in docs/loadgen-trace.md.

A run directory holds one sub-directory per table (`sends/`, `receives/`, `seconds/`,
`events/`) of Parquet files, plus `manifest.json`; Spark reads a table with
`spark.read.parquet(f"{run_dir}/sends")`, or every run's with `runs/*/sends`.

Every file carries the version in its Arrow schema metadata (`loadgen.schema_version`) and the
table name (`loadgen.table`); the manifest carries it too. The tables only grow (`table.py`).

Times are integers, nanoseconds since the Unix epoch (`Clock.wall_ns()`), not Parquet
timestamps: Spark 3 cannot read nanosecond timestamps without a legacy flag.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec

from emubroker.traceschema.table import TraceTable

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "LOADGEN_TABLES",
    "SCHEMA_VERSION",
    "TABLES",
    "EventRecord",
    "ReceiveRecord",
    "SecondRecord",
    "SendRecord",
    "arrow_schema",
    "field_names",
    "int64_columns",
]

SCHEMA_VERSION: Final = 1


class SendRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One message a producer sent (table `sends`)."""

    run_id: str
    worker: int
    topic: str  # the partition's own name for partitioned topics
    partition: int  # -1 when the topic is not partitioned
    producer: str  # the producer name loadgen gave it
    producer_index: int  # unique in the run; the payload header carries it
    sequence_id: int
    key: str | None
    size: int
    intended_ns: int  # when the schedule meant to send it (open loop)
    send_ns: int  # when loadgen handed it to the client
    receipt_ns: int | None  # SEND_RECEIPT arrived; None if the send failed or never completed
    ledger_id: int  # -1 when there is no receipt
    entry_id: int
    batch_index: int  # -1 when not batched
    error: str | None  # why the send failed; None when it succeeded
    broker: str  # the broker the producer was attached to when it sent


class ReceiveRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One delivery of a message to a consumer (table `receives`).

    A message is received once per subscription, and again on every redelivery.
    """

    run_id: str
    worker: int
    topic: str
    partition: int
    subscription: str
    consumer: str
    producer: str
    producer_index: int
    sequence_id: int
    key: str | None
    size: int
    intended_ns: int  # from the payload header
    send_ns: int  # from the payload header
    receive_ns: int  # when `receive()` handed it to loadgen
    ledger_id: int
    entry_id: int
    batch_index: int
    redelivery_count: int
    broker: str  # the broker the consumer was attached to when it received


class SecondRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One second of one producer or consumer group, summed over its workers (table `seconds`).

    Written for every second of every run, whatever the trace sampling.
    """

    run_id: str
    second: int  # start of the second, seconds since the Unix epoch
    phase: str
    role: str  # "produce" or "consume"
    group: str
    topic: str  # the topic as the scenario names it (all its partitions)
    subscription: str | None  # consumer groups only
    messages: int
    bytes: int
    errors: int  # failed sends (produce); always 0 for consume
    latency_mean_us: float | None  # publish latency (produce) or end-to-end (consume), from
    latency_p50_us: float | None  # the intended send time; None when no message completed
    latency_p95_us: float | None
    latency_p99_us: float | None
    latency_p999_us: float | None
    latency_max_us: float | None
    backlog: int | None  # consume: acknowledged sends minus receives so far (estimate)
    reconnections: int  # handlers that re-attached to a broker in this second


class EventRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One timed event of a scenario (table `events`)."""

    run_id: str
    index: int  # position in the scenario's events
    at_s: float  # scheduled time, seconds after the run's start
    action: str
    target: str  # what it acted on (topic, bundle, broker, group, config key)
    params: str  # the event's fields as JSON
    fired_ns: int
    finished_ns: int
    outcome: str  # "ok" or "error"
    detail: str  # the error, or what the action answered


def _table(name: str, record: type[msgspec.Struct]) -> TraceTable:
    return TraceTable(name, record, SCHEMA_VERSION, "loadgen", "table")


LOADGEN_TABLES: Final[dict[str, TraceTable]] = {
    "sends": _table("sends", SendRecord),
    "receives": _table("receives", ReceiveRecord),
    "seconds": _table("seconds", SecondRecord),
    "events": _table("events", EventRecord),
}
"""The run's tables by name, in the manifest's order."""

TABLES: Final[dict[str, type[msgspec.Struct]]] = {
    name: table.record for name, table in LOADGEN_TABLES.items()
}
"""Each table's record type."""


def field_names(record_type: type[msgspec.Struct]) -> tuple[str, ...]:
    """The record's fields, in file order."""
    return tuple(field.name for field in msgspec.structs.fields(record_type))


def arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of `table` (a key of `TABLES`), with the version in its metadata."""
    return LOADGEN_TABLES[table].arrow_schema()


def int64_columns(table: str) -> frozenset[str]:
    """The table's integer columns that are never null (buffered as `array("q")`)."""
    return LOADGEN_TABLES[table].int64_columns
