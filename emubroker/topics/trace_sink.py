"""The broker's dispatch trace: rows buffered on the event loop, Parquet written in a thread.

Turned on by ``emubrokerDispatchTraceDir`` (ours; docs/dispatch-trace.md). Dispatchers append one
``trace.dispatch_row`` per dispatch (and per throttled read attempt) through
:meth:`DispatchTraceSink.append_row`, which only pushes values onto in-memory column lists. Once
``emubrokerDispatchTraceFlushRecords`` rows are buffered, :meth:`DispatchTraceSink.run` detaches
them on the loop and writes them as one row group in a worker thread, so the loop never blocks on
Arrow or the disk and no record costs a syscall. When the broker stops, ``run`` writes what is
left and completes the file (shielded from the cancellation that stops it).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from emubroker.ratelimit.trace import DispatchTraceWriter

if TYPE_CHECKING:
    import os
    from collections.abc import Callable

    from anyio.abc import TaskStatus

__all__ = ["DispatchTraceSink"]


class DispatchTraceSink:
    """Owns the broker's :class:`~emubroker.ratelimit.trace.DispatchTraceWriter`.

    Args:
        directory: Where the Parquet files go (created if missing).
        broker_id: The ``broker`` column, and (sanitised) the file name prefix.
        flush_every: Rows per row group.
        in_thread: Write in a worker thread (the default). A virtual-time run writes on the
            loop instead: a write in a thread lets the virtual clock jump while it runs, and
            the row groups would then depend on how fast the disk was.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        broker_id: str,
        flush_every: int = 65_536,
        in_thread: bool = True,
    ) -> None:
        self.broker_id = broker_id
        self._in_thread = in_thread
        self._flush_every = flush_every
        prefix = "dispatch-" + re.sub(r"[^A-Za-z0-9_.-]", "_", broker_id)
        self._writer = DispatchTraceWriter(
            directory, prefix=prefix, flush_every=flush_every, auto_flush=False
        )
        self._full = anyio.Event()
        self._closed = False

    @property
    def writer(self) -> DispatchTraceWriter:
        """The writer (``files``, ``records_written``)."""
        return self._writer

    def append_row(self, row: tuple[Any, ...]) -> None:
        """Buffer one row; signals :meth:`run` when a row group is full (no I/O here)."""
        if self._closed:
            return  # a dispatcher's last round while the broker stops
        writer = self._writer
        writer.append_row(row)
        if writer.buffered >= self._flush_every:
            self._full.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Write full row groups off the loop until cancelled; then flush and close the file."""
        writer = self._writer
        task_status.started()
        try:
            while True:
                await self._full.wait()
                self._full = anyio.Event()
                columns = writer.detach()
                if columns is not None:
                    await self._call(writer.write, columns)
        finally:
            self._closed = True
            with anyio.CancelScope(shield=True):
                await self._call(writer.close)

    async def _call(self, function: Callable[..., object], *args: Any) -> None:
        if self._in_thread:
            await anyio.to_thread.run_sync(function, *args)
        else:
            function(*args)
