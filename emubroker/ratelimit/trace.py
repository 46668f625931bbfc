"""The dispatch trace: one record per dispatch, written to Parquet for the Spark analysis.

The schema (``emubroker.traceschema.dispatch``, documented field by field in
``docs/dispatch-trace.md``) only grows by appending fields with defaults (STYLE.md rule 6), and
each file carries its version both as the ``schema_version`` column and in the Arrow schema
metadata (``emubroker.schema_version``).

The hot path is ``writer.append_row(dispatch_row(chain, ...))`` right after ``chain.charge``: the
row is a plain tuple in field order (no struct is built); :func:`dispatch_record` gives the same
data as a :class:`DispatchTraceRecord` for code that wants the typed value.

:class:`DispatchTraceWriter` is built to stay off the hot path: appending only pushes each
field onto an in-memory column list (no I/O, no Arrow work); every ``flush_every`` records the
columns become one Arrow record batch and one Parquet row group. A file is rolled after
``rows_per_file`` rows. Files are written as hidden ``.<name>.inprogress`` and renamed to
``<prefix>-NNNNN.parquet`` when complete, so readers (Spark skips dot-files) never see half a
file. An async owner that must not block its loop on the write can turn ``auto_flush`` off, call
:meth:`~DispatchTraceWriter.detach` on the loop and run :meth:`~DispatchTraceWriter.write` in a
worker thread.
"""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, Required, TypedDict, Unpack

import msgspec

from emubroker.ratelimit.limiter import LimiterLevel
from emubroker.ratelimit.quotas import CLASSIC_FACTORY
from emubroker.ratelimit.readsize import ThrottleChain
from emubroker.traceschema.dispatch import (
    DISPATCH,
    FIELD_NAMES,
    SCHEMA_VERSION,
    DispatchTraceRecord,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "FIELD_NAMES",
    "SCHEMA_VERSION",
    "DispatchFields",
    "DispatchTraceRecord",
    "DispatchTraceWriter",
    "dispatch_record",
    "dispatch_row",
    "trace_schema",
]


def trace_schema() -> pa.Schema:
    """The Arrow schema of a trace file: :class:`DispatchTraceRecord`'s fields, in order."""
    return DISPATCH.arrow_schema()


def dispatch_row(
    chain: ThrottleChain,
    *,
    now: float,
    wall_ns: int,
    broker: str,
    topic: str,
    subscription: str,
    consumer: str = "",
    consumer_id: int = -1,
    entries: int = 0,
    messages: int = 0,
    size: int = 0,
    replay: bool = False,
    cursor_active: bool = False,
    throttled_by: LimiterLevel | None = None,
) -> tuple[Any, ...]:
    """The trace row of the chain's last ``plan_read`` (+ ``charge``), in field order.

    Call it right after ``charge`` for a dispatch, or right after a ``plan_read`` that returned
    a backoff, passing ``throttled_by=plan.throttled_by``. Feed it to
    :meth:`DispatchTraceWriter.append_row` (the cheap path) or use :func:`dispatch_record`.
    """
    config = chain.config
    throttled = throttled_by is not None
    row: list[Any] = [
        SCHEMA_VERSION,
        wall_ns,
        now,
        broker,
        topic,
        subscription,
        consumer,
        consumer_id,
        "throttled" if throttled else "dispatch",
        "precise" if config.preciseDispatcherFlowControl else "normal",
        "entries" if config.dispatchThrottlingOnBatchMessageEnabled else "messages",
        "classic"
        if config.dispatchRateLimiterFactoryClassName == CLASSIC_FACTORY
        else "token-bucket",
        replay,
        chain.gate_applies(cursor_active),
        str(throttled_by) if throttled_by is not None else "",
        0 if throttled else entries,
        0 if throttled else messages,
        0 if throttled else size,
    ]
    available_msg, available_byte = chain.available_msg, chain.available_byte
    charged_msg, charged_byte = chain.charged_msg, chain.charged_byte
    for index, limiter in enumerate(chain.limiters):
        if limiter is None:
            msg_rate = byte_rate = period = -1
        else:
            msg_rate = limiter.rate_on_msg() if limiter.limits_msg else -1
            byte_rate = limiter.rate_on_byte() if limiter.limits_byte else -1
            period = limiter.period_index(now)
        if throttled:
            msg_charged = 0 if msg_rate > 0 else -1
            byte_charged = 0 if byte_rate > 0 else -1
        else:
            msg_charged, byte_charged = charged_msg[index], charged_byte[index]
        row += (
            msg_rate,
            byte_rate,
            available_msg[index],
            available_byte[index],
            msg_charged,
            byte_charged,
            period,
        )
    return tuple(row)


class DispatchFields(TypedDict, total=False):
    """The keyword arguments of :func:`dispatch_row`, for :func:`dispatch_record`."""

    now: Required[float]
    wall_ns: Required[int]
    broker: Required[str]
    topic: Required[str]
    subscription: Required[str]
    consumer: str
    consumer_id: int
    entries: int
    messages: int
    size: int
    replay: bool
    cursor_active: bool
    throttled_by: LimiterLevel | None


