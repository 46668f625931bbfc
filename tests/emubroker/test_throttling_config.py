"""The broker config carries exactly the throttling settings ``ratelimit`` defines."""

from __future__ import annotations

import msgspec

from emubroker.config import BrokerConfig, load_config
from emubroker.ratelimit.quotas import DispatchThrottlingConfig, throttling_config_from


def test_throttling_keys_match_the_ratelimit_settings_exactly() -> None:
    # Declared once: the broker config stacks the throttling family as a base.
    assert issubclass(BrokerConfig, DispatchThrottlingConfig)
    ours = {f.name: f.default for f in msgspec.structs.fields(BrokerConfig)}
    theirs = {f.name: f.default for f in msgspec.structs.fields(DispatchThrottlingConfig)}
    assert {name: ours.get(name) for name in theirs} == theirs
    assert throttling_config_from(BrokerConfig()) == DispatchThrottlingConfig()


def test_throttling_keys_load_from_config_sources() -> None:
    changed = load_config(
        overrides={
            "dispatchThrottlingRatePerTopicInMsg": "7",
            "preciseDispatcherFlowControl": "true",
            "dispatchRateLimiterFactoryClassName": (
                "org.apache.pulsar.broker.service.persistent.DispatchRateLimiterFactoryClassic"
            ),
            "emubrokerDispatchTraceDir": "/tmp/trace",
        },
        environ={},
    )
    converted = throttling_config_from(changed)
    assert converted.dispatchThrottlingRatePerTopicInMsg == 7
    assert converted.preciseDispatcherFlowControl
    assert converted.dispatchRateLimiterFactoryClassName.endswith("Classic")
    assert changed.emubrokerDispatchTraceDir == "/tmp/trace"
    assert BrokerConfig().emubrokerDispatchTraceDir == ""
