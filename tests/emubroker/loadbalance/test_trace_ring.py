"""The ring of recent load-balancer rows each broker keeps for the dashboard."""

from __future__ import annotations

from emubroker.loadbalance.trace.records import LoadBalancerTraceRecord
from emubroker.loadbalance.trace.ring import TraceRing


def _row(n: int) -> LoadBalancerTraceRecord:
    return LoadBalancerTraceRecord(wall_ns=n, monotonic=float(n), broker="b", event="shed")


class _Sink:
    def __init__(self) -> None:
        self.rows: list[LoadBalancerTraceRecord] = []

    def append(self, record: LoadBalancerTraceRecord) -> None:
        self.rows.append(record)


def test_the_ring_keeps_the_newest_rows_and_forwards_every_one() -> None:
    sink = _Sink()
    ring = TraceRing(sink, capacity=3)
    for n in range(5):
        ring.append(_row(n))
    assert [row.wall_ns for row in ring.rows()] == [2, 3, 4]
    assert [row.wall_ns for row in sink.rows] == [0, 1, 2, 3, 4]


def test_the_ring_works_without_a_trace_file() -> None:
    ring = TraceRing()
    ring.append(_row(1))
    assert [row.wall_ns for row in ring.rows()] == [1]
