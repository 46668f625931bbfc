"""Every analysis on small traces whose answers are known exactly (planted anomalies)."""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest

from tests.support.traces import RunBuilder, topic_name

pytestmark = [
    pytest.mark.spark,
    # pyspark leaves its result sockets to the garbage collector (see conftest.py).
    pytest.mark.filterwarnings("ignore:Exception ignored in. <socket.socket"),
]


def analyse(spark: Any, builder: RunBuilder, *jobs: str) -> dict[str, Any]:
    from loadgen.analysis.inputs import load_run
    from loadgen.analysis.jobs import run_jobs

    result = run_jobs(spark, load_run(spark, str(builder.write())), only=jobs)
    return result.tables


def rows(table: Any) -> list[dict[str, Any]]:
    return table.dicts()


def test_throughput_backlog_and_exact_latency_percentiles(spark, tmp_path) -> None:
    run = RunBuilder(tmp_path / "run", phases=[("a", 1.0), ("b", 2.0)])
    run.subscription("l", "ls", "Exclusive")
    for i in range(100):  # second 0, phase a: publish latencies 1, 2, ..., 100 ms
        run.send("l", i, 0.001 * i, latency=0.001 * (i + 1))
        run.receive("l", "ls", "c-0", i, 0.5 if i < 60 else 1.5, sent_at=0.001 * i)
    for i in range(100, 110):  # phase b: 5 ms, delivered in second 2
        run.send("l", i, 1.5, latency=0.005)
        run.receive("l", "ls", "c-0", i, 2.5, sent_at=1.5)
    tables = analyse(spark, run, "throughput", "latency")

    produced = {
        r["second"]: r["messages"] for r in rows(tables["throughput"]) if r["role"] == "produce"
    }
    consumed = {
        r["second"]: r["messages"] for r in rows(tables["throughput"]) if r["role"] == "consume"
    }
    assert produced == {0: 100, 1: 10}
    assert consumed == {0: 60, 1: 40, 2: 10}
    backlog = {r["second"]: r["backlog"] for r in rows(tables["backlog"])}
    assert backlog == {0: 40, 1: 10, 2: 0}

    by_phase = {(r["kind"], r["phase"]): r for r in rows(tables["latency_by_phase"])}
    phase_a = by_phase[("publish", "a")]
    assert phase_a["count"] == 100
    assert phase_a["p50_ms"] == pytest.approx(50.5)  # between the 50th and 51st of 1..100 ms
    assert phase_a["p99_ms"] == pytest.approx(99.01)
    assert phase_a["max_ms"] == pytest.approx(100.0)
    assert phase_a["mean_ms"] == pytest.approx(50.5)
    assert by_phase[("publish", "b")]["p99_ms"] == pytest.approx(5.0)
    assert by_phase[("publish", "all")]["count"] == 110
    assert [r["phase"] for r in rows(tables["latency_by_phase"]) if r["kind"] == "publish"] == [
        "a",
        "b",
        "all",
    ]
    e2e_second_2 = [
        r
        for r in rows(tables["latency_over_time"])
        if r["kind"] == "end_to_end" and r["second"] == 2
    ]
    assert e2e_second_2[0]["p50_ms"] == pytest.approx(1000.0)  # sent at 1.5, delivered at 2.5


def limited(period: int, charged: int, **fields: Any) -> dict[str, Any]:
    return {
        "topic": topic_name("t"),
        "subscription": "s",
        "entries": charged,
        "messages": charged,
        "bytes": 100 * charged,
        "topic_msg_rate": 100,
        "topic_msg_available": 100,
        "topic_msg_charged": charged,
        "topic_period": period,
        **fields,
    }


