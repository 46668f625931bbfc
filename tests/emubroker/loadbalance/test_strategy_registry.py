"""The strategy registry: the configuration's names, the objects built, the start-up checks."""

from __future__ import annotations

import random
from typing import get_args

import pytest

from emubroker.config import BrokerConfig
from emubroker.config.strategies import (
    EXTENSIBLE_LOAD_MANAGER,
    MODULAR_LOAD_MANAGER,
    STRATEGIES,
    LoadManagerClassName,
    PlacementStrategyName,
    SheddingStrategyName,
    combination_errors,
    simple_name,
)
from emubroker.loadbalance.strategies.factory import build, create_modular_strategies


def test_the_configuration_types_name_the_registered_strategies() -> None:
    assert set(get_args(PlacementStrategyName)) == {
        e.name for e in STRATEGIES.values() if e.placement
    }
    assert set(get_args(SheddingStrategyName)) == {
        e.name for e in STRATEGIES.values() if e.shedding
    }
    assert set(get_args(LoadManagerClassName)) == {MODULAR_LOAD_MANAGER, EXTENSIBLE_LOAD_MANAGER}


@pytest.mark.parametrize("entry", list(STRATEGIES.values()), ids=lambda e: simple_name(e.name))
def test_every_entry_builds_its_class(entry: object) -> None:
    strategy = build(entry, random.Random(1))  # type: ignore[arg-type]
    assert type(strategy).__name__ == simple_name(entry.name)  # type: ignore[attr-defined]
    if entry.shedding:  # type: ignore[attr-defined]
        assert callable(strategy.explain)  # every shedder explains its own decisions


def test_avg_shedder_named_for_both_keys_is_one_object() -> None:
    avg = "org.apache.pulsar.broker.loadbalance.impl.AvgShedder"
    conf = BrokerConfig(loadBalancerLoadPlacementStrategy=avg, loadBalancerLoadSheddingStrategy=avg)
    placement, shedding = create_modular_strategies(conf)
    assert placement is shedding


def test_combination_checks() -> None:
    impl = "org.apache.pulsar.broker.loadbalance.impl."
    transfer = "org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder"
    assert combination_errors(
        MODULAR_LOAD_MANAGER, impl + "LeastLongTermMessageRate", transfer
    ) == [
        f"loadBalancerLoadSheddingStrategy: {transfer} needs loadManagerClassName="
        f"{EXTENSIBLE_LOAD_MANAGER}"
    ]
    assert (
        combination_errors(EXTENSIBLE_LOAD_MANAGER, impl + "LeastLongTermMessageRate", transfer)
        == []
    )
    assert combination_errors(
        MODULAR_LOAD_MANAGER, impl + "AvgShedder", impl + "ThresholdShedder"
    ) == [
        f"loadBalancerLoadSheddingStrategy: {impl}ThresholdShedder can't work with the placement "
        f"strategy {impl}AvgShedder (loadBalancerLoadPlacementStrategy)"
    ]
