"""Cheap trace writing: columnar buffers on the hot path, Parquet in a writer thread.

The hot path appends values to plain Python lists (a `ColumnBuffer` per producer or consumer,
one list per varying column, an `array("q")` for an integer column without nulls; what is
constant for the source, such as its topic and name, is not repeated per row). A full buffer
is handed, whole, to the table's `TableWriter`, whose thread turns it into Arrow arrays and
writes row groups: the event loop never waits for a write, and there is no syscall per message.

Files are written as hidden `.<name>.inprogress` and renamed when complete, so Spark (which
skips dot-files) never reads half a file.
"""

from __future__ import annotations

import os
import queue
import threading
from array import array
from collections.abc import Collection, Mapping, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.parquet as pq

from emubroker.traceschema.loadgen import arrow_schema

__all__ = ["DEFAULT_ROW_GROUP_ROWS", "ColumnBuffer", "TableWriter"]

DEFAULT_ROW_GROUP_ROWS: Final = 65_536
"""Rows per Parquet row group: large enough for Spark to scan fast, small enough that a run
of a few thousand messages a second flushes every few seconds."""

_STOP: Final = object()


class ColumnBuffer:
    """Rows of one source (a producer or a consumer): constants once, varying columns as lists.

    Args:
        constants: column -> value, the same for every row of this source.
        columns: the varying columns, in any order; `lists[i]` is column `columns[i]`.
        int64: columns among `columns` that never hold None: kept as `array("q")` rather than
            lists, which the writer hands to Arrow as they are, without a conversion per value.
    """

    __slots__ = ("columns", "constants", "lists")

    def __init__(
        self, constants: Mapping[str, Any], columns: Sequence[str], int64: Collection[str] = ()
    ) -> None:
        self.constants = dict(constants)
        self.columns = tuple(columns)
        self.lists: list[Any] = [array("q") if name in int64 else [] for name in self.columns]

    def __len__(self) -> int:
        return len(self.lists[0])

    def take(self, rows: int | None = None) -> list[Any]:
        """Remove and return the first `rows` rows (all by default), column by column.

        The buffer keeps its list objects (copied out, then cleared in place): hot loops hold
        their bound `append` methods.
        """
        taken = [column[:rows] for column in self.lists]
        for column in self.lists:
            del column[:rows]
        return taken


class TableWriter:
    """Writes one table's rows to `directory/<prefix>-NNNNN.parquet` from a thread of its own.

    Args:
        directory: the table's directory (created if missing).
        table: the table name, a key of `schema.TABLES`.
        prefix: file name prefix, e.g. `w0` for worker 0.
        row_group_rows: rows gathered before a row group is written.
        compression: the Parquet codec.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        table: str,
        *,
        prefix: str,
        row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
        compression: str = "zstd",
    ) -> None:
        self.schema = arrow_schema(table)
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._final = self.directory / f"{prefix}-00001.parquet"
        self._in_progress = self.directory / f".{self._final.name}.inprogress"
        self._row_group_rows = row_group_rows
        self._compression = compression
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._writer: pq.ParquetWriter | None = None
        self._error: BaseException | None = None
        self.rows_written = 0
        self._thread = threading.Thread(target=self._run, name=f"trace-{table}", daemon=True)
        self._thread.start()

    def submit(
        self, constants: Mapping[str, Any], columns: Sequence[str], lists: list[Any]
    ) -> None:
        """Hand rows over to the writer thread (never blocks).

        Raises:
            RuntimeError: an earlier write failed (the thread's error is chained).
        """
        if self._error is not None:
            raise RuntimeError(f"writing {self._final} failed") from self._error
        if lists and lists[0]:
            self._queue.put((dict(constants), tuple(columns), lists))

    def submit_buffer(self, buffer: ColumnBuffer, rows: int | None = None) -> None:
        """Hand over the first `rows` rows of `buffer` (all by default)."""
        if len(buffer):
            self.submit(buffer.constants, buffer.columns, buffer.take(rows))

    def submit_records(self, records: Sequence[Any]) -> None:
        """Hand over whole records (Structs of this table's type), for the small tables."""
        if records:
            names = self.schema.names
            # One getter call per record, and the columns by transposing (a `getattr` per
            # field and record cost the runner ~18 lookups per group and second).
            lists = [list(column) for column in zip(*map(attrgetter(*names), records), strict=True)]
            self.submit({}, names, lists)

    def close(self) -> Path | None:
        """Write what is left, finish the file and stop the thread; the file, if any rows.

        Raises:
            RuntimeError: a write failed.
        """
        self._queue.put(_STOP)
        self._thread.join()
        if self._error is not None:
            raise RuntimeError(f"writing {self._final} failed") from self._error
        return self._final if self.rows_written else None

    # ---- the writer thread ----------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while (item := self._queue.get()) is not _STOP:
                constants, columns, lists = item
                self._pending.append(self._batch(constants, columns, lists))
                self._pending_rows += len(lists[0])
                if self._pending_rows >= self._row_group_rows:
                    self._write_pending()
            self._write_pending()
            if self._writer is not None:
                self._writer.close()
                self._in_progress.rename(self._final)
        except BaseException as exc:  # reported to the owner by submit() and close()
            self._error = exc

    def _batch(
        self, constants: dict[str, Any], columns: tuple[str, ...], lists: list[Any]
    ) -> pa.RecordBatch:
        rows = len(lists[0])
        by_name = dict(zip(columns, lists, strict=True))
        arrays = []
        for field in self.schema:
            if field.name in by_name:
                values = by_name[field.name]
                if isinstance(values, array) and field.type == pa.int64() and values.itemsize == 8:
                    # int64 already: its buffer becomes the column as it is.
                    buffers = [None, pa.py_buffer(values)]
                    arrays.append(pa.Array.from_buffers(pa.int64(), len(values), buffers))
                else:
                    if isinstance(values, array):
                        values = values.tolist()
                    arrays.append(pa.array(values, type=field.type))
            else:
                value = constants[field.name]
                if value is None:
                    arrays.append(pa.nulls(rows, type=field.type))
                else:
                    arrays.append(pa.repeat(pa.scalar(value, type=field.type), rows))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _write_pending(self) -> None:
        if not self._pending:
            return
        table = pa.Table.from_batches(self._pending, schema=self.schema)
        if self._writer is None:
            # Dictionaries for the strings (a run has few topics, names, keys and brokers) and
            # delta encoding for the integers (sequence ids and times climb in small steps):
            # dictionaries over integers that seldom repeat cost time and space for nothing.
            # Measured on a receives table: 0.19 µs and 3.7 bytes a row against 0.47 µs and
            # 21 bytes with the defaults (docs/performance.md).
            self._writer = pq.ParquetWriter(
                self._in_progress,
                self.schema,
                compression=self._compression,
                use_dictionary=[f.name for f in self.schema if f.type == pa.string()],
                column_encoding={
                    f.name: "DELTA_BINARY_PACKED" for f in self.schema if f.type == pa.int64()
                },
            )
        self._writer.write_table(table, row_group_size=max(table.num_rows, 1))
        self.rows_written += table.num_rows
        self._pending = []
        self._pending_rows = 0
