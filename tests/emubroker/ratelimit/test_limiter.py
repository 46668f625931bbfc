"""Both DispatchRateLimiter implementations: carry-over, bytes, live changes, relative mode."""

from __future__ import annotations

import pytest

from emubroker.ratelimit.limiter import (
    ClassicDispatchRateLimiter,
    DispatchRateLimiter,
    LastUpdatedAvgPublishRate,
    LimiterLevel,
    PublishRateSource,
    TokenBucketDispatchRateLimiter,
    create_dispatch_rate_limiter,
)
from emubroker.ratelimit.quotas import (
    ASYNC_TOKEN_BUCKET_FACTORY,
    CLASSIC_FACTORY,
    DEFAULT_FACTORY,
    DispatchRate,
)

FACTORIES = [CLASSIC_FACTORY, ASYNC_TOKEN_BUCKET_FACTORY]
SUB = LimiterLevel.SUBSCRIPTION

# The dispatcher retries 1000 ms after being throttled, a little later in real time; polling at
# k * 1.001 s sees exactly one classic renewal and one token-bucket refill per period.
POLLS = [k * 1.001 for k in range(1, 5)]


def make(
    factory: str,
    rate: DispatchRate | None,
    now: float = 0.0,
    *,
    publish_rate: PublishRateSource | None = None,
) -> DispatchRateLimiter:
    return create_dispatch_rate_limiter(factory, SUB, rate, now, publish_rate=publish_rate)


