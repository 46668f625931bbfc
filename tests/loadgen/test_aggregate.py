from __future__ import annotations

import io
from array import array

import pytest

from loadgen.aggregate import OMB_WINDOW, Aggregator, GroupInfo
from loadgen.messages import GroupTick, Tick
from loadgen.stats import buckets_of, histogram_of


def group_tick(role: str, group: str, messages: int, latency_us: int) -> GroupTick:
    histogram = buckets_of(array("q", [latency_us] * messages)) if messages else None
    return GroupTick(
        role=role,
        group=group,
        messages=messages,
        payload_bytes=messages * 100,
        errors=0,
        histogram=histogram,
        delay_histogram=None,
        reconnections=0,
    )


def make(workers: int = 2, warmup: float = 0.0):
    rows = []
    groups = {
        ("produce", "in"): GroupInfo("produce", "in", "t"),
        ("consume", "out"): GroupInfo("consume", "out", "t", "s"),
    }
    logs = (io.StringIO(), io.StringIO())
    aggregator = Aggregator(
        "r",
        groups,
        workers=workers,
        start_second=100,
        warmup=warmup,
        phase_at=lambda offset: "a" if offset < 5 else "b",
        write_rows=rows.extend,
        hlogs=logs,
    )
    return aggregator, rows, logs


def test_a_second_closes_when_every_worker_has_reported_past_it() -> None:
    aggregator, rows, _ = make()
    aggregator.add(Tick(worker=0, second=100, groups=[group_tick("produce", "in", 10, 2000)]))
    assert rows == []
    aggregator.add(Tick(worker=1, second=100, groups=[group_tick("consume", "out", 7, 5000)]))
    assert [(r.second, r.role, r.messages) for r in rows] == [
        (100, "consume", 7),
        (100, "produce", 10),
    ]
    consume = rows[0]
    assert consume.backlog == 3
    assert consume.latency_p50_us == pytest.approx(5000.0, rel=1e-3)  # 3 significant digits
    assert consume.subscription == "s"
    assert consume.phase == "a"


def test_totals_windows_and_logs() -> None:
    aggregator, rows, logs = make(workers=1, warmup=2)
    for second in range(100, 100 + OMB_WINDOW + 2):
        aggregator.add(
            Tick(
                worker=0,
                second=second,
                groups=[
                    group_tick("produce", "in", 100, 1000 * (second - 99)),
                    group_tick("consume", "out", 100, 3000),
                ],
            )
        )
    aggregator.close_all()
    totals = aggregator.totals()
    assert totals.seconds == OMB_WINDOW  # the first two seconds are the warm-up
    assert totals.produced == 100 * OMB_WINDOW
    assert totals.publish is not None
    assert totals.publish.max >= 12_000
    assert [p.seconds for p in aggregator.omb_points] == [OMB_WINDOW, 2]
    assert aggregator.omb_points[0].produced == 100 * OMB_WINDOW
    assert len(rows) == 2 * (OMB_WINDOW + 2)
    publish_log = logs[0].getvalue().splitlines()
    assert publish_log[0].startswith("#[Histogram log format version")
    assert sum(1 for line in publish_log if line[:1].isdigit()) == OMB_WINDOW + 2


def test_late_ticks_land_in_the_next_open_second() -> None:
    aggregator, rows, _ = make(workers=1)
    aggregator.add(Tick(worker=0, second=101, groups=[group_tick("produce", "in", 1, 10)]))
    aggregator.add(Tick(worker=0, second=100, groups=[group_tick("produce", "in", 2, 10)]))
    aggregator.close_all()
    assert [(r.second, r.messages) for r in rows] == [(101, 1), (102, 2)]
    assert aggregator.cumulative[("produce", "in")] == 3


def test_folding_values_to_buckets_records_what_recording_each_would() -> None:
    import random

    from loadgen.stats import new_histogram, summarize

    rng = random.Random(4)
    values = array("q", (int(rng.lognormvariate(8, 2)) for _ in range(20_000)))
    direct = new_histogram()
    for value in values:
        direct.record_value(min(max(value, 1), 3_600_000_000))
    folded = histogram_of(values)
    assert folded.get_total_count() == direct.get_total_count()
    assert folded.encode() == direct.encode()
    assert summarize(buckets_of(values)) == summarize(buckets_of(values[::-1]))


def test_rates_are_over_the_time_until_each_role_ended_not_the_drain_seconds() -> None:
    from loadgen.report import final_lines, omb_result

    aggregator, _rows, _ = make(workers=1, warmup=1)
    # 2,000 msg/s for 8 s, then a drain second with the last few receipts and deliveries
    for second in range(100, 109):
        count = 2000 if second < 108 else 3
        aggregator.add(
            Tick(
                worker=0,
                second=second,
                groups=[
                    group_tick("produce", "in", count, 900),
                    group_tick("consume", "out", count, 2000),
                ],
            )
        )
    aggregator.close_all(produce_end=8.0, consume_end=8.5)  # consumers caught up at 8.5 s
    totals = aggregator.totals()
    assert (totals.seconds, totals.produce_seconds, totals.consume_seconds) == (8, 7.0, 7.5)
    header, produced, received, *_ = final_lines(totals, produce=True, consume=True)
    assert header == "Aggregated after the warm-up (produced over 7.0 s, received over 7.5 s):"
    assert produced.startswith(
        "  Throughput produced: 14,003 msg --- 2,000.4 msg/s --- 1.600 Mbit/s --- failure 0.0"
    )
    assert received.startswith(
        "  Throughput received: 14,003 msg --- 1,867.1 msg/s --- 1.494 Mbit/s --- backlog 0 msg"
    )
    omb = omb_result(
        aggregator,
        workload="w",
        driver="d",
        message_size=100,
        topics=1,
        partitions=0,
        producers_per_topic=1,
        consumers_per_topic=1,
    )
    assert omb["publishRate"] == [16_003 / 8.0]  # one point: the warm-up, no drain second
    assert omb["consumeRate"] == [16_003 / 8.5]
