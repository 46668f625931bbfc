"""Replaying a recorded run: ownership, loads, leader and throttling at a moment of the run."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from emubroker.__main__ import main
from emubroker.dashboard.replay import RunError, load_run
from emubroker.loadbalance.trace.records import LoadBalancerTraceRecord, LoadBalancerTraceWriter
from emubroker.ratelimit.trace import DispatchTraceRecord, DispatchTraceWriter

EPOCH = 1_700_000_000 * 10**9
S = 10**9
B0, B1 = "127.0.0.1:8080", "127.0.0.1:8081"
NS = "public/default"
LOW, HIGH = f"{NS}/0x00000000_0x80000000", f"{NS}/0x80000000_0xffffffff"


def _row(at: float, event: str, **fields: object) -> LoadBalancerTraceRecord:
    return LoadBalancerTraceRecord(
        wall_ns=EPOCH + round(at * S),
        monotonic=at,
        event=event,
        **fields,  # type: ignore[arg-type]
    )


ROWS = [
    _row(0, "report", broker=B0, cpu_percent=10.0, msg_rate_in=5.0),
    _row(0, "report", broker=B1, cpu_percent=20.0),
    _row(0.5, "placement", broker=B0, bundle=LOW, dest_broker=B0, reason="strategy"),
    _row(0.5, "placement", broker=B0, bundle=HIGH, dest_broker=B1, reason="strategy"),
    _row(30, "report", broker=B0, cpu_percent=90.0),
    _row(
        60,
        "shed",
        broker=B0,
        bundle=LOW,
        source_broker=B0,
        dest_broker=B1,
        strategy="ThresholdShedder",
        reason="Overloaded",
        broker_load=0.9,
        threshold=0.5,
    ),
    _row(
        90,
        "split",
        broker=B0,
        bundle=HIGH,
        source_broker=B1,
        split_children=f"{NS}/0x80000000_0xc0000000,{NS}/0xc0000000_0xffffffff",
        reason="msg_rate",
    ),
    _row(100, "report", broker=B1, cpu_percent=50.0),
]


def _run_dir(tmp_path: Path, rows: list[LoadBalancerTraceRecord] = ROWS) -> Path:
    writer = LoadBalancerTraceWriter(tmp_path / "loadbalance", prefix=f"loadbalance-{B0}")
    for row in rows:
        writer.append(row)
    writer.close()
    return tmp_path


def _owners(state: dict[str, object]) -> dict[str, str | None]:
    (namespace,) = state["namespaces"]  # type: ignore[attr-defined]
    return {b["range"]: b["owner"] for b in namespace["bundles"]}


def test_ownership_follows_placements_sheds_and_splits(tmp_path: Path) -> None:
    recording = load_run(_run_dir(tmp_path))
    assert recording.duration == 100
    assert recording.brokers == [B0, B1]
    assert _owners(recording.state_at(1)) == {
        "0x00000000_0x80000000": B0,
        "0x80000000_0xffffffff": B1,
    }
    assert _owners(recording.state_at(59.9))["0x00000000_0x80000000"] == B0
    assert _owners(recording.state_at(60))["0x00000000_0x80000000"] == B1
    assert _owners(recording.state_at(95)) == {
        "0x00000000_0x80000000": B1,
        "0x80000000_0xc0000000": B1,
        "0xc0000000_0xffffffff": B1,
    }


def test_loads_leader_and_decisions_at_a_moment(tmp_path: Path) -> None:
    recording = load_run(_run_dir(tmp_path))
    state = recording.state_at(45)
    loads = {b["id"]: b["load"]["cpu"] for b in state["brokers"]}
    assert loads == {B0: 90.0, B1: 20.0}
    assert [(b["id"], b["leader"]) for b in state["brokers"]] == [(B0, True), (B1, False)]
    assert state["run"]["t"] == 45
    past = [d for d in state["decisions"] if d["at_ms"] <= state["now_ms"]]
    assert [d["event"] for d in past] == ["placement", "placement"]
    shed = recording.state_at(60)["decisions"][2]
    assert (shed["event"], shed["reason"], shed["numbers"]) == (
        "shed",
        "Overloaded",
        {"broker_load": 0.9, "threshold": 0.5},
    )
    assert shed["at_ms"] == (EPOCH + 60 * S) // 10**6
    # Before the first decision nobody is known to lead, and out-of-range times are clamped.
    assert recording.state_at(-5)["leader"] is None
    assert recording.state_at(1e9)["run"]["t"] == 100


def test_a_throttled_subscription_shows_its_limit_and_what_it_dispatched(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    writer = DispatchTraceWriter(run / "dispatch", prefix=B0)
    topic = "persistent://public/default/t-partition-0"
    for second, messages in ((10, 4), (10, 6), (11, 10)):
        writer.append(
            DispatchTraceRecord(
                wall_ns=EPOCH + second * S,
                monotonic=float(second),
                broker=B0,
                topic=topic,
                subscription="s",
                messages=messages,
                subscription_msg_rate=20,
                subscription_period=2,
            )
        )
    writer.close()
    seconds = pa.table(
        {
            "second": [1_700_000_011],
            "role": ["consume"],
            "topic": ["persistent://public/default/t"],
            "subscription": ["s"],
            "messages": [10],
            "bytes": [100],
            "backlog": [3],
        }
    ).replace_schema_metadata({"loadgen.table": "seconds", "loadgen.schema_version": "1"})
    (run / "seconds").mkdir()
    pq.write_table(seconds, run / "seconds" / "runner-00001.parquet")
    (topic_state,) = load_run(run).state_at(11)["topics"]
    assert topic_state["brokers"] == [B0]  # partition 0's bundle, 0x00000000_0x80000000
    (sub,) = topic_state["subscriptions"]
    assert (sub["rateOut"], sub["backlog"], sub["limit"]["msg"]) == (10, 3, 10.0)
    assert sub["history"] == [[1_700_000_010_000, 10], [1_700_000_011_000, 10]]


def test_a_run_without_traces_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(RunError, match="no such run directory"):
        load_run(tmp_path / "missing")
    assert main(["dashboard", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no load-balancer trace (no loadbalance/*.parquet)" in err


def test_a_trace_of_an_unknown_schema_version_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_dir(tmp_path)
    (path,) = (run / "loadbalance").glob("*.parquet")
    table = pq.read_table(path)
    metadata = {**table.schema.metadata, b"emubroker.schema_version": b"7"}
    pq.write_table(table.replace_schema_metadata(metadata), path)
    assert main(["dashboard", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "unknown load-balancer trace schema version 7 (this emubroker reads version 1)" in err


def test_a_port_out_of_range_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["dashboard", str(_run_dir(tmp_path)), "--port", "99999"])
    assert exited.value.code == 2
    assert "argument --port: '99999' is not a port (0-65535)" in capsys.readouterr().err
