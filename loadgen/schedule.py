"""Intended send times: pure functions of the phases and a seed (STYLE.md §3, layer 1).

A producer's timeline is a list of `Segment`s (one per phase): a rate that is constant or ramps
linearly from `rate_from` to `rate_to` over the segment. Arrivals are placed where the
cumulative rate, `Λ(t) = r0·t + (r1 - r0)·t² / (2·D)`, crosses the next integer (evenly spaced
at a constant rate) or the next point of a unit-rate Poisson process (exponential gaps in `Λ`,
the `poisson` arrival mode). Every producer gets its own random phase offset from the seed, so
the producers of a group do not send in lockstep.

The producer loop sleeps until each arrival and measures latency from it, not from when it
actually sent (open loop, no coordinated omission, as the OpenMessaging Benchmark does). A
segment whose rate is `UNLIMITED` has no arrivals: its producer sends as fast as it can.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from typing import Final

import msgspec

__all__ = ["UNLIMITED", "Segment", "producer_seed", "segment_arrivals", "total_duration"]

UNLIMITED: Final = 0.0
"""A constant rate of 0 means "as fast as possible", as `pulsar-perf -r 0` does."""


class Segment(msgspec.Struct, frozen=True):
    """One phase of one producer's timeline.

    Attributes:
        start: seconds after the run's start.
        duration: seconds; `math.inf` for a run without an end.
        rate_from: msg/s at the start.
        rate_to: msg/s at the end (equal to `rate_from` for a constant rate).
        phase: the phase's name, for the traces.
    """

    start: float
    duration: float
    rate_from: float
    rate_to: float
    phase: str = ""

    @property
    def end(self) -> float:
        return self.start + self.duration

    @property
    def unlimited(self) -> bool:
        return self.rate_from == UNLIMITED and self.rate_to == UNLIMITED


def total_duration(segments: list[Segment]) -> float:
    """When the last segment ends (0 for none)."""
    return max((segment.end for segment in segments), default=0.0)


def producer_seed(seed: int, producer_index: int) -> int:
    """The seed of one producer's arrivals: independent of how many producers there are."""
    return (seed * 1_000_003 + producer_index * 7_919 + 1) & 0xFFFF_FFFF_FFFF


def _time_at(segment: Segment, cumulative: float) -> float:
    """The offset into `segment` where `Λ` reaches `cumulative` (math.inf if it never does)."""
    r0 = segment.rate_from
    if segment.rate_to == r0 or math.isinf(segment.duration):
        return cumulative / r0 if r0 > 0 else math.inf
    a = (segment.rate_to - r0) / (2.0 * segment.duration)
    discriminant = r0 * r0 + 4.0 * a * cumulative
    if discriminant < 0:  # a ramp down that ends before reaching this count
        return math.inf
    # 2L / (b + sqrt(b² + 4aL)): the root of a·t² + b·t - L = 0 without cancellation.
    denominator = r0 + math.sqrt(discriminant)
    return 2.0 * cumulative / denominator if denominator > 0 else math.inf


def segment_arrivals(
    segment: Segment, rng: random.Random, *, poisson: bool = False
) -> Iterator[float]:
    """Intended send times (seconds after the run's start) inside `segment`, in order.

    Args:
        segment: a paced segment (not `unlimited`).
        rng: the producer's generator (`random.Random(producer_seed(...))`); it carries the
            producer's state from one segment to the next.
        poisson: exponential gaps instead of even spacing.

    Raises:
        ValueError: the segment is unlimited or has a negative rate.
    """
    if segment.unlimited:
        raise ValueError("an unlimited segment has no arrivals")
    if segment.rate_from < 0 or segment.rate_to < 0:
        raise ValueError("rates must not be negative")
    cumulative = rng.expovariate(1.0) if poisson else rng.random()
    while True:
        offset = _time_at(segment, cumulative)
        if offset >= segment.duration:
            return
        yield segment.start + offset
        cumulative += rng.expovariate(1.0) if poisson else 1.0
