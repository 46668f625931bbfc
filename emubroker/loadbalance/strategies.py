"""Strategy objects by Pulsar class name.

The keys are ``loadBalancerLoadPlacementStrategy`` and ``loadBalancerLoadSheddingStrategy``.

The configuration already accepts only the names listed here (``emubroker.config.loadbalancer``),
so a lookup cannot fail for a validated ``BrokerConfig``. AvgShedder named for both keys is one
object serving both roles, as in ``ModularLoadManagerImpl.initialize``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, NamedTuple

from emubroker.loadbalance.avg_shedder import AvgShedder
from emubroker.loadbalance.placement import (
    LeastLongTermMessageRate,
    LeastResourceUsageWithWeight,
    RoundRobinBrokerSelector,
)
from emubroker.loadbalance.shedding import OverloadShedder, ThresholdShedder, UniformLoadShedder

if TYPE_CHECKING:
    import random

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.placement import ModularLoadManagerStrategy
    from emubroker.loadbalance.shedding import LoadSheddingStrategy

__all__ = ["ModularStrategies", "create_modular_strategies", "simple_name"]

_PACKAGE: Final = "org.apache.pulsar.broker.loadbalance.impl."


def simple_name(class_name: str) -> str:
    """``ThresholdShedder`` of ``org.apache...impl.ThresholdShedder``."""
    return class_name.rsplit(".", 1)[-1]


class ModularStrategies(NamedTuple):
    """The modular load manager's strategies."""

    placement: ModularLoadManagerStrategy
    shedding: LoadSheddingStrategy


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
    placements: dict[str, type[LeastLongTermMessageRate | LeastResourceUsageWithWeight]] = {
        _PACKAGE + "LeastLongTermMessageRate": LeastLongTermMessageRate,
        _PACKAGE + "LeastResourceUsageWithWeight": LeastResourceUsageWithWeight,
    }
    shedders: dict[str, type[OverloadShedder | ThresholdShedder | UniformLoadShedder]] = {
        _PACKAGE + "OverloadShedder": OverloadShedder,
        _PACKAGE + "ThresholdShedder": ThresholdShedder,
        _PACKAGE + "UniformLoadShedder": UniformLoadShedder,
    }
    avg: AvgShedder | None = None
    placement: ModularLoadManagerStrategy
    if placement_name in placements:
        placement = placements[placement_name](rng)
    elif placement_name == _PACKAGE + "RoundRobinBrokerSelector":
        placement = RoundRobinBrokerSelector()
    elif placement_name == _PACKAGE + "AvgShedder":
        placement = avg = AvgShedder(rng)
    else:
        raise ValueError(f"loadBalancerLoadPlacementStrategy: unknown strategy {placement_name}")
    shedding: LoadSheddingStrategy
    if shedding_name in shedders:
        shedding = shedders[shedding_name]()
    elif shedding_name == _PACKAGE + "AvgShedder":
        shedding = avg if avg is not None else AvgShedder(rng)
    else:
        raise ValueError(
            f"loadBalancerLoadSheddingStrategy: {shedding_name} is not a modular shedder"
        )
    return ModularStrategies(placement, shedding)
