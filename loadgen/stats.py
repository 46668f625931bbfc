"""Latency histograms: HdrHistogram (the `hdrhistogram` package), as pulsar-perf and OMB keep them.

Latencies are recorded in microseconds from the *intended* send time. The hot path only appends
integers to an `array`; once a second the worker turns the array into a histogram
(`histogram_of`: one `record_value` per distinct value, not per message) and sends it to the
parent encoded (HdrHistogram's compressed V2 format), where histograms add up per group, per
interval and per run.
"""

from __future__ import annotations

import bisect
import itertools
import sys
from array import array
from collections import Counter
from typing import Final

import msgspec
from hdrh.histogram import HdrHistogram

__all__ = [
    "HIGHEST_US",
    "HistogramEncoder",
    "LatencySummary",
    "decode_histogram",
    "histogram_of",
    "new_histogram",
    "summarize",
]

HIGHEST_US: Final = 3_600_000_000
"""An hour: anything slower is recorded as an hour (a run that slow has bigger problems)."""

SIGNIFICANT_DIGITS: Final = 3


def new_histogram() -> HdrHistogram:
    return HdrHistogram(1, HIGHEST_US, SIGNIFICANT_DIGITS)


_SUB_BUCKET_BITS: Final = 11
"""Bits of resolution the histogram keeps: 3 significant digits need 2 * 10**3 sub-buckets."""


def histogram_of(latencies_us: array[int]) -> HdrHistogram:
    """A histogram of the values (clamped to [1 µs, an hour]).

    Values are counted first, then folded to their histogram bucket (dropping the bits below
    its resolution, which is what recording them would do), so `record_value`, a pure-Python
    call of several µs, runs once per bucket rather than once per distinct value.
    """
    histogram = new_histogram()
    for value, count in _buckets(latencies_us).items():
        histogram.record_value(value, count)
    return histogram


class HistogramEncoder:
    """Encodes arrays of latencies as `histogram_of(...).encode()` would, with one histogram.

    A fresh histogram allocates and zeroes its whole counts array (tens of thousands of
    counters); a worker encodes a histogram per group every second, so it keeps one and
    takes back the counts it recorded after each encoding.
    """

    def __init__(self) -> None:
        self._histogram = new_histogram()

    def encode(self, latencies_us: array[int]) -> bytes:
        histogram = self._histogram
        buckets = _buckets(latencies_us)
        for value, count in buckets.items():
            histogram.record_value(value, count)
        try:
            encoded: bytes = histogram.encode()
        finally:
            for value, count in buckets.items():
                histogram.record_value(value, -count)  # the total count goes back to 0 too
            histogram.min_value = sys.maxsize  # as a new histogram's
            histogram.max_value = 0
        return encoded


def _buckets(latencies_us: array[int]) -> dict[int, int]:
    """Counts by the lowest value of their histogram bucket."""
    buckets: dict[int, int] = {}
    for value, count in Counter(latencies_us).items():
        value = min(max(value, 1), HIGHEST_US)
        shift = value.bit_length() - _SUB_BUCKET_BITS
        if shift > 0:
            value = value >> shift << shift
        buckets[value] = buckets.get(value, 0) + count
    return buckets


def decode_histogram(encoded: bytes) -> HdrHistogram:
    return HdrHistogram.decode(encoded)


class LatencySummary(msgspec.Struct, frozen=True):
    """Percentiles of a histogram, in microseconds."""

    count: int
    mean: float
    p50: float
    p75: float
    p95: float
    p99: float
    p999: float
    p9999: float
    max: float


def summarize(histogram: HdrHistogram | None) -> LatencySummary | None:
    """The histogram's percentiles; None when it is empty (or there is none).

    The values `HdrHistogram`'s own `get_mean_value` and `get_value_at_percentile` give, found
    over its recorded buckets only: those methods step through every bucket in pure Python
    (tens of thousands of steps, several calls each), which cost the runner tens of ms for
    every group's every second, on the cores the workers and the broker need.
    """
    count = histogram.get_total_count() if histogram is not None else 0
    if histogram is None or not count:
        return None
    # Only the buckets between the lowest and the highest recorded values can hold counts: a
    # second of a few messages looks at a handful of buckets, not all of them.
    first = histogram._counts_index_for(histogram.get_min_value())
    last = histogram._counts_index_for(histogram.get_max_value())
    counts = histogram.counts
    recorded = list(itertools.compress(range(first, last + 1), counts[first : last + 1]))
    value_at = histogram.get_value_from_index
    lowest = histogram.get_lowest_equivalent_value
    highest = histogram.get_highest_equivalent_value
    total = 0
    for index in recorded:  # as get_mean_value: each bucket at its median equivalent value
        top = highest(value_at(index))
        low = lowest(top)
        total += counts[index] * (low + ((highest(top) - low + 1) >> 1))
    cumulative = list(itertools.accumulate(counts[index] for index in recorded))

    def at(percentile: float) -> float:
        # as get_value_at_percentile: the first bucket whose cumulative count reaches it
        place = bisect.bisect_left(cumulative, histogram.get_target_count_at_percentile(percentile))
        if place == len(recorded):
            return 0.0
        value = value_at(recorded[place])
        return float(highest(value) if percentile else lowest(value))

    return LatencySummary(
        count=count,
        mean=float(total) / count,
        p50=at(50),
        p75=at(75),
        p95=at(95),
        p99=at(99),
        p999=at(99.9),
        p9999=at(99.99),
        max=float(histogram.get_max_value()),
    )
