"""A broker's load-balancer trace file: rows buffered on the event loop, Parquet in a thread.

Turned on by ``emubrokerLoadBalancerTraceDir`` (ours; docs/load-balancer-trace.md). The broker's
load reporter appends a ``report`` row per report it writes; the leader's rows (``shed``,
``placement``, ``split``) and the owner's ``unload`` rows go through the same sink. Rows are rare,
so they are written a row group per ``flush_every`` rows and, when the broker stops, all that is
left, in a worker thread (shielded from the cancellation that stops the broker).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from emubroker.loadbalance.trace.records import LoadBalancerTraceWriter

if TYPE_CHECKING:
    import os
    from collections.abc import Callable

    from anyio.abc import TaskStatus

    from emubroker.loadbalance.trace.records import LoadBalancerTraceRecord

__all__ = ["LoadBalancerTraceSink"]


class LoadBalancerTraceSink:
    """Owns one broker's :class:`~emubroker.loadbalance.trace.records.LoadBalancerTraceWriter`.

    Args:
        directory: Where the Parquet file goes (created if missing).
        broker_id: The broker; its file is ``loadbalance-<broker id>-00001.parquet``.
        flush_every: Rows per row group.
        in_thread: Write in a worker thread (the default); a virtual-time run writes on the
            loop (see ``DispatchTraceSink``).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        broker_id: str,
        flush_every: int = 1024,
        in_thread: bool = True,
    ) -> None:
        self._in_thread = in_thread
        prefix = "loadbalance-" + re.sub(r"[^A-Za-z0-9_.-]", "_", broker_id)
        self.writer = LoadBalancerTraceWriter(
            directory, prefix=prefix, flush_every=flush_every, auto_flush=False
        )
        self._flush_every = flush_every
        self._row_group_ready = anyio.Event()
        self._stopped = False

    def append(self, record: LoadBalancerTraceRecord) -> None:
        """Buffer one row (no I/O here); rows after the broker stopped are dropped."""
        if self._stopped:
            return
        self.writer.append(record)
        if self.writer.buffered >= self._flush_every:
            self._row_group_ready.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Write row groups off the loop until cancelled; then write the rest and close."""
        task_status.started()
        try:
            while True:
                await self._row_group_ready.wait()
                self._row_group_ready = anyio.Event()
                rows = self.writer.detach()
                if rows is not None:
                    await self._call(self.writer.write, rows)
        finally:
            self._stopped = True
            with anyio.CancelScope(shield=True):
                await self._call(self.writer.close)

    async def _call(self, function: Callable[..., object], *args: Any) -> None:
        if self._in_thread:
            await anyio.to_thread.run_sync(function, *args)
        else:
            function(*args)
