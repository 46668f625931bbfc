"""The strategies by Pulsar class name: one table that the configuration and the leader read.

Each :class:`StrategyEntry` names a strategy as ``broker.conf`` does (Pulsar's fully qualified
class name), the class that implements it here (imported when a strategy is built, so this
module imports nothing of ours and the configuration can read it), the keys it may be named
by, and the start-up checks Pulsar makes of it. ``emubroker.config.loadbalancer`` takes its
accepted names and combination checks from :data:`STRATEGIES`;
:func:`~emubroker.loadbalance.strategies.factory.create_modular_strategies` builds the objects.

Adding a strategy (docs/load-balancing-library.md): write its class, add its entry here and its
name to the ``Literal`` below the table (the type the configuration validates with; a test
checks the two agree).
"""

from __future__ import annotations

from typing import Final, Literal, NamedTuple

__all__ = [
    "EXTENSIBLE_LOAD_MANAGER",
    "MODULAR_LOAD_MANAGER",
    "STRATEGIES",
    "LoadManagerClassName",
    "PlacementStrategyName",
    "SheddingStrategyName",
    "StrategyEntry",
    "combination_errors",
    "simple_name",
]

_IMPL: Final = "org.apache.pulsar.broker.loadbalance.impl."
_SCHEDULER: Final = "org.apache.pulsar.broker.loadbalance.extensions.scheduler."
MODULAR_LOAD_MANAGER: Final = _IMPL + "ModularLoadManagerImpl"
EXTENSIBLE_LOAD_MANAGER: Final = (
    "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"
)
_BOTH: Final = frozenset({MODULAR_LOAD_MANAGER, EXTENSIBLE_LOAD_MANAGER})


class StrategyEntry(NamedTuple):
    """One strategy.

    Attributes:
        name: Pulsar's class name, the value of the key that chooses it.
        implementation: ``module:Class`` of ours; the class takes the placement randomness
            (a ``random.Random``) as its only argument when ``takes_rng``, else none.
        placement: May be named by ``loadBalancerLoadPlacementStrategy``.
        shedding: May be named by ``loadBalancerLoadSheddingStrategy``.
        load_managers: The ``loadManagerClassName`` values it sheds under.
        takes_rng: Built with the placement randomness.
        needs_shedding: As a placement strategy, the shedding strategy it must be paired with
            (``ModularLoadManagerImpl.initialize``); one object then serves both roles.
    """

    name: str
    implementation: str
    placement: bool = False
    shedding: bool = False
    load_managers: frozenset[str] = _BOTH
    takes_rng: bool = False
    needs_shedding: str | None = None


STRATEGIES: Final[dict[str, StrategyEntry]] = {
    entry.name: entry
    for entry in (
        StrategyEntry(
            _IMPL + "LeastLongTermMessageRate",
            "emubroker.loadbalance.strategies.placement:LeastLongTermMessageRate",
            placement=True,
            takes_rng=True,
        ),
        StrategyEntry(
            _IMPL + "LeastResourceUsageWithWeight",
            "emubroker.loadbalance.strategies.placement:LeastResourceUsageWithWeight",
            placement=True,
            takes_rng=True,
        ),
        StrategyEntry(
            _IMPL + "AvgShedder",
            "emubroker.loadbalance.strategies.avg_shedder:AvgShedder",
            placement=True,
            shedding=True,
            takes_rng=True,
            needs_shedding=_IMPL + "AvgShedder",
        ),
        StrategyEntry(
            _IMPL + "RoundRobinBrokerSelector",
            "emubroker.loadbalance.strategies.placement:RoundRobinBrokerSelector",
            placement=True,
        ),
        StrategyEntry(
            _IMPL + "ThresholdShedder",
            "emubroker.loadbalance.strategies.shedding:ThresholdShedder",
            shedding=True,
        ),
        StrategyEntry(
            _IMPL + "OverloadShedder",
            "emubroker.loadbalance.strategies.shedding:OverloadShedder",
            shedding=True,
        ),
        StrategyEntry(
            _IMPL + "UniformLoadShedder",
            "emubroker.loadbalance.strategies.shedding:UniformLoadShedder",
            shedding=True,
        ),
        StrategyEntry(
            _SCHEDULER + "TransferShedder",
            "emubroker.loadbalance.strategies.transfer_shedder:TransferShedder",
            shedding=True,
            load_managers=frozenset({EXTENSIBLE_LOAD_MANAGER}),
        ),
    )
}

# The configuration's types (msgspec validates with them and mypy checks them): the names above.
LoadManagerClassName = Literal[
    "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
    "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl",
]
PlacementStrategyName = Literal[
    "org.apache.pulsar.broker.loadbalance.impl.LeastLongTermMessageRate",
    "org.apache.pulsar.broker.loadbalance.impl.LeastResourceUsageWithWeight",
    "org.apache.pulsar.broker.loadbalance.impl.AvgShedder",
    "org.apache.pulsar.broker.loadbalance.impl.RoundRobinBrokerSelector",
]
"""``loadBalancerLoadPlacementStrategy``: the entries with ``placement``."""
SheddingStrategyName = Literal[
    "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder",
    "org.apache.pulsar.broker.loadbalance.impl.OverloadShedder",
    "org.apache.pulsar.broker.loadbalance.impl.UniformLoadShedder",
    "org.apache.pulsar.broker.loadbalance.impl.AvgShedder",
    "org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder",
]
"""``loadBalancerLoadSheddingStrategy``: the entries with ``shedding``."""


def simple_name(class_name: str) -> str:
    """``ThresholdShedder`` of ``org.apache...impl.ThresholdShedder``."""
    return class_name.rsplit(".", 1)[-1]


def combination_errors(load_manager: str, placement: str, shedding: str) -> list[str]:
    """What Pulsar refuses at start-up in this choice of strategies, one message each.

    Args:
        load_manager: ``loadManagerClassName``.
        placement: ``loadBalancerLoadPlacementStrategy`` (a registered name).
        shedding: ``loadBalancerLoadSheddingStrategy`` (a registered name).
    """
    errors: list[str] = []
    wanted = STRATEGIES[placement].needs_shedding
    if wanted is not None and shedding != wanted:
        errors.append(
            f"loadBalancerLoadSheddingStrategy: {shedding} can't work with the placement "
            f"strategy {placement} (loadBalancerLoadPlacementStrategy)"
        )
    managers = STRATEGIES[shedding].load_managers
    if load_manager not in managers:
        needed = " or ".join(sorted(managers))
        errors.append(
            f"loadBalancerLoadSheddingStrategy: {shedding} needs loadManagerClassName={needed}"
        )
    return errors
