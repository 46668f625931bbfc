"""DispatchRate JSON and validation, broker settings, and the per-level precedence (spec §1.1)."""

from __future__ import annotations

import json

import msgspec
import pytest

from emubroker.ratelimit.quotas import (
    ASYNC_TOKEN_BUCKET_FACTORY,
    CLASSIC_FACTORY,
    DEFAULT_FACTORY,
    DispatchPolicies,
    DispatchRate,
    DispatchThrottlingConfig,
    InvalidDispatchRateError,
    decode_dispatch_rate,
    encode_dispatch_rate,
    normalize,
    resolve_broker_rate,
    resolve_effective_rates,
    resolve_subscription_rate,
    resolve_topic_rate,
    throttling_config_from,
)


def rate(msg: int = -1, byte: int = -1, *, period: int = 1, relative: bool = False) -> DispatchRate:
    return DispatchRate(msg, byte, relative, period)


class TestDispatchRateJson:
    def test_defaults_match_pulsar_dispatch_rate_impl(self) -> None:
        assert decode_dispatch_rate(b'{"dispatchThrottlingRateInMsg": 10}') == DispatchRate(
            dispatchThrottlingRateInMsg=10,
            dispatchThrottlingRateInByte=-1,
            relativeToPublishRate=False,
            ratePeriodInSecond=1,
        )

    def test_encodes_pulsar_field_names_in_order(self) -> None:
        body = encode_dispatch_rate(rate(100, 2048, period=60, relative=True))
        assert list(json.loads(body)) == [
            "dispatchThrottlingRateInMsg",
            "dispatchThrottlingRateInByte",
            "relativeToPublishRate",
            "ratePeriodInSecond",
        ]
        assert decode_dispatch_rate(body) == rate(100, 2048, period=60, relative=True)

    def test_unknown_fields_are_ignored(self) -> None:
        assert decode_dispatch_rate('{"dispatchThrottlingRateInByte": 5, "x": 1}') == rate(-1, 5)

    @pytest.mark.parametrize("value", [-1, 0, 1, 2**31 - 1])
    def test_accepts_unlimited_disabled_and_positive_message_rates(self, value: int) -> None:
        decoded = decode_dispatch_rate(json.dumps({"dispatchThrottlingRateInMsg": value}))
        assert decoded.dispatchThrottlingRateInMsg == value

    @pytest.mark.parametrize(
        ("body", "match"),
        [
            ('{"dispatchThrottlingRateInMsg": -2}', "dispatchThrottlingRateInMsg must be -1"),
            ('{"dispatchThrottlingRateInByte": -100}', "dispatchThrottlingRateInByte must be -1"),
            ('{"ratePeriodInSecond": 0}', "ratePeriodInSecond must be at least 1"),
            ('{"ratePeriodInSecond": -1}', "ratePeriodInSecond must be at least 1"),
        ],
    )
    def test_rejects_bad_values_with_412(self, body: str, match: str) -> None:
        with pytest.raises(InvalidDispatchRateError, match=match) as info:
            decode_dispatch_rate(body)
        assert info.value.http_status == 412

    @pytest.mark.parametrize(
        "body",
        [
            b"{not json",
            b'{"dispatchThrottlingRateInMsg": "ten"}',
            b'{"relativeToPublishRate": 1}',
            b'{"dispatchThrottlingRateInMsg": 2147483648}',  # beyond Java's int
            b'{"dispatchThrottlingRateInByte": 9223372036854775808}',  # beyond Java's long
            b"[1, 2]",
        ],
    )
    def test_rejects_malformed_json_with_400(self, body: bytes) -> None:
        with pytest.raises(InvalidDispatchRateError, match="invalid DispatchRate") as info:
            decode_dispatch_rate(body)
        assert info.value.http_status == 400

    def test_enabled_and_normalize(self) -> None:
        assert rate(1, -1).enabled
        assert rate(0, 5).enabled
        assert not rate(0, 0).enabled
        assert not rate(-1, -1).enabled
        assert normalize(rate(0, -1)) is None
        assert normalize(None) is None
        assert normalize(rate(3)) == rate(3)


