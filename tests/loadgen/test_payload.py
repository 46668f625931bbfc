from __future__ import annotations

import random
from collections import Counter

import pytest

from loadgen.payload import HEADER, MAGIC, NO_KEY, key_chooser, run_tag, sampled, sampling_threshold
from loadgen.scenario import PAYLOAD_HEADER_SIZE, Keys


def test_header_is_the_documented_40_bytes() -> None:
    assert HEADER.size == PAYLOAD_HEADER_SIZE == 40
    packed = HEADER.pack(MAGIC, 1, 0, run_tag("r"), 7, NO_KEY, 12, 100, 200)
    assert packed[:2] == b"LG"
    assert HEADER.unpack(packed) == (MAGIC, 1, 0, run_tag("r"), 7, NO_KEY, 12, 100, 200)


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.1, 0.5, 1.0])
def test_sampling_keeps_the_fraction_and_depends_only_on_the_identity(fraction: float) -> None:
    threshold = sampling_threshold(fraction)
    kept = [(p, s) for p in range(4) for s in range(25_000) if sampled(p, s, threshold)]
    assert len(kept) == pytest.approx(100_000 * fraction, abs=100_000 * 0.01 + 1)
    again = [(p, s) for p in range(4) for s in range(25_000) if sampled(p, s, threshold)]
    assert kept == again


def test_key_choosers() -> None:
    rng = random.Random(1)
    assert key_chooser(Keys(), rng)() == NO_KEY
    round_robin = key_chooser(Keys(distribution="round_robin", count=3), rng)
    assert [round_robin() for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    uniform = Counter(key_chooser(Keys(distribution="random", count=4), rng)() for _ in range(8000))
    assert sorted(uniform) == [0, 1, 2, 3]
    assert min(uniform.values()) > 1800
    zipf = Counter(
        key_chooser(Keys(distribution="zipf", count=10, s=1.0), rng)() for _ in range(20000)
    )
    # P(k) ∝ 1/(k+1): key 0 about twice key 1 and ten times key 9.
    assert zipf[0] / zipf[1] == pytest.approx(2.0, rel=0.15)
    assert zipf[0] / zipf[9] == pytest.approx(10.0, rel=0.3)