def test_throttling_finds_a_planted_over_delivery_and_its_carry_over(spark, tmp_path) -> None:
    run = RunBuilder(tmp_path / "run")
    run.subscription("t", "s", "Exclusive")
    run.receive("t", "s", "c", 0, 0.01)
    for i in range(10):  # period 0: exactly the limit, 100 messages
        run.dispatched(0.05 + 0.09 * i, **limited(0, 10))
    for i in range(15):  # period 1: 150 messages, 50 over
        run.dispatched(1.05 + 0.06 * i, **limited(1, 10))
    # period 2: the limiter is in debt; the read is refused, the dispatcher retries 1 s later
    run.dispatched(2.05, **limited(2, 0, event="throttled", throttled_by="topic"))
    for i in range(10):  # period 3: the limit again
        run.dispatched(3.05 + 0.09 * i, **limited(3, 10))
    tables = analyse(spark, run, "throttling")

    periods = {r["period"]: r for r in rows(tables["throttling_periods"])}
    assert [periods[p]["delivered_msgs"] for p in range(4)] == [100, 150, 0, 100]
    assert [periods[p]["over_msgs"] for p in range(4)] == [0, 50, 0, 0]
    assert [periods[p]["carry_over"] for p in range(4)] == [False, False, True, False]
    assert periods[2]["throttled_reads"] == 1
    (summary,) = rows(tables["throttling_summary"])
    assert (summary["level"], summary["topic"], summary["subscription"]) == (
        "topic",
        topic_name("t"),
        "",
    )
    assert summary["over_periods"] == 1
    assert summary["max_over_msgs"] == 50
    assert summary["max_over_ratio"] == pytest.approx(1.5)
    assert summary["carry_over_periods"] == 1
    assert summary["throttled_s"] == pytest.approx(1.0)
    assert summary["period_s"] == 1.0
    assert summary["delivered_msgs"] == 350
    assert summary["mean_rate_msgs"] == pytest.approx(87.5)  # 350 messages over 4 periods
    assert summary["rate_vs_limit"] == pytest.approx(0.875)


def test_a_rate_change_restarts_the_period_count_in_an_epoch_of_its_own(spark, tmp_path) -> None:
    run = RunBuilder(tmp_path / "run")
    run.receive("t", "s", "c", 0, 0.01)
    run.dispatched(0.1, **limited(0, 100))
    run.dispatched(1.1, **limited(1, 100))
    run.dispatched(1.5, **limited(0, 80, topic_msg_rate=50))  # new limit: 30 over it
    tables = analyse(spark, run, "throttling")
    periods = [
        (r["epoch"], r["period"], r["limit_msgs"], r["over_msgs"])
        for r in rows(tables["throttling_periods"])
    ]
    assert periods == [(0, 0, 100, 0), (0, 1, 100, 0), (1, 0, 50, 30)]


def test_correctness_ties_a_planted_loss_duplicate_and_reordering_to_events(
    spark, tmp_path
) -> None:
    run = RunBuilder(tmp_path / "run", phases=[("steady", 2.0)])
    run.subscription("c", "s", "Failover")
    run.subscription("c", "sh", "Shared")
    run.event(0.3, "UnloadTopic", "c", topic="c")
    run.event(0.65, "KillBroker", "broker-0", broker=0)
    for i in range(10):
        run.send("c", i, 0.1 * (i + 1))
    for i in range(10):
        at = {7: 0.96, 8: 0.95}.get(i, 0.1 * (i + 1) + 0.01)
        if i != 5:  # planted loss: acknowledged at 0.601, never delivered
            run.receive("c", "s", "c-0", i, at)
        run.receive("c", "sh", "sh-0", 9 - i, 1.5 + 0.01 * i)  # Shared: any order is fine
    run.receive("c", "s", "c-0", 3, 0.45)  # planted duplicate, after the unload
    tables = analyse(spark, run, "correctness")

    by_sub = {r["subscription"]: r for r in rows(tables["correctness"])}
    assert {
        k: by_sub["s"][k]
        for k in ("acked", "received", "deliveries", "lost", "duplicates", "out_of_order")
    } == {
        "acked": 10,
        "received": 9,
        "deliveries": 10,
        "lost": 1,
        "duplicates": 1,
        "out_of_order": 1,
    }
    assert (by_sub["sh"]["lost"], by_sub["sh"]["duplicates"], by_sub["sh"]["out_of_order"]) == (
        0,
        0,
        0,
    )
    tied = {(r["kind"], r["event"], r["first_sequence_id"]) for r in rows(tables["anomalies"])}
    assert tied == {
        ("lost", "KillBroker broker-0", 5),  # the first event after its receipt
        ("duplicate", "UnloadTopic c", 3),  # the last event before the repeat delivery
        ("out_of_order", "KillBroker broker-0", 7),
    }
    examples = {(r["kind"], r["sequence_id"]) for r in rows(tables["anomaly_examples"])}
    assert examples == {("lost", 5), ("duplicate", 3), ("out_of_order", 7)}


