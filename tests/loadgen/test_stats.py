"""`summarize` gives what HdrHistogram's own (slow) methods give, value for value."""

from __future__ import annotations

import random
from array import array

import pytest
from hdrh.histogram import HdrHistogram

from loadgen.stats import (
    HIGHEST_US,
    HistogramEncoder,
    LatencySummary,
    decode_histogram,
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
def test_summaries_match_hdrhistogram_for_recorded_added_and_decoded_histograms(
    seed: int,
) -> None:
    rng = random.Random(seed)
    histogram = new_histogram()
    scale = [10, 1_000, 100_000, 100_000_000, HIGHEST_US][seed % 5]
    for _ in range([1, 2, 50, 5_000][seed % 4]):
        value = min(max(int(rng.expovariate(1 / scale)), 1), HIGHEST_US)
        histogram.record_value(value, rng.choice((1, 1, 7)))
    if seed % 3 == 1:  # what the runner sums: decoded workers' histograms added up
        total = new_histogram()
        total.add(decode_histogram(histogram.encode()))
        histogram = total
    elif seed % 3 == 2:
        histogram = decode_histogram(histogram.encode())
    assert summarize(histogram) == by_hdrh(histogram)


def test_an_empty_histogram_has_no_summary() -> None:
    assert summarize(new_histogram()) is None


def test_a_reused_encoder_encodes_each_array_as_a_fresh_histogram_would() -> None:
    rng = random.Random(7)
    encoder = HistogramEncoder()
    arrays = [
        array(
            "q", [rng.choice([0, 5, 900, 70_000, 4_000_000_000]) for _ in range(rng.randint(1, 50))]
        )
        for _ in range(20)
    ]
    arrays.append(array("q", [3]))  # after larger values: a leftover maximum would show here
    for values in arrays:
        assert encoder.encode(values) == histogram_of(values).encode()
