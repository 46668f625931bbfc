"""`summarize` gives what HdrHistogram's own (slow) methods give, value for value."""

from __future__ import annotations

import random
from array import array

import pytest
from hdrh.histogram import HdrHistogram

from loadgen.stats import (
    HIGHEST_US,
    HistogramScratch,
    LatencySummary,
    add_buckets,
    buckets_of,
    histogram_from,
    histogram_of,
    new_histogram,
    summarize,
)


def by_hdrh(histogram: HdrHistogram) -> LatencySummary:
    at = histogram.get_value_at_percentile
    return LatencySummary(
        count=histogram.get_total_count(),
        mean=float(histogram.get_mean_value()),
        p50=float(at(50)),
        p75=float(at(75)),
        p95=float(at(95)),
        p99=float(at(99)),
        p999=float(at(99.9)),
        p9999=float(at(99.99)),
        max=float(histogram.get_max_value()),
    )


@pytest.mark.parametrize("seed", range(12))
def test_summaries_of_buckets_match_hdrhistogram_recording_every_value(seed: int) -> None:
    rng = random.Random(seed)
    scale = [10, 1_000, 100_000, 100_000_000, HIGHEST_US][seed % 5]
    seconds = [
        array(
            "q",
            [int(rng.expovariate(1 / scale)) for _ in range([1, 2, 50, 5_000][seed % 4])],
        )
        for _ in range(1 + seed % 3)  # what the runner sums: several ticks' buckets added up
    ]
    direct = new_histogram()
    total = None
    for values in seconds:
        for value in values:
            direct.record_value(min(max(value, 1), HIGHEST_US))
        total = add_buckets(total, buckets_of(values))
    assert summarize(total) == by_hdrh(direct)
    assert histogram_from(total or {}).encode() == direct.encode()


def test_empty_buckets_have_no_summary() -> None:
    assert summarize({}) is None
    assert summarize(None) is None


def test_adding_buckets_leaves_the_added_ones_alone() -> None:
    first = {1: 2, 4096: 1}
    total = add_buckets(None, first)
    add_buckets(total, {1: 1, 8: 3})
    assert total == {1: 3, 4096: 1, 8: 3}
    assert first == {1: 2, 4096: 1}


def test_the_scratch_histogram_holds_each_buckets_as_a_fresh_histogram_would() -> None:
    rng = random.Random(7)
    scratch = HistogramScratch()
    arrays = [
        array(
            "q", [rng.choice([0, 5, 900, 70_000, 4_000_000_000]) for _ in range(rng.randint(1, 50))]
        )
        for _ in range(20)
    ]
    arrays.append(array("q", [3]))  # after larger values: a leftover maximum would show here
    for values in arrays:
        with scratch.holding(buckets_of(values)) as histogram:
            assert histogram.encode() == histogram_of(values).encode()
            assert histogram.get_max_value() == histogram_of(values).get_max_value()


@pytest.mark.parametrize(
    "values", [[7], [5_000], [2_500_000, 2_500_001, 2_500_100], [HIGHEST_US * 2], [0, -3]]
)
def test_a_single_bucket_summarizes_as_hdrhistogram_does(values: list[int]) -> None:
    # A quiet group's second: one bucket, often wider than one microsecond.
    direct = new_histogram()
    for value in values:
        direct.record_value(min(max(value, 1), HIGHEST_US))
    buckets = buckets_of(array("q", values))
    assert len(buckets) == 1
    assert summarize(buckets) == by_hdrh(direct)
