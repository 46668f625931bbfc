"""The recent load-balancer trace rows of one broker, kept in memory for the dashboard.

Every broker keeps its last :data:`RING_ROWS` rows (reports it wrote; the leader's sheds,
placements and splits) whether or not ``emubrokerLoadBalancerTraceDir`` also writes them to
Parquet, so that the live dashboard (``/dashboard/``, docs/dashboard.md) can show the load
balancer's timeline of a cluster started without traces. The ring forwards each row to the
Parquet sink when there is one.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from emubroker.loadbalance.trace.records import LoadBalancerTraceRecord, TraceSink

__all__ = ["RING_ROWS", "TraceRing"]

RING_ROWS: Final = 512
"""Rows kept: rows are rare (a report per broker every few seconds at most, a few decisions per
shedding minute), so 512 cover many minutes of decisions for a few hundred kilobytes."""


class TraceRing:
    """A bounded ring of :class:`LoadBalancerTraceRecord` rows, forwarding to a sink.

    Args:
        forward: Where every row also goes (the broker's Parquet sink), if anywhere.
        capacity: Rows kept; the oldest go first.
    """

    def __init__(self, forward: TraceSink | None = None, *, capacity: int = RING_ROWS) -> None:
        self._forward = forward
        self._rows: deque[LoadBalancerTraceRecord] = deque(maxlen=capacity)

    def append(self, record: LoadBalancerTraceRecord) -> None:
        """Keep one row (dropping the oldest when full) and forward it."""
        self._rows.append(record)
        if self._forward is not None:
            self._forward.append(record)

    def rows(self) -> list[LoadBalancerTraceRecord]:
        """The rows kept, oldest first."""
        return list(self._rows)
