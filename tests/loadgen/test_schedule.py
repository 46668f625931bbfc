from __future__ import annotations

import itertools
import math
import random

import pytest

from loadgen.schedule import Segment, producer_seed, segment_arrivals, total_duration


def arrivals(segment: Segment, seed: int = 1, *, poisson: bool = False) -> list[float]:
    return list(segment_arrivals(segment, random.Random(seed), poisson=poisson))


def test_constant_rate_is_evenly_spaced_inside_the_segment() -> None:
    times = arrivals(Segment(start=10.0, duration=2.0, rate_from=5.0, rate_to=5.0))
    assert len(times) == 10
    assert all(10.0 <= t < 12.0 for t in times)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps == pytest.approx([0.2] * 9)


def test_linear_ramp_sends_the_integral_of_the_rate() -> None:
    # 0 -> 1000 msg/s over 10 s: 5000 messages, a quarter of them in the first half.
    times = arrivals(Segment(start=0.0, duration=10.0, rate_from=0.0, rate_to=1000.0))
    assert len(times) in (4999, 5000)
    first_half = sum(1 for t in times if t < 5.0)
    assert first_half == pytest.approx(1250, abs=1)
    assert times == sorted(times)


def test_ramp_down_to_zero_stops_at_the_integral() -> None:
    times = arrivals(Segment(start=0.0, duration=4.0, rate_from=100.0, rate_to=0.0))
    assert len(times) in (199, 200)
    assert times[-1] < 4.0


def test_poisson_arrivals_average_the_rate() -> None:
    times = arrivals(Segment(0.0, 100.0, 50.0, 50.0), seed=7, poisson=True)
    assert len(times) == pytest.approx(5000, rel=0.05)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert max(gaps) > 3 * min(gaps)  # not evenly spaced


def test_same_seed_same_times_and_producers_differ() -> None:
    segment = Segment(0.0, 1.0, 100.0, 100.0)
    assert arrivals(segment, 3) == arrivals(segment, 3)
    a = arrivals(segment, producer_seed(42, 0))
    b = arrivals(segment, producer_seed(42, 1))
    assert a != b


def test_infinite_constant_segment_keeps_going() -> None:
    generator = segment_arrivals(Segment(0.0, math.inf, 1000.0, 1000.0), random.Random(0))
    times = [next(generator) for _ in range(5000)]
    assert times[-1] == pytest.approx(5.0, abs=0.002)


def test_unlimited_and_negative_segments_are_refused() -> None:
    with pytest.raises(ValueError, match="unlimited"):
        next(segment_arrivals(Segment(0.0, 1.0, 0.0, 0.0), random.Random(0)))
    with pytest.raises(ValueError, match="negative"):
        next(segment_arrivals(Segment(0.0, 1.0, -1.0, 5.0), random.Random(0)))


def test_total_duration() -> None:
    assert total_duration([Segment(0.0, 2.0, 1.0, 1.0), Segment(2.0, 3.0, 1.0, 1.0)]) == 5.0
    assert total_duration([]) == 0.0