def test_delivery_gaps_measure_a_planted_two_second_gap(spark, tmp_path) -> None:
    run = RunBuilder(tmp_path / "run")
    h_hash = zlib.crc32(topic_name("h").encode())
    run.event(5.0, "UnloadTopic", "g", topic="g")
    for i in range(1, 50):  # g-0 every 0.1 s until 4.9 ...
        run.receive("g", "gs", "g-0", i, 0.1 * i)
    for i in range(69, 80):  # ... and again from 6.9: a 2 s gap
        run.receive("g", "gs", "g-0", i, 0.1 * i)
    for i in range(1, 80):  # h-0 is not touched by the unload of g
        run.receive("h", "hs", "h-0", i, 0.1 * i + 0.05)
    # A load-manager unload of the bundle that holds h (and, by its hash, not g).
    bundle = f"public/default/0x{h_hash:08x}_0x{h_hash + 1:08x}"
    run.balanced(
        7.52, "shed", bundle=bundle, source_broker="b1", dest_broker="b2", reason="Overloaded"
    )
    tables = analyse(spark, run, "delivery_gaps")

    gaps = {(r["event"], r["consumer"]): r for r in rows(tables["delivery_gaps"])}
    assert set(gaps) == {("UnloadTopic g", "g-0"), (f"unload {bundle}", "h-0")}
    planted = gaps[("UnloadTopic g", "g-0")]
    assert planted["gap_s"] == pytest.approx(2.0)
    assert (planted["last_before_s"], planted["first_after_s"]) == pytest.approx((4.9, 6.9))
    assert gaps[(f"unload {bundle}", "h-0")]["gap_s"] == pytest.approx(0.1)


def test_load_balancing_timeline_and_time_to_converge(spark, tmp_path) -> None:
    run = RunBuilder(tmp_path / "run", phases=[("skew", 20.0)])
    for at, b1, b2 in ((0.0, 0.9, 0.2), (5.0, 0.8, 0.3), (10.0, 0.55, 0.5), (15.0, 0.5, 0.52)):
        run.balanced(
            at, "report", broker="b1", source_broker="b1", weighted_max_usage=b1, num_bundles=4
        )
        run.balanced(
            at + 0.1,
            "report",
            broker="b2",
            source_broker="b2",
            weighted_max_usage=b2,
            num_bundles=2,
        )
    run.balanced(
        6.0,
        "shed",
        strategy="ThresholdShedder",
        bundle="public/default/0x00000000_0x40000000",
        source_broker="b1",
        dest_broker="b2",
        reason="Overloaded",
        broker_load=0.85,
        cluster_load=0.55,
        threshold=0.65,
        to_offload=1_000_000.0,
        offload_unit="bytes/s",
    )
    run.balanced(
        6.5,
        "unload",
        broker="b1",
        bundle="public/default/0x00000000_0x40000000",
        source_broker="b1",
        dest_broker="b2",
        reason="shedding",
    )
    run.balanced(
        8.0,
        "split",
        bundle="public/default/0x40000000_0x80000000",
        source_broker="b1",
        reason="msg_rate",
        split_children="a,b",
        strategy="range_equally_divide",
    )
    run.receive("t", "s", "c", 0, 0.01)
    tables = analyse(spark, run, "load_balancing")

    usage = [
        (r["t_s"], r["broker"], r["weighted_max_usage"]) for r in rows(tables["lb_broker_usage"])
    ]
    assert usage[:2] == [(0.0, "b1", 0.9), (pytest.approx(0.1), "b2", 0.2)]
    timeline = [(r["event"], r["reason"]) for r in rows(tables["lb_timeline"])]
    assert timeline == [("shed", "Overloaded"), ("unload", "shedding"), ("split", "msg_rate")]
    (episode,) = rows(tables["lb_convergence"])
    # Both brokers reported: b1 0.35 above their mean, until 0.55 vs 0.5.
    assert episode["skew_start_s"] == pytest.approx(0.1)
    assert episode["converged_s"] == pytest.approx(10.1)
    assert episode["time_to_converge_s"] == pytest.approx(10.0)
    assert episode["peak_imbalance"] == pytest.approx(0.35)
    assert episode["unloads"] == 1  # the shed decision (the owner's unload row carries it out)
    assert episode["first_unload_after_s"] == pytest.approx(5.9)


