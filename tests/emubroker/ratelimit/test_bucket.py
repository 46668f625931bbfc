"""Unit tests of the pure primitives: classic RateLimiter and PIP-322 AsyncTokenBucket."""

from __future__ import annotations

import pytest

from emubroker.ratelimit.bucket import (
    NANOS_PER_SECOND,
    ClassicRateLimiter,
    DynamicRateTokenBucket,
    FinalRateTokenBucket,
    to_nanos,
)

SECOND = NANOS_PER_SECOND


def dispatch_bucket(rate: int, now: float = 0.0, period_s: int = 1) -> FinalRateTokenBucket:
    """The bucket DispatchRateLimiterAsyncTokenBucketImpl builds: resolution = period."""
    period = period_s * SECOND
    return FinalRateTokenBucket(rate, period, now, resolution_ns=period)


class TestClassicRateLimiter:
    def test_carry_over_empties_the_next_two_periods(self) -> None:
        # Spec §1.4: limit 10, 30 consumed in one period -> after renew 1 acquired=20 (0 left),
        # after renew 2 acquired=10 (0 left), after renew 3 all 10 available again.
        limiter = ClassicRateLimiter(10, 1)
        assert limiter.try_acquire(30, now=0.0) is False
        trace = [limiter.available(t) for t in (0.0, 0.5, 1.0, 1.5, 2.0, 2.9, 3.0, 4.0)]
        assert trace == [0, 0, 0, 0, 0, 0, 10, 10]
        assert limiter.acquired == 0

    def test_pulsar_rate_limiter_test_dispatch_rate(self) -> None:
        # RateLimiterTest.testDispatchRate: 100 permits, 300 acquired -> 0 after two periods.
        limiter = ClassicRateLimiter(100, 1)
        limiter.try_acquire(300, now=0.0)
        assert limiter.available(2.0) == 0
        assert limiter.available(3.0) > 0

    def test_schedule_starts_at_first_acquire_not_at_creation_or_reads(self) -> None:
        limiter = ClassicRateLimiter(10, 1)
        assert limiter.available(5.0) == 10  # a read does not start the renewal task
        assert not limiter.started
        limiter.try_acquire(4, now=5.2)
        assert limiter.next_renewal() == pytest.approx(6.2)
        assert limiter.available(6.1) == 6
        assert limiter.available(6.2) == 10  # the renewal at T happens before a read at T

    def test_many_missed_renewals_apply_arithmetically(self) -> None:
        limiter = ClassicRateLimiter(10, 1)
        limiter.try_acquire(1000, now=0.0)
        assert limiter.renewals(50.0) == 50
        assert limiter.acquired == 500
        assert limiter.available(99.5) == 0
        assert limiter.available(100.0) == 10

    def test_dispatch_mode_reports_whether_permits_remain(self) -> None:
        limiter = ClassicRateLimiter(10, 1)
        assert limiter.try_acquire(9, now=0.0) is True
        assert limiter.try_acquire(1, now=0.0) is False  # 10 acquired, none left
        assert limiter.acquired == 10

    def test_non_dispatch_mode_refuses_without_side_effect_and_resets(self) -> None:
        limiter = ClassicRateLimiter(10, 1, dispatch_mode=False)
        assert limiter.try_acquire(6, now=0.0) is True
        assert limiter.try_acquire(5, now=0.1) is False
        assert limiter.acquired == 6
        assert limiter.try_acquire(4, now=0.2) is True
        assert limiter.try_acquire(1, now=0.3) is False
        assert limiter.available(1.0) == 10  # renew sets acquired = 0

    def test_permit_updater_replaces_permits_at_each_renewal_when_positive(self) -> None:
        rate = [25]
        limiter = ClassicRateLimiter(10, 1, permit_updater=lambda: rate[0])
        limiter.try_acquire(1, now=0.0)
        assert limiter.rate == 10  # the initial permits are the configured ones
        assert limiter.available(1.0) == 25
        rate[0] = 0  # not > 0: ignored
        assert limiter.available(2.0) == 25
        assert limiter.rate == 25

    def test_updater_value_used_for_the_later_missed_renewals(self) -> None:
        limiter = ClassicRateLimiter(10, 1, permit_updater=lambda: 100)
        limiter.try_acquire(250, now=0.0)
        # renewal 1 subtracts the old 10 (240 left), renewals 2-3 subtract 100 each.
        assert limiter.renewals(3.0) == 3
        assert limiter.acquired == 40

    def test_set_rate_keeps_debt_and_restarts_schedule(self) -> None:
        limiter = ClassicRateLimiter(10, 1)
        limiter.try_acquire(30, now=0.0)
        limiter.set_rate(20, 1, now=0.5)
        assert limiter.available(0.5) == 0  # 30 acquired > 20 permits
        assert limiter.available(1.2) == 0  # the old tick at 1.0 was cancelled
        assert limiter.available(1.5) == 10  # first tick of the new schedule
        assert limiter.available(2.5) == 20

    @pytest.mark.parametrize(("permits", "period"), [(0, 1), (-5, 1), (10, 0), (10, -1)])
    def test_rejects_non_positive_rate_or_period(self, permits: int, period: float) -> None:
        with pytest.raises(ValueError, match="must be > 0"):
            ClassicRateLimiter(permits, period)

    def test_period_boundaries_are_exact_in_nanoseconds(self) -> None:
        assert to_nanos(1.001) == 1_001_000_000
        limiter = ClassicRateLimiter(10, 0.1)
        limiter.try_acquire(10, now=0.1)
        assert limiter.available(0.2) == 10  # 0.1 + 0.1 is not 0.2 in floats, but is in ns


