"""Strategy objects by Pulsar class name, built from the registry (``emubroker.config.strategies``).

The keys are ``loadBalancerLoadPlacementStrategy`` and ``loadBalancerLoadSheddingStrategy``.

The configuration already accepts only the registered names (``emubroker.config.loadbalancer``
reads the same registry), so a lookup cannot fail for a validated ``BrokerConfig``. A strategy
named for both keys (AvgShedder) is one object serving both roles, as in
``ModularLoadManagerImpl.initialize``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, NamedTuple

from emubroker.config.strategies import (
    MODULAR_LOAD_MANAGER,
    STRATEGIES,
    StrategyEntry,
    simple_name,
)

if TYPE_CHECKING:
    import random

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.strategies.placement import ModularLoadManagerStrategy
    from emubroker.loadbalance.strategies.shedding import LoadSheddingStrategy

__all__ = [
    "STRATEGIES",
    "ModularStrategies",
    "StrategyEntry",
    "build",
    "create_modular_strategies",
    "simple_name",
]


class ModularStrategies(NamedTuple):
    """The modular load manager's strategies."""

    placement: ModularLoadManagerStrategy
    shedding: LoadSheddingStrategy


def build(entry: StrategyEntry, rng: random.Random | None = None) -> Any:
    """A new object of the strategy ``entry`` names (its module imported now)."""
    module, _, name = entry.implementation.partition(":")
    cls = getattr(importlib.import_module(module), name)
    return cls(rng) if entry.takes_rng else cls()


def create_modular_strategies(
    conf: BrokerConfig, rng: random.Random | None = None
) -> ModularStrategies:
    """The placement and shedding strategies ``conf`` names.

    Args:
        conf: Names the strategies (Pulsar's fully qualified class names).
        rng: Randomness of the placement strategies (seeded for reproducible runs).

    Raises:
        ValueError: A name that is not a modular strategy (TransferShedder belongs to the
            extensible load manager).
    """
    placement_name = conf.loadBalancerLoadPlacementStrategy
    shedding_name = conf.loadBalancerLoadSheddingStrategy
    placement_entry = STRATEGIES.get(placement_name)
    if placement_entry is None or not placement_entry.placement:
        raise ValueError(f"loadBalancerLoadPlacementStrategy: unknown strategy {placement_name}")
    shedding_entry = STRATEGIES.get(shedding_name)
    if (
        shedding_entry is None
        or not shedding_entry.shedding
        or MODULAR_LOAD_MANAGER not in shedding_entry.load_managers
    ):
        raise ValueError(
            f"loadBalancerLoadSheddingStrategy: {shedding_name} is not a modular shedder"
        )
    placement = build(placement_entry, rng)
    shedding = placement if shedding_entry is placement_entry else build(shedding_entry, rng)
    return ModularStrategies(placement, shedding)
