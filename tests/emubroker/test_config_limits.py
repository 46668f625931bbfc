"""The count-limit keys: Pulsar's defaults, validation, not dynamic, handed to the topic layer."""

from __future__ import annotations

import pytest

from emubroker.app import topic_settings
from emubroker.config import BrokerConfig, ConfigError, load_config
from emubroker.dynamic_config import DynamicConfig, NotDynamicError
from emubroker.topics.limits import CountLimits, broker_limits

KEYS = (
    "maxProducersPerTopic",
    "maxConsumersPerTopic",
    "maxConsumersPerSubscription",
    "maxSubscriptionsPerTopic",
)


def test_defaults_are_pulsars_no_limit() -> None:
    config = BrokerConfig()
    assert [getattr(config, key) for key in KEYS] == [0, 0, 0, 0]
    assert broker_limits(topic_settings(config)) == CountLimits()


def test_values_load_from_properties_and_reach_the_topic_settings() -> None:
    config = load_config(overrides=dict(zip(KEYS, ("1", "2", "3", "4"), strict=True)), environ={})
    assert broker_limits(topic_settings(config)) == CountLimits(1, 2, 3, 4)


@pytest.mark.parametrize("key", KEYS)
def test_negative_values_stop_start_up(key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        load_config(overrides={key: "-1"}, environ={})


@pytest.mark.parametrize("key", KEYS)
def test_they_are_not_dynamic_in_pulsar(key: str) -> None:
    assert key not in DynamicConfig.dynamic_keys()
    with pytest.raises(NotDynamicError):
        DynamicConfig(BrokerConfig()).check(key, "1")