def dispatch_record(chain: ThrottleChain, **fields: Unpack[DispatchFields]) -> DispatchTraceRecord:
    """:func:`dispatch_row` as a :class:`DispatchTraceRecord` (same keyword arguments)."""
    row = dispatch_row(chain, **fields)
    return DispatchTraceRecord(**dict(zip(FIELD_NAMES, row, strict=True)))


class DispatchTraceWriter:
    """Buffered, columnar, rolling Parquet writer of :class:`DispatchTraceRecord`.

    Args:
        directory: Where files go (created if missing).
        prefix: File name prefix, e.g. the broker id.
        flush_every: Records per row group; ``append`` flushes when this many are buffered.
        rows_per_file: Start a new file once the current one holds at least this many rows.
        compression: Parquet codec.
        auto_flush: Whether ``append`` writes full buffers itself.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        prefix: str = "dispatch",
        flush_every: int = 65_536,
        rows_per_file: int = 4_194_304,
        compression: str = "zstd",
        auto_flush: bool = True,
    ) -> None:
        if flush_every < 1 or rows_per_file < 1:
            raise ValueError("flush_every and rows_per_file must be positive")
        self._directory = Path(directory)
        self._directory.mkdir(parents=True, exist_ok=True)
        self._prefix = prefix
        self._flush_every = flush_every
        self._rows_per_file = rows_per_file
        self._compression = compression
        self._auto_flush = auto_flush
        self._columns: list[list[Any]] = [[] for _ in FIELD_NAMES]
        self._buffered = 0
        self._writer: Any = None  # pq.ParquetWriter of the file in progress
        self._in_progress: Path | None = None
        self._rows_in_file = 0
        self._sequence = 0
        self._closed = False
        self.files: list[Path] = []  # completed files, in order
        self.records_written = 0

    @property
    def buffered(self) -> int:
        """Records appended and not yet written."""
        return self._buffered

    def append(self, record: DispatchTraceRecord) -> None:
        """Buffer one record; writes a row group when ``flush_every`` are buffered.

        Raises:
            RuntimeError: The writer is closed.
        """
        if self._closed:
            raise RuntimeError("trace writer is closed")
        # map() drives the unbound list.append from C: no Python-level loop per field.
        deque(map(list.append, self._columns, msgspec.structs.astuple(record)), maxlen=0)
        self._buffered += 1
        if self._auto_flush and self._buffered >= self._flush_every:
            self.flush()

    def append_row(self, row: tuple[Any, ...]) -> None:
        """Buffer one row given in field order, e.g. from :func:`dispatch_row`.

        Raises:
            RuntimeError: The writer is closed.
        """
        if self._closed:
            raise RuntimeError("trace writer is closed")
        deque(map(list.append, self._columns, row), maxlen=0)
        self._buffered += 1
        if self._auto_flush and self._buffered >= self._flush_every:
            self.flush()

    def detach(self) -> list[list[Any]] | None:
        """Take the buffered columns (cheap; call on the appending thread), or None if empty."""
        if not self._buffered:
            return None
        columns = self._columns
        self._columns = [[] for _ in FIELD_NAMES]
        self._buffered = 0
        return columns

    def write(self, columns: list[list[Any]]) -> None:
        """Write detached columns as one row group, rolling the file if it is full.

        Safe to run in a worker thread while ``append`` goes on, but not concurrently with
        another ``write``/``flush``/``close``.
        """
        import pyarrow as pa  # loaded by trace_schema() already; see there

        schema = trace_schema()
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(column, type=field.type)
                for column, field in zip(columns, schema, strict=True)
            ],
            schema=schema,
        )
        if self._writer is None:
            self._open()
        self._writer.write_batch(batch)
        self._rows_in_file += batch.num_rows
        self.records_written += batch.num_rows
        if self._rows_in_file >= self._rows_per_file:
            self._finish_file()

    def flush(self) -> None:
        """Write everything buffered (no-op when empty)."""
        columns = self.detach()
        if columns is not None:
            self.write(columns)

    def close(self) -> None:
        """Flush and complete the current file; further appends fail."""
        if self._closed:
            return
        self.flush()
        self._finish_file()
        self._closed = True

    def __enter__(self) -> DispatchTraceWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _open(self) -> None:
        self._sequence += 1
        name = f"{self._prefix}-{self._sequence:05d}.parquet"
        self._in_progress = self._directory / f".{name}.inprogress"
        import pyarrow.parquet as pq

        self._writer = pq.ParquetWriter(
            self._in_progress, trace_schema(), compression=self._compression
        )
        self._rows_in_file = 0

    def _finish_file(self) -> None:
        if self._writer is None or self._in_progress is None:
            return
        self._writer.close()
        final = self._in_progress.with_name(self._in_progress.name[1 : -len(".inprogress")])
        self._in_progress.rename(final)
        self.files.append(final)
        self._writer = None
        self._in_progress = None
