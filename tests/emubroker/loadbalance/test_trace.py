"""The load-balancer trace: rows from the load-balancing data model, written as Parquet."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from emubroker.config import BrokerConfig
from emubroker.loadbalance.model.data import LocalBrokerData
from emubroker.loadbalance.model.extensible_data import Label, Reason, Unload, UnloadDecision
from emubroker.loadbalance.model.usage import ResourceUsage
from emubroker.loadbalance.strategies.modular_manager import SplitDecision
from emubroker.loadbalance.trace.records import (
    FIELD_NAMES,
    LoadBalancerTraceRecord,
    LoadBalancerTraceWriter,
    placement_record,
    report_record,
    split_record,
    trace_schema,
    unload_record,
)

BUNDLE = "public/default/0x00000000_0x40000000"


def test_a_report_row_carries_the_usages_and_the_weighted_usage_strategies_see() -> None:
    report = LocalBrokerData(
        cpu=ResourceUsage(30, 100),
        bandwidth_in=ResourceUsage(500, 1000),
        bandwidth_out=ResourceUsage(100, 1000),
        memory=ResourceUsage(900, 1000),  # not in the weighted usage by default
        msg_rate_in=10.0,
        msg_throughput_out=2048.0,
        num_bundles=3,
        num_topics=7,
    )
    row = report_record(
        "b1:8080", report, BrokerConfig(), wall_ns=5, monotonic=1.5, reason="change"
    )
    assert (row.event, row.broker, row.source_broker, row.reason) == (
        "report",
        "b1:8080",
        "b1:8080",
        "change",
    )
    assert row.cpu_percent == pytest.approx(30.000001907348633)  # float32, as Pulsar
    assert row.memory_percent == pytest.approx(90.0)
    assert row.weighted_max_usage == pytest.approx(0.5)  # bandwidth in, 50 %
    assert (row.msg_rate_in, row.msg_throughput_out, row.num_bundles, row.num_topics) == (
        10.0,
        2048.0,
        3,
        7,
    )
    assert row.bundle == ""  # not a decision
    assert row.broker_load == -1.0


def test_shed_rows_of_modular_and_extensible_decisions() -> None:
    modular = unload_record(
        Unload("b1", BUNDLE, "b2"),
        event="shed",
        wall_ns=1,
        monotonic=0.0,
        broker="b1",
        strategy="ThresholdShedder",
        reason="Overloaded",
        broker_load=0.9,
        cluster_load=0.5,
        threshold=0.6,
    )
    assert (modular.bundle, modular.source_broker, modular.dest_broker) == (BUNDLE, "b1", "b2")
    assert (modular.load_manager, modular.reason, modular.label) == ("modular", "Overloaded", "")
    assert (modular.broker_load, modular.threshold) == (0.9, 0.6)
    extensible = unload_record(
        UnloadDecision(Unload("b3", BUNDLE), Label.Success, Reason.Underloaded),
        event="shed",
        wall_ns=1,
        monotonic=0.0,
        broker="b1",
    )
    assert (extensible.load_manager, extensible.label, extensible.reason) == (
        "extensible",
        "Success",
        "Underloaded",
    )
    assert extensible.dest_broker == ""  # no destination chosen


def test_a_split_row_lists_the_children() -> None:
    row = split_record(
        SplitDecision(BUNDLE, "b1", unload=True),
        ["public/default/0x00000000_0x1fffffff", "public/default/0x1fffffff_0x40000000"],
        wall_ns=1,
        monotonic=0.0,
        broker="b1",
        strategy="range_equally_divide",
        reason="msg_rate",
    )
    assert (
        row.split_children
        == "public/default/0x00000000_0x1fffffff,public/default/0x1fffffff_0x40000000"
    )
    assert row.split_unload
    assert row.source_broker == "b1"


def test_placement_rows_round_trip_through_parquet(tmp_path) -> None:
    rows = [
        placement_record(
            BUNDLE,
            "b2",
            wall_ns=7,
            monotonic=1.5,
            broker="b1",
            strategy="LeastLongTermMessageRate",
            reason="strategy",
            candidates=3,
            broker_load=float("inf"),  # every candidate overloaded: all tie at +inf
        ),
        placement_record(
            BUNDLE,
            "b3",
            wall_ns=8,
            monotonic=2.0,
            broker="b1",
            strategy="destinationBroker",
            reason="affinity",
        ),
    ]
    assert (rows[0].event, rows[0].dest_broker, rows[0].source_broker) == ("placement", "b2", "")
    writer = LoadBalancerTraceWriter(tmp_path, prefix="loadbalance-b1")
    for row in rows:
        writer.append(row)
    path = writer.close()
    assert path is not None
    assert [LoadBalancerTraceRecord(**r) for r in pq.read_table(path).to_pylist()] == rows


def test_the_writer_writes_one_file_with_the_versioned_schema(tmp_path) -> None:
    writer = LoadBalancerTraceWriter(tmp_path, prefix="loadbalance-b1", flush_every=2)
    rows = [
        LoadBalancerTraceRecord(
            wall_ns=i, monotonic=float(i), broker="b1", event="report", weighted_max_usage=i / 10
        )
        for i in range(5)
    ]
    for row in rows:
        writer.append(row)
    assert writer.records_written == 4  # two row groups written
    assert writer.buffered == 1
    assert [p.name for p in tmp_path.iterdir()] == [".loadbalance-b1-00001.parquet.inprogress"]
    path = writer.close()
    assert path == tmp_path / "loadbalance-b1-00001.parquet"
    table = pq.read_table(path)
    assert table.schema.metadata[b"emubroker.trace"] == b"loadbalance"
    assert table.schema.metadata[b"emubroker.schema_version"] == b"1"
    assert table.schema.names == list(FIELD_NAMES)
    assert not any(field.nullable for field in trace_schema())
    assert [LoadBalancerTraceRecord(**r) for r in table.to_pylist()] == rows
    with pytest.raises(RuntimeError, match="closed"):
        writer.append(rows[0])


def test_a_writer_without_rows_leaves_no_file(tmp_path) -> None:
    assert LoadBalancerTraceWriter(tmp_path).close() is None
    assert list(tmp_path.iterdir()) == []
