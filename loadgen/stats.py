"""Latency histograms: HdrHistogram's buckets (the `hdrhistogram` package), as pulsar-perf and OMB.

Latencies are recorded in microseconds from the *intended* send time. The hot path only appends
integers to an `array`; once a second the worker folds the array into *buckets*
(`buckets_of`): a dict from the lowest value of an HdrHistogram bucket (3 significant digits,
1 µs to an hour) to its count, the histogram's non-zero counters only. That is what a tick
carries and what the runner adds up per group, per interval and per run: a second of a few
messages is a few dict entries, where a whole HdrHistogram is ~23,000 counters to allocate,
encode, decode and add. `summarize` gives HdrHistogram's own percentiles from the buckets, and
`histogram_from` builds the HdrHistogram itself where one is written out (interval logs, OMB's
quantile maps).
"""

from __future__ import annotations

import bisect
import itertools
import sys
from array import array
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Final, TypeAlias

import msgspec
from hdrh.histogram import HdrHistogram

__all__ = [
    "HIGHEST_US",
    "Buckets",
    "HistogramScratch",
    "LatencySummary",
    "add_buckets",
    "buckets_of",
    "histogram_from",
    "histogram_of",
    "new_histogram",
    "summarize",
]

HIGHEST_US: Final = 3_600_000_000
"""An hour: anything slower is recorded as an hour (a run that slow has bigger problems)."""

SIGNIFICANT_DIGITS: Final = 3

Buckets: TypeAlias = dict[int, int]
"""Counts by the lowest value of their HdrHistogram bucket (only the buckets that hold some)."""


def new_histogram() -> HdrHistogram:
    return HdrHistogram(1, HIGHEST_US, SIGNIFICANT_DIGITS)


_SUB_BUCKET_BITS: Final = 11
"""Bits of resolution the histogram keeps: 3 significant digits need 2 * 10**3 sub-buckets."""

_SHAPE: Final = new_histogram()
"""Answers questions about bucket boundaries (never records anything)."""


_COUNTER_FROM: Final = 64
"""Values from which `buckets_of` counts them with `Counter` (its C loop) rather than its own."""


def buckets_of(latencies_us: array[int]) -> Buckets:
    """The values' buckets (clamped to [1 µs, an hour]).

    Values are counted first, then folded to their bucket's lowest value (dropping the bits
    below its resolution, which is what recording them in an HdrHistogram would do).
    """
    buckets: Buckets = {}
    if len(latencies_us) > _COUNTER_FROM:
        counted: Mapping[int, int] = Counter(latencies_us)
    else:
        # Most group-seconds of a run hold a few values: `Counter()` costs several times what
        # counting them here does (its `update` asks whether the input is a Mapping, an ABC).
        counted = {}
        get = counted.get
        for value in latencies_us:
            counted[value] = get(value, 0) + 1
    for value, count in counted.items():
        value = min(max(value, 1), HIGHEST_US)
        shift = value.bit_length() - _SUB_BUCKET_BITS
        if shift > 0:
            value = value >> shift << shift
        buckets[value] = buckets.get(value, 0) + count
    return buckets


def add_buckets(into: Buckets | None, more: Mapping[int, int]) -> Buckets:
    """`into` plus `more` (`into` is updated; None: a new dict, `more` is left alone)."""
    if into is None:
        return dict(more)
    get = into.get
    for value, count in more.items():
        into[value] = get(value, 0) + count
    return into


def histogram_from(buckets: Mapping[int, int]) -> HdrHistogram:
    """An HdrHistogram holding the buckets' counts (one `record_value` per bucket)."""
    histogram = new_histogram()
    for value, count in buckets.items():
        histogram.record_value(value, count)
    return histogram


def histogram_of(latencies_us: array[int]) -> HdrHistogram:
    """An HdrHistogram of the values: `histogram_from(buckets_of(values))`."""
    return histogram_from(buckets_of(latencies_us))


class HistogramScratch:
    """One HdrHistogram lent out holding some buckets, then emptied again.

    A fresh histogram allocates and zeroes its whole counts array (tens of thousands of
    counters); the runner writes two per second to the interval logs, so it keeps one.
    """

    def __init__(self) -> None:
        self._histogram = new_histogram()

    @contextmanager
    def holding(self, buckets: Mapping[int, int]) -> Iterator[HdrHistogram]:
        histogram = self._histogram
        for value, count in buckets.items():
            histogram.record_value(value, count)
        try:
            yield histogram
        finally:
            for value, count in buckets.items():
                histogram.record_value(value, -count)  # the total count goes back to 0 too
            histogram.min_value = sys.maxsize  # as a new histogram's
            histogram.max_value = 0


_HIGHEST: dict[int, int] = {}  # a bucket's lowest value -> its highest equivalent value
_HIGHEST_KEPT: Final = 1 << 16  # more than an hour's range holds buckets (~23k)


def _highest_equivalent(value: int) -> int:
    """`HdrHistogram.get_highest_equivalent_value`, remembered per bucket (at most ~23k)."""
    top = _HIGHEST.get(value)
    if top is None:
        top = _SHAPE.get_highest_equivalent_value(value)
        if len(_HIGHEST) < _HIGHEST_KEPT:
            _HIGHEST[value] = top
    return top


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


def summarize(buckets: Mapping[int, int] | None) -> LatencySummary | None:
    """The buckets' percentiles, as HdrHistogram's own methods give them; None when empty.

    `get_mean_value` and `get_value_at_percentile` step through every one of a histogram's
    buckets in pure Python (tens of thousands of steps); the same values come from the
    recorded buckets alone.
    """
    if not buckets:
        return None
    recorded = sorted(value for value, count in buckets.items() if count)
    if not recorded:
        return None
    counts = [buckets[value] for value in recorded]
    count = sum(counts)
    highest = _highest_equivalent
    if len(recorded) == 1:
        # One bucket (a quiet group's second): every percentile, and the max, is its highest
        # equivalent value, as `at` below gives for each.
        value = recorded[0]
        top = highest(value)
        mean = float(count * (value + ((top - value + 1) >> 1))) / count
        high = float(top)
        return LatencySummary(count, mean, high, high, high, high, high, high, high)
    total = 0
    for value, times in zip(recorded, counts, strict=True):
        # as get_mean_value: each bucket at its median equivalent value (a bucket's lowest
        # value is its key)
        total += times * (value + ((highest(value) - value + 1) >> 1))
    cumulative = list(itertools.accumulate(counts))

    def at(percentile: float) -> float:
        # as get_value_at_percentile: the first bucket whose cumulative count reaches it
        target = max(int(min(percentile, 100.0) * count / 100 + 0.5), 1)
        place = bisect.bisect_left(cumulative, target)
        if place == len(recorded):
            return 0.0
        value = recorded[place]
        return float(highest(value) if percentile else value)

    return LatencySummary(
        count=count,
        mean=float(total) / count,
        p50=at(50),
        p75=at(75),
        p95=at(95),
        p99=at(99),
        p999=at(99.9),
        p9999=at(99.99),
        max=float(highest(recorded[-1])),
    )
