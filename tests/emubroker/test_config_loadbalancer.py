"""The load manager's configuration keys: Pulsar's defaults, names and start-up checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from emubroker.config import BrokerConfig, ConfigError, load_config
from emubroker.config.loadbalancer import EXTENSIBLE_LOAD_MANAGER
from emubroker.dynamic_config import DynamicConfig, InvalidDynamicValueError

IMPL = "org.apache.pulsar.broker.loadbalance.impl."


def test_defaults_are_pulsars() -> None:
    conf = BrokerConfig()
    assert conf.loadManagerClassName == IMPL + "ModularLoadManagerImpl"
    assert conf.loadBalancerLoadSheddingStrategy == IMPL + "ThresholdShedder"
    assert conf.loadBalancerLoadPlacementStrategy == IMPL + "LeastLongTermMessageRate"
    assert (
        conf.loadBalancerBrokerOverloadedThresholdPercentage,
        conf.loadBalancerBrokerThresholdShedderPercentage,
        conf.loadBalancerHistoryResourcePercentage,
        conf.loadBalancerDirectMemoryResourceWeight,
        conf.loadBalancerMemoryResourceWeight,
        conf.maxUnloadPercentage,
        conf.minUnloadMessageThroughput,
        conf.loadBalancerNamespaceMaximumBundles,
        conf.loadBalancerBrokerLoadTargetStd,
        conf.loadBalanceSheddingDelayInSeconds,
    ) == (85, 10, 0.9, 0.0, 0.0, 0.2, 1048576, 128, 0.25, 180)
    assert conf.defaultNamespaceBundleSplitAlgorithm == "range_equally_divide"
    assert conf.loadBalancerSheddingExcludedNamespaces == frozenset()


def test_unknown_strategy_names_stop_start_up_naming_the_key(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("loadBalancerLoadSheddingStrategy=ThresholdShedder\n")  # not the class name
    with pytest.raises(ConfigError, match="loadBalancerLoadSheddingStrategy"):
        load_config(conf, environ={})
    with pytest.raises(ConfigError, match="loadBalancerLoadPlacementStrategy"):
        load_config(overrides={"loadBalancerLoadPlacementStrategy": IMPL + "Nope"}, environ={})
    with pytest.raises(ConfigError, match="defaultNamespaceBundleSplitAlgorithm"):
        load_config(overrides={"defaultNamespaceBundleSplitAlgorithm": "halves"}, environ={})
    with pytest.raises(ConfigError, match="loadManagerClassName"):
        load_config(overrides={"loadManagerClassName": IMPL + "SimpleLoadManagerImpl"}, environ={})
    with pytest.raises(ConfigError, match="supportedNamespaceBundleSplitAlgorithms"):
        load_config(
            overrides={"supportedNamespaceBundleSplitAlgorithms": "range_equally_divide,x"},
            environ={},
        )


def test_avg_shedder_placement_needs_avg_shedder_shedding() -> None:
    with pytest.raises(ConfigError, match="can't work with the placement strategy"):
        load_config(
            overrides={"loadBalancerLoadPlacementStrategy": IMPL + "AvgShedder"}, environ={}
        )
    both = load_config(
        overrides={
            "loadBalancerLoadPlacementStrategy": IMPL + "AvgShedder",
            "loadBalancerLoadSheddingStrategy": IMPL + "AvgShedder",
        },
        environ={},
    )
    assert both.loadBalancerLoadSheddingStrategy.endswith("AvgShedder")


def test_transfer_shedder_needs_the_extensible_load_manager() -> None:
    transfer = "org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder"
    with pytest.raises(ConfigError, match="loadManagerClassName"):
        load_config(overrides={"loadBalancerLoadSheddingStrategy": transfer}, environ={})
    conf = load_config(
        overrides={
            "loadBalancerLoadSheddingStrategy": transfer,
            "loadManagerClassName": EXTENSIBLE_LOAD_MANAGER,
        },
        environ={},
    )
    assert conf.loadManagerClassName == EXTENSIBLE_LOAD_MANAGER


def test_list_keys_are_comma_separated_in_properties(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "loadBalancerSheddingExcludedNamespaces=public/a, public/b,\n"
        "supportedNamespaceBundleSplitAlgorithms=range_equally_divide\n"
        "loadBalancerSheddingIntervalMinutes=0.05\n"
    )
    loaded = load_config(conf, environ={})
    assert loaded.loadBalancerSheddingExcludedNamespaces == frozenset({"public/a", "public/b"})
    assert loaded.supportedNamespaceBundleSplitAlgorithms == ("range_equally_divide",)
    assert loaded.loadBalancerSheddingIntervalMinutes == 0.05  # minutes accept fractions
    toml = tmp_path / "broker.toml"
    toml.write_text('loadBalancerSheddingExcludedNamespaces = ["public/c"]\n')
    assert load_config(toml, environ={}).loadBalancerSheddingExcludedNamespaces == {"public/c"}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("loadBalancerHistoryResourcePercentage", "1.5"),
        ("loadBalancerCPUResourceWeight", "-1"),
        ("loadBalancerSheddingIntervalMinutes", "0"),
        ("maxUnloadBundleNumPerShedding", "-2"),
    ],
)
def test_bad_values_name_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        load_config(overrides={key: value}, environ={})


def test_load_balancer_keys_are_dynamic() -> None:
    dynamic = DynamicConfig(BrokerConfig())
    assert "loadBalancerBrokerThresholdShedderPercentage" in dynamic.dynamic_keys()
    updated = dynamic.check("loadBalancerSheddingExcludedNamespaces", "a/b,c/d")
    assert updated.loadBalancerSheddingExcludedNamespaces == frozenset({"a/b", "c/d"})
    assert dynamic.runtime()["loadBalancerSheddingExcludedNamespaces"] == ""
    with pytest.raises(InvalidDynamicValueError, match="loadBalancerLoadSheddingStrategy"):
        dynamic.check("loadBalancerLoadSheddingStrategy", "Nope")