def test_fairness_of_shared_and_key_shared_subscriptions(spark, tmp_path) -> None:
    run = RunBuilder(tmp_path / "run")
    run.subscription("f", "fs", "Shared", count=2)
    run.subscription("f", "fk", "Key_Shared", count=2)
    run.subscription("f", "fx", "Exclusive")
    for i in range(40):
        run.receive("f", "fs", "a" if i < 30 else "b", i, 0.01 * i + 0.01)
        run.receive("f", "fx", "x", i, 0.01 * i + 0.01)
        key = "k1" if i % 2 else "k2"
        run.receive("f", "fk", "x" if key == "k1" else "y", i, 0.01 * i + 0.01, key=key)
    run.receive("f", "fk", "y", 41, 0.5, key="k1")  # k1 reached two consumers
    tables = analyse(spark, run, "fairness")

    summary = {r["subscription"]: r for r in rows(tables["fairness"])}
    assert set(summary) == {"fs", "fk"}  # Exclusive is not a shared subscription
    assert summary["fs"]["jain_index"] == pytest.approx(0.8)  # 40² / (2 · (30² + 10²))
    assert summary["fs"]["max_min_ratio"] == pytest.approx(3.0)
    assert summary["fs"]["keys_on_several_consumers"] is None
    assert summary["fk"]["keys_on_several_consumers"] == 1
    shares = {
        (r["subscription"], r["consumer"]): r["deliveries"]
        for r in rows(tables["fairness_consumers"])
    }
    assert shares[("fs", "a")] == 30
    assert shares[("fk", "y")] == 21


def test_mean_rates_span_the_messages_not_their_one_second_buckets(spark, tmp_path) -> None:
    from loadgen.analysis.headline import headline
    from loadgen.analysis.inputs import load_run
    from loadgen.analysis.jobs import run_jobs

    run = RunBuilder(tmp_path / "run", phases=[("warm", 2.0), ("steady", 6.0)])
    run.subscription("r", "s", "Exclusive")
    # 6 s at 200 msg/s (receipts 1 ms after each send: in 7 one-second buckets), after a
    # 2 s warm-up at 100 msg/s.
    times = [i / 100 for i in range(199)] + [2 + i / 200 for i in range(1200)]
    for i, at in enumerate(times):
        run.send("r", i, at, latency=0.001)
        run.receive("r", "s", "c-0", i, at + 0.002, sent_at=at)
    path = run.write()
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["scenario"]["warmup"] = 2.0
    (path / "manifest.json").write_text(json.dumps(manifest))
    result = run_jobs(spark, load_run(spark, str(path)), only=("throughput",))

    rates = {(r["role"], r["topic"]): r for r in result.tables["rates"].dicts()}
    assert set(rates) == {
        ("produce", topic_name("r")),
        ("produce", "all"),
        ("consume", topic_name("r")),
        ("consume", "all"),
    }
    produce = rates[("produce", "all")]
    assert produce["messages"] == 1200  # those after the warm-up
    assert (produce["first_s"], produce["last_s"]) == pytest.approx((2.001, 7.996))
    assert produce["msg_rate"] == pytest.approx(200.0)
    assert rates[("consume", "all")]["msg_rate"] == pytest.approx(200.0)
    assert produce["byte_rate"] == pytest.approx(200.0 * 100)
    numbers = headline(result)
    assert numbers["produce_rate"] == pytest.approx(200.0)  # not 1,400 / 8 buckets
    assert numbers["consume_rate"] == pytest.approx(200.0)