class TestAsyncTokenBucket:
    def test_carry_over_matches_the_spec_example(self) -> None:
        # Spec §1.5: rate 10, 30 consumed at t=0 -> -20; after >1 s -10; >2 s 0; >3 s 10.
        bucket = dispatch_bucket(10)
        bucket.consume(30)
        assert bucket.tokens(0.5) == -20
        assert bucket.tokens(1.0) == -20  # not strictly more than one period yet
        assert bucket.tokens(1.001) == -10
        assert bucket.tokens(2.0) == -10  # 2.0 is not > 1.001 + 1
        assert bucket.tokens(2.002) == 0
        assert bucket.tokens(3.003) == 10
        assert bucket.tokens(20.0) == 10  # capped at capacity

    def test_starts_full_and_first_evaluation_at_creation_only_stamps(self) -> None:
        bucket = dispatch_bucket(10, now=5.0)
        assert bucket.last_refill_ns == 5 * SECOND
        bucket.consume(10)
        assert bucket.tokens(5.9) == 0
        assert bucket.tokens(6.0) == 0
        assert bucket.tokens(6.0001) == 10

    def test_consumption_is_netted_before_the_capacity_cap(self) -> None:
        # min(tokens + new - pending, capacity): a full bucket that spent 5 refills to full,
        # where capping first (3.2's code) would have left 5.
        bucket = dispatch_bucket(10)
        bucket.consume(5)
        assert bucket.tokens(1.5) == 10

    def test_consume_only_records_until_a_refill(self) -> None:
        bucket = dispatch_bucket(10)
        bucket.consume(4)
        bucket.consume(3)
        assert bucket.tokens(0.2) == 3
        assert bucket.consume_and_check(3, now=0.3) is False
        assert bucket.consume_and_check(0, now=1.5) is True  # refilled to 10
        assert bucket.contains_tokens(1.6)

    def test_consume_and_check_during_a_refill_subtracts_after_the_cap(self) -> None:
        bucket = dispatch_bucket(10)
        # The refill earns 15 tokens (1.5 s at 10/s), capped at 10, then this call's 15 -> -5;
        # netting first would have given min(10 + 15 - 15, 10) = 10.
        assert bucket.consume_and_check(15, now=1.5) is False
        assert bucket.tokens(1.6) == -5

    def test_remainder_nanoseconds_are_carried_so_no_token_is_lost(self) -> None:
        bucket = FinalRateTokenBucket(3, SECOND, 0.0)  # default 16 ms resolution
        bucket.consume(3)
        assert bucket.tokens(0.5) == 1  # 1.5 tokens earned: 1 added, 0.5 token carried
        assert bucket.tokens(1.0) == 3  # 1.5 more + the carried half = 2 whole tokens

    def test_carried_remainder_makes_the_next_token_due_earlier(self) -> None:
        bucket = FinalRateTokenBucket(3, SECOND, 0.0)
        bucket.consume(3)
        assert bucket.tokens(0.5) == 1  # half a token (166,666,667 ns) carried
        # One token takes 333,333,333 ns; with the carried half, 166,666,666 more suffice.
        assert bucket.tokens(0.666) == 1
        assert bucket.tokens(0.667) == 2

    def test_dynamic_bucket_also_needs_strictly_more_than_the_resolution(self) -> None:
        bucket = DynamicRateTokenBucket(lambda: 10, SECOND, 0.0, resolution_ns=SECOND)
        bucket.consume(10)
        assert bucket.tokens(1.0) == 0
        assert bucket.tokens(1.000000001) == 10

    def test_fast_rate_waits_for_the_resolution(self) -> None:
        bucket = FinalRateTokenBucket(1000, SECOND, 0.0)
        bucket.consume(1000)
        assert bucket.tokens(0.010) == 0  # 16 ms resolution not reached
        assert bucket.tokens(0.017) == 17

    def test_dynamic_rate_is_evaluated_on_every_access(self) -> None:
        rate = [10]
        bucket = DynamicRateTokenBucket(lambda: rate[0], SECOND, 0.0, resolution_ns=SECOND)
        assert bucket.tokens(0.0) == 10  # initial fill = rate at creation
        bucket.consume(10)
        rate[0] = 25
        assert bucket.capacity() == 25
        assert bucket.tokens(1.001) == 25

    def test_dynamic_capacity_and_initial_fill_factors(self) -> None:
        bucket = DynamicRateTokenBucket(
            lambda: 10, SECOND, 0.0, capacity_factor=2.0, initial_fill_factor=0.5
        )
        assert bucket.tokens(0.0) == 5
        assert bucket.capacity() == 20
        assert bucket.tokens(5.0) == 20

    def test_negative_consumption_is_rejected(self) -> None:
        bucket = dispatch_bucket(10)
        with pytest.raises(ValueError, match=">= 0"):
            bucket.consume(-1)
        with pytest.raises(ValueError, match=">= 0"):
            bucket.consume_and_check(-1, now=0.0)

    def test_rejects_non_positive_rate(self) -> None:
        with pytest.raises(ValueError, match="must be > 0"):
            FinalRateTokenBucket(0, SECOND, 0.0)
