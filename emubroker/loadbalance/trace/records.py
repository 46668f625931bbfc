"""The load-balancer trace: a Parquet row per report, shedding decision, placement, split, unload.

The rows are for the Spark analysis (``loadgen analyze``).

Schema version 1 is documented field by field in ``docs/load-balancer-trace.md``; it follows
the dispatch trace's conventions (``emubroker/ratelimit/trace.py``): the version in every row
and in the Arrow schema metadata, no nullable column (-1 and ``""`` mean "not applicable"),
fields only ever appended (STYLE.md rule 6).

Rows are built from what the pure load-balancing code produces: :func:`report_record` from a
broker's ``LocalBrokerData``, :func:`unload_record` from an ``Unload`` (the modular leader's
``do_load_shedding``) or an ``UnloadDecision`` (TransferShedder), :func:`placement_record` from
the leader's choice for an unowned bundle, :func:`split_record` from a ``SplitDecision``; the
load manager fills the decision numbers it computed. Rows are rare (a report per broker every
few seconds, decisions per shedding cycle), so :class:`LoadBalancerTraceWriter` keeps them in
memory and writes a row group per ``flush_every`` rows, with the same ``detach``/``write`` split
as the dispatch trace's writer, so the broker's trace sink can move the write off its event loop.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from emubroker.loadbalance.model.data import weighted_max_usage
from emubroker.loadbalance.model.extensible_data import Unload, UnloadDecision
from emubroker.traceschema.loadbalance import (
    EVENTS,
    FIELD_NAMES,
    LOADBALANCE,
    SCHEMA_VERSION,
    LoadBalancerTraceRecord,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.model.data import LocalBrokerData
    from emubroker.loadbalance.strategies.split import SplitDecision

__all__ = [
    "EVENTS",
    "FIELD_NAMES",
    "SCHEMA_VERSION",
    "LoadBalancerTraceRecord",
    "LoadBalancerTraceWriter",
    "TraceSink",
    "placement_record",
    "report_record",
    "split_record",
    "trace_schema",
    "unload_record",
]


class TraceSink(Protocol):
    """Where the trace rows go (``LoadBalancerTraceSink``, or a test's list)."""

    def append(self, record: LoadBalancerTraceRecord) -> None:
        """Buffer one row."""
        ...


def trace_schema() -> pa.Schema:
    """The Arrow schema of a trace file (pyarrow is loaded on first use)."""
    return LOADBALANCE.arrow_schema()


def report_record(
    broker: str,
    report: LocalBrokerData,
    conf: BrokerConfig,
    *,
    wall_ns: int,
    monotonic: float,
    reason: str = "",
    load_manager: str = "modular",
) -> LoadBalancerTraceRecord:
    """The row of a load report a broker wrote (``reason``: why it wrote it, spec §2.3)."""
    return LoadBalancerTraceRecord(
        wall_ns=wall_ns,
        monotonic=monotonic,
        broker=broker,
        event="report",
        load_manager=load_manager,
        source_broker=broker,
        reason=reason,
        cpu_percent=report.cpu.percent_usage(),
        memory_percent=report.memory.percent_usage(),
        direct_memory_percent=report.direct_memory.percent_usage(),
        bandwidth_in_percent=report.bandwidth_in.percent_usage(),
        bandwidth_out_percent=report.bandwidth_out.percent_usage(),
        weighted_max_usage=weighted_max_usage(report, conf),
        msg_rate_in=report.msg_rate_in,
        msg_rate_out=report.msg_rate_out,
        msg_throughput_in=report.msg_throughput_in,
        msg_throughput_out=report.msg_throughput_out,
        num_bundles=report.num_bundles,
        num_topics=report.num_topics,
        num_consumers=report.num_consumers,
        num_producers=report.num_producers,
    )


def unload_record(
    decision: Unload | UnloadDecision,
    *,
    event: str,
    wall_ns: int,
    monotonic: float,
    broker: str,
    **numbers: Any,
) -> LoadBalancerTraceRecord:
    """A ``shed`` or ``unload`` row of a modular ``Unload`` or an extensible ``UnloadDecision``.

    Args:
        decision: What was decided; an ``UnloadDecision`` brings its label and reason.
        event: ``shed`` (the leader decided) or ``unload`` (the owner closed the bundle).
        wall_ns: Wall clock of the row (``Clock.wall_ns()``).
        monotonic: The writer's monotonic clock (``Clock.now()``).
        broker: Who writes the row (the leader, or the owner that unloaded).
        numbers: The other fields (``strategy``, ``cycle``, ``broker_load``, ...).
    """
    extra: dict[str, Any] = {}
    if isinstance(decision, UnloadDecision):
        unload = decision.unload
        extra = {
            "label": str(decision.label),
            "reason": str(decision.reason),
            "load_manager": "extensible",
        }
    else:
        unload = decision
    return LoadBalancerTraceRecord(
        wall_ns=wall_ns,
        monotonic=monotonic,
        broker=broker,
        event=event,
        bundle=unload.service_unit,
        source_broker=unload.source_broker,
        dest_broker=unload.dest_broker or "",
        **{**extra, **numbers},
    )


def placement_record(
    bundle: str,
    chosen: str,
    *,
    wall_ns: int,
    monotonic: float,
    broker: str,
    **numbers: Any,
) -> LoadBalancerTraceRecord:
    """A ``placement`` row: the leader gave the unowned ``bundle`` to ``chosen``."""
    return LoadBalancerTraceRecord(
        wall_ns=wall_ns,
        monotonic=monotonic,
        broker=broker,
        event="placement",
        bundle=bundle,
        dest_broker=chosen,
        **numbers,
    )


def split_record(
    decision: SplitDecision,
    children: list[str],
    *,
    wall_ns: int,
    monotonic: float,
    broker: str,
    **numbers: Any,
) -> LoadBalancerTraceRecord:
    """A ``split`` row: the leader's ``SplitDecision`` and the bundles it made."""
    return LoadBalancerTraceRecord(
        wall_ns=wall_ns,
        monotonic=monotonic,
        broker=broker,
        event="split",
        bundle=decision.bundle,
        source_broker=decision.broker,
        split_children=",".join(children),
        split_unload=decision.unload,
        **numbers,
    )


class LoadBalancerTraceWriter:
    """Buffers :class:`LoadBalancerTraceRecord` rows; writes ``<prefix>-00001.parquet``.

    The file is written as ``.<name>.inprogress`` and renamed by :meth:`close`, so readers
    (Spark skips dot-files) never see half of it.

    Args:
        directory: Where the file goes (created if missing).
        prefix: File name prefix, e.g. ``loadbalance-<broker id>``.
        flush_every: Rows per row group; :meth:`append` writes when this many are buffered
            (with ``auto_flush``).
        auto_flush: Whether :meth:`append` writes itself; an async owner turns it off and
            runs :meth:`write` on :meth:`detach`'s columns in a worker thread.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        prefix: str = "loadbalance",
        flush_every: int = 1024,
        auto_flush: bool = True,
    ) -> None:
        if flush_every < 1:
            raise ValueError("flush_every must be positive")
        self._directory = Path(directory)
        self._directory.mkdir(parents=True, exist_ok=True)
        self.path = self._directory / f"{prefix}-00001.parquet"
        self._in_progress = self._directory / f".{self.path.name}.inprogress"
        self._flush_every = flush_every
        self._auto_flush = auto_flush
        self._rows: list[tuple[Any, ...]] = []
        self._writer: Any = None  # pq.ParquetWriter, opened with the first rows
        self._closed = False
        self.records_written = 0

    @property
    def buffered(self) -> int:
        return len(self._rows)

    def append(self, record: LoadBalancerTraceRecord) -> None:
        """Buffer one row; writes a row group when ``flush_every`` are buffered.

        Raises:
            RuntimeError: The writer is closed.
        """
        if self._closed:
            raise RuntimeError("trace writer is closed")
        self._rows.append(msgspec.structs.astuple(record))
        if self._auto_flush and len(self._rows) >= self._flush_every:
            self.flush()

    def detach(self) -> list[tuple[Any, ...]] | None:
        """Take the buffered rows (call on the appending thread), or None if there are none."""
        rows, self._rows = self._rows, []
        return rows or None

    def write(self, rows: list[tuple[Any, ...]]) -> None:
        """Write detached rows as one row group (safe in a worker thread, one at a time)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = trace_schema()
        columns = list(zip(*rows, strict=True))
        batch = pa.RecordBatch.from_arrays(
            [pa.array(column, type=f.type) for column, f in zip(columns, schema, strict=True)],
            schema=schema,
        )
        if self._writer is None:
            self._writer = pq.ParquetWriter(self._in_progress, schema, compression="zstd")
        self._writer.write_batch(batch)
        self.records_written += batch.num_rows

    def flush(self) -> None:
        """Write everything buffered (nothing when empty)."""
        rows = self.detach()
        if rows is not None:
            self.write(rows)

    def close(self) -> Path | None:
        """Flush, complete the file and return it (None if no row was ever written)."""
        if self._closed:
            return self.path if self.records_written else None
        self.flush()
        self._closed = True
        if self._writer is None:
            return None
        self._writer.close()
        self._in_progress.rename(self.path)
        return self.path