@pytest.fixture(params=FACTORIES, ids=["classic", "token-bucket"])
def factory(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


class TestBothImplementations:
    def test_factory_selects_by_pulsar_class_name(self) -> None:
        assert isinstance(make(CLASSIC_FACTORY, None), ClassicDispatchRateLimiter)
        assert isinstance(make(ASYNC_TOKEN_BUCKET_FACTORY, None), TokenBucketDispatchRateLimiter)
        assert isinstance(make(DEFAULT_FACTORY, None), TokenBucketDispatchRateLimiter)

    def test_unknown_factory_lists_the_known_ones(self) -> None:
        with pytest.raises(ValueError, match="DispatchRateLimiterFactoryClassic"):
            make("org.example.Mine", None)

    @pytest.mark.parametrize("rate", [None, DispatchRate(-1, -1), DispatchRate(0, 0)])
    def test_disabled_rate_means_unlimited_and_ignores_charges(
        self, factory: str, rate: DispatchRate | None
    ) -> None:
        limiter = make(factory, rate)
        limiter.consume(100, 100, now=0.0)
        assert not limiter.enabled
        assert (limiter.available_msg(0.5), limiter.available_byte(0.5)) == (-1, -1)
        assert (limiter.rate_on_msg(), limiter.rate_on_byte()) == (-1, -1)
        assert limiter.period_index(0.5) == -1
        assert limiter.dispatch_rate is None

    def test_only_the_configured_dimension_is_limited(self, factory: str) -> None:
        limiter = make(factory, DispatchRate(10, -1))
        assert limiter.available_msg(0.0) == 10
        assert limiter.available_byte(0.0) == -1
        limiter.consume(3, 1_000_000, now=0.0)
        assert limiter.available_msg(0.0) == 7

    def test_message_carry_over_period_by_period(self, factory: str) -> None:
        limiter = make(factory, DispatchRate(10))
        assert limiter.available_msg(0.0) == 10
        limiter.consume(30, 0, now=0.0)
        assert limiter.available_msg(0.0) == 0
        assert [limiter.available_msg(t) for t in POLLS] == [0, 0, 10, 10]

    @pytest.mark.parametrize(
        ("name", "expected"),
        [
            (CLASSIC_FACTORY, [0, 500, 1000, 1000]),
            # The bucket earns elapsed * rate / period: 1001 bytes per 1.001 s poll interval.
            (ASYNC_TOKEN_BUCKET_FACTORY, [0, 502, 1000, 1000]),
        ],
        ids=["classic", "token-bucket"],
    )
    def test_byte_carry_over_period_by_period(self, name: str, expected: list[int]) -> None:
        limiter = make(name, DispatchRate(-1, 1000))
        limiter.consume(0, 2500, now=0.0)
        assert [limiter.available_byte(t) for t in POLLS] == expected

    def test_long_period_per_minute_limit(self, factory: str) -> None:
        # The seed's example: 10,000 messages per minute = rate 10000, ratePeriodInSecond 60.
        limiter = make(factory, DispatchRate(10_000, -1, False, 60))
        limiter.consume(10_000, 0, now=0.0)
        assert limiter.available_msg(59.9) == 0
        assert limiter.available_msg(60.001) == 10_000
        assert limiter.period_index(60.001) == 1

    def test_period_index_counts_periods_of_the_current_limit(self, factory: str) -> None:
        limiter = make(factory, DispatchRate(10))
        limiter.consume(1, 0, now=0.0)
        assert limiter.period_index(0.5) == 0
        assert limiter.period_index(2.5) == 2

    def test_disable_then_enable_starts_fresh(self, factory: str) -> None:
        limiter = make(factory, DispatchRate(10))
        limiter.consume(50, 0, now=0.0)
        limiter.update_rate(None, now=0.2)
        assert limiter.available_msg(0.2) == -1
        limiter.update_rate(DispatchRate(10), now=0.4)
        assert limiter.available_msg(0.4) == 10

    def test_broker_level_ignores_relative_flag(self, factory: str) -> None:
        source = LastUpdatedAvgPublishRate()
        source.update(500.0, 0.0)
        limiter = create_dispatch_rate_limiter(
            factory, LimiterLevel.BROKER, DispatchRate(10, -1, True), 0.0, publish_rate=source
        )
        assert limiter.dispatch_rate == DispatchRate(10, -1, False)
        limiter.consume(1, 0, now=0.0)
        assert limiter.available_msg(5.5) == 10


class TestLiveRateChange:
    def test_token_bucket_builds_a_new_full_bucket_forgiving_debt(self) -> None:
        limiter = make(ASYNC_TOKEN_BUCKET_FACTORY, DispatchRate(10))
        limiter.consume(30, 0, now=0.0)
        limiter.update_rate(DispatchRate(20), now=0.5)
        assert limiter.available_msg(0.5) == 20
        assert limiter.rate_on_msg() == 20
        limiter.consume(20, 0, now=0.5)
        assert limiter.available_msg(1.5) == 0  # refill clock restarted at 0.5
        assert limiter.available_msg(1.501) == 20

    def test_classic_keeps_debt_and_restarts_the_schedule(self) -> None:
        limiter = make(CLASSIC_FACTORY, DispatchRate(10))
        limiter.consume(30, 0, now=0.0)
        limiter.update_rate(DispatchRate(20), now=0.5)
        assert limiter.rate_on_msg() == 20
        assert [limiter.available_msg(t) for t in (0.5, 1.2, 1.5, 2.5)] == [0, 0, 10, 20]


class TestRelativeToPublishRate:
    def test_last_updated_average_takes_rises_and_averages_falls(self) -> None:
        avg = LastUpdatedAvgPublishRate()
        avg.update(100.0, 1000.0)
        assert (avg.avg_publish_rate_in_msg(), avg.avg_publish_rate_in_byte()) == (100.0, 1000.0)
        avg.update(50.0, 3000.0)
        assert (avg.avg_publish_rate_in_msg(), avg.avg_publish_rate_in_byte()) == (75.0, 3000.0)
        avg.update(200.0, 1000.0)
        assert (avg.avg_publish_rate_in_msg(), avg.avg_publish_rate_in_byte()) == (200.0, 2000.0)

    def test_token_bucket_rate_follows_the_publish_rate_on_every_access(self) -> None:
        avg = LastUpdatedAvgPublishRate()
        avg.update(25.7, 0.0)
        limiter = make(ASYNC_TOKEN_BUCKET_FACTORY, DispatchRate(10, -1, True), publish_rate=avg)
        assert limiter.available_msg(0.0) == 35  # floor(25.7) + 10, full at creation
        limiter.consume(35, 0, now=0.0)
        avg.update(40.2, 0.0)
        assert limiter.rate_on_msg() == 50
        assert limiter.available_msg(1.001) == 50

    def test_classic_starts_at_the_configured_rate_and_switches_at_renewal(self) -> None:
        avg = LastUpdatedAvgPublishRate()
        avg.update(25.7, 0.0)
        limiter = make(CLASSIC_FACTORY, DispatchRate(10, -1, True), publish_rate=avg)
        assert limiter.available_msg(0.0) == 10
        limiter.consume(1, 0, now=0.0)
        assert limiter.available_msg(1.0) == 35
        assert limiter.rate_on_msg() == 35

    def test_relative_byte_rate(self, factory: str) -> None:
        avg = LastUpdatedAvgPublishRate()
        avg.update(0.0, 4000.0)
        limiter = make(factory, DispatchRate(-1, 1000, True), publish_rate=avg)
        limiter.consume(0, 1, now=0.0)
        assert limiter.available_byte(1.001) == 5000