class TestThrottlingConfig:
    def test_defaults_are_pulsars(self) -> None:
        config = DispatchThrottlingConfig()
        assert config.dispatchRateLimiterFactoryClassName == DEFAULT_FACTORY
        assert DEFAULT_FACTORY == ASYNC_TOKEN_BUCKET_FACTORY
        assert DEFAULT_FACTORY.endswith("DispatchRateLimiterFactoryAsyncTokenBucket")
        assert CLASSIC_FACTORY.endswith("DispatchRateLimiterFactoryClassic")
        assert config.dispatchThrottlingRateInMsg == 0
        assert config.dispatchThrottlingOnNonBacklogConsumerEnabled is True
        assert config.dispatchThrottlingOnBatchMessageEnabled is False
        assert config.preciseDispatcherFlowControl is False
        assert config.dispatcherMaxReadBatchSize == 100
        assert config.dispatcherMinReadBatchSize == 1
        assert config.dispatcherMaxReadSizeBytes == 5 * 1024 * 1024

    def test_from_properties_strings(self) -> None:
        config = throttling_config_from(
            {
                "dispatchRateLimiterFactoryClassName": CLASSIC_FACTORY,
                "dispatchThrottlingRatePerTopicInMsg": "500",
                "preciseDispatcherFlowControl": "true",
            }
        )
        assert config.dispatchRateLimiterFactoryClassName == CLASSIC_FACTORY
        assert config.dispatchThrottlingRatePerTopicInMsg == 500
        assert config.preciseDispatcherFlowControl is True

    def test_from_an_object_with_only_some_keys(self) -> None:
        class BrokerConfigLike:
            clusterName = "standalone"
            dispatchThrottlingRateInByte = 4096

        config = throttling_config_from(BrokerConfigLike())
        assert config.dispatchThrottlingRateInByte == 4096
        assert config.dispatchThrottlingRateInMsg == 0

    def test_unknown_factory_class_is_refused(self) -> None:
        with pytest.raises(msgspec.ValidationError, match="dispatchRateLimiterFactoryClassName"):
            throttling_config_from({"dispatchRateLimiterFactoryClassName": "com.example.Nope"})


BROKER = DispatchThrottlingConfig(
    dispatchThrottlingRateInMsg=1000,
    dispatchThrottlingRatePerTopicInMsg=100,
    dispatchThrottlingRatePerSubscriptionInMsg=50,
)


class TestPrecedence:
    def test_broker_config_applies_without_policies(self) -> None:
        rates = resolve_effective_rates(BROKER)
        assert rates.broker == rate(1000, 0)
        assert rates.topic == rate(100, 0)
        assert rates.subscription == rate(50, 0)

    def test_all_zero_config_means_no_limiter_anywhere(self) -> None:
        rates = resolve_effective_rates(DispatchThrottlingConfig())
        assert (rates.broker, rates.topic, rates.subscription) == (None, None, None)

    def test_byte_only_config_still_creates_a_limiter(self) -> None:
        config = DispatchThrottlingConfig(dispatchThrottlingRatePerTopicInByte=4096)
        assert resolve_topic_rate(config, DispatchPolicies()) == rate(0, 4096)

    def test_broker_level_is_never_relative_and_period_is_one_second(self) -> None:
        config = DispatchThrottlingConfig(
            dispatchThrottlingRateInMsg=10, dispatchThrottlingRateRelativeToPublishRate=True
        )
        assert resolve_broker_rate(config) == rate(10, 0, period=1, relative=False)

    @pytest.mark.parametrize(
        ("policies", "expected"),
        [
            (DispatchPolicies(namespace_cluster=rate(30)), rate(30)),
            (DispatchPolicies(namespace_topic=rate(20), namespace_cluster=rate(30)), rate(20)),
            (DispatchPolicies(topic_global=rate(15), namespace_topic=rate(20)), rate(15)),
            (DispatchPolicies(topic_local=rate(12), topic_global=rate(15)), rate(12)),
            # A disabled policy value is normalised away: the next level applies.
            (DispatchPolicies(topic_local=rate(-1, -1), topic_global=rate(15)), rate(15)),
            (DispatchPolicies(topic_local=rate(0, 0), namespace_topic=rate(20)), rate(20)),
            # The legacy map is a fallback for an *absent* topicDispatchRate only; a present but
            # disabled one normalises to absent and falls through to the broker config.
            (
                DispatchPolicies(namespace_topic=rate(0, 0), namespace_cluster=rate(30)),
                rate(100, 0),
            ),
            (
                DispatchPolicies(topic_local=rate(7, period=60, relative=True)),
                rate(7, period=60, relative=True),
            ),
        ],
    )
    def test_topic_level(self, policies: DispatchPolicies, expected: DispatchRate) -> None:
        assert resolve_topic_rate(BROKER, policies) == expected

    @pytest.mark.parametrize(
        ("policies", "expected"),
        [
            (DispatchPolicies(namespace_subscription=rate(8)), rate(8)),
            (
                DispatchPolicies(subscription_global=rate(7), namespace_subscription=rate(8)),
                rate(7),
            ),
            (DispatchPolicies(subscription_local=rate(6), subscription_global=rate(7)), rate(6)),
            (DispatchPolicies(per_subscription=rate(5), subscription_local=rate(6)), rate(5)),
            (DispatchPolicies(per_subscription=rate(0, 0), subscription_local=rate(6)), rate(6)),
            # Topic-level rates never leak into the subscription level.
            (DispatchPolicies(topic_local=rate(3)), rate(50, 0)),
        ],
    )
    def test_subscription_level(self, policies: DispatchPolicies, expected: DispatchRate) -> None:
        assert resolve_subscription_rate(BROKER, policies) == expected

    def test_resolve_all_levels_together(self) -> None:
        policies = DispatchPolicies(topic_global=rate(-1, 2048), per_subscription=rate(9))
        rates = resolve_effective_rates(BROKER, policies)
        assert rates.broker == rate(1000, 0)
        assert rates.topic == rate(-1, 2048)
        assert rates.subscription == rate(9)
