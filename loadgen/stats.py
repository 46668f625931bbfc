"""Latency histograms: HdrHistogram (the `hdrhistogram` package), as pulsar-perf and OMB keep them.

Latencies are recorded in microseconds from the *intended* send time. The hot path only appends
integers to an `array`; once a second the worker turns the array into a histogram
(`histogram_of`: one `record_value` per distinct value, not per message) and sends it to the
parent encoded (HdrHistogram's compressed V2 format), where histograms add up per group, per
interval and per run.
"""

from __future__ import annotations

from array import array
from collections import Counter
from typing import Final

import msgspec
from hdrh.histogram import HdrHistogram

__all__ = [
    "HIGHEST_US",
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
    buckets: dict[int, int] = {}
    for value, count in Counter(latencies_us).items():
        value = min(max(value, 1), HIGHEST_US)
        shift = value.bit_length() - _SUB_BUCKET_BITS
        if shift > 0:
            value = value >> shift << shift
        buckets[value] = buckets.get(value, 0) + count
    histogram = new_histogram()
    for value, count in buckets.items():
        histogram.record_value(value, count)
    return histogram


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


def summarize(histogram: HdrHistogram) -> LatencySummary | None:
    """The histogram's percentiles; None when it is empty."""
    count = histogram.get_total_count()
    if not count:
        return None
    return LatencySummary(
        count=count,
        mean=float(histogram.get_mean_value()),
        p50=float(histogram.get_value_at_percentile(50)),
        p75=float(histogram.get_value_at_percentile(75)),
        p95=float(histogram.get_value_at_percentile(95)),
        p99=float(histogram.get_value_at_percentile(99)),
        p999=float(histogram.get_value_at_percentile(99.9)),
        p9999=float(histogram.get_value_at_percentile(99.99)),
        max=float(histogram.get_max_value()),
    )
