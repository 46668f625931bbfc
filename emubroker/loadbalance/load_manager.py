"""The load manager as one interface: what differs between Pulsar's two load managers.

``loadManagerClassName`` names one of Pulsar's load managers: ``ModularLoadManagerImpl`` (the
default) or ``ExtensibleLoadManagerImpl`` (PIP-192). The leader's tasks, the placement of
unowned bundles, the reports' trace rows and ``/metrics`` are the same code for both; where the
two differ they ask a :class:`LoadManager`, which
:func:`~emubroker.loadbalance.load_managers.load_manager` chooses from the class name in one
place. The implementations are :class:`~emubroker.loadbalance.modular.kind.ModularKind` and
:class:`~emubroker.loadbalance.extensible.kind.ExtensibleKind`.

The interface is stateless: the state a load manager keeps (its unload counters, the
TransferShedder's statistics, the placement strategies' randomness) lives with the broker that
runs it and is handed in, so a dynamic change of ``loadManagerClassName`` takes effect at the
next use, as every other load-balancer key does (docs/load-balancing.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol

import msgspec

if TYPE_CHECKING:
    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.model.extensible_data import UnloadCounter
    from emubroker.loadbalance.runtime.aggregation import LeaderAggregation
    from emubroker.loadbalance.runtime.shedding_runtime import ModularUnloadCounters, SheddingRunner
    from emubroker.loadbalance.strategies.extensible_placement import LeastResourceUsageWithWeight
    from emubroker.loadbalance.strategies.modular_manager import ModularLoadManager
    from emubroker.loadbalance.strategies.transfer_shedder import TransferShedder
    from protocol.clock import Clock

__all__ = [
    "ExportedCounters",
    "LeaderTasks",
    "LeaderTerm",
    "LoadManager",
    "Placement",
]


class Placement(msgspec.Struct, frozen=True):
    """One choice of a broker for an unowned bundle, as it is logged and traced.

    Attributes:
        bundle: ``tenant/ns/range``.
        broker: The broker chosen, None when there was none.
        reason: ``affinity``, ``preallocated`` or ``strategy``.
        strategy: Pulsar's simple name of the strategy that chose (``destinationBroker`` for
            an affinity).
        candidates: How many brokers the strategy chose among (-1: not applicable).
        score: The chosen broker's score when it was chosen: LeastLongTermMessageRate's
            long-term msg/s, else its load as a fraction (-1: not applicable).
    """

    bundle: str
    broker: str | None
    reason: str
    strategy: str
    candidates: int = -1
    score: float = -1.0


class LeaderTerm:
    """One leadership term's state (the leader's aggregation and its shedding memory)."""

    def __init__(self, aggregation: LeaderAggregation) -> None:
        self.aggregation = aggregation
        self.bundle_data_writes = 0
        self.cycle = 0
        self.recently_unloaded_bundles: dict[str, int] = {}
        self.recently_unloaded_brokers: dict[str, int] = {}


class ExportedCounters(NamedTuple):
    """The leader's counters a load manager exports on ``/metrics`` (None: not exported)."""

    modular: ModularUnloadCounters | None = None
    extensible: UnloadCounter | None = None
    bundles_split: int | None = None


class LeaderTasks(Protocol):
    """What the leader lends a load manager: its periodic tasks, state that outlives a term.

    Implemented by :class:`~emubroker.loadbalance.leader.tasks.LoadBalancerLeader`.
    """

    @property
    def runner(self) -> SheddingRunner:
        """Carries out shedding decisions; holds both managers' unload counters."""
        ...

    @property
    def transfer_shedder(self) -> TransferShedder:
        """The extensible manager's shedder (its statistics outlive a term)."""
        ...

    @property
    def shedding_cycles(self) -> int:
        """Shedding cycles run since the broker started."""
        ...

    @property
    def split_checks(self) -> int:
        """Automatic split checks run since the broker started."""
        ...

    @property
    def bundles_split(self) -> int:
        """Bundles split automatically since the broker started."""
        ...

    async def write_bundle_data_periodically(self, term: LeaderTerm) -> None:
        """``LoadResourceQuotaUpdaterTask``: write the bundle data at its interval, forever."""
        ...

    async def sample_loads_periodically(self, aggregation: LeaderAggregation) -> None:
        """Sample every broker's ``BrokerLoadData`` at the report interval, forever."""
        ...

    async def check_splits(self, aggregation: LeaderAggregation) -> None:
        """Split the hot bundles (``checkNamespaceBundleSplit``), if splitting is wired."""
        ...


class LoadManager(Protocol):
    """What one of Pulsar's load managers does its own way (module docstring)."""

    @property
    def name(self) -> str:
        """``modular`` or ``extensible``: the trace rows' ``load_manager``."""
        ...

    # ---- the leader ------------------------------------------------------------------------

    async def run_term_task(self, leader: LeaderTasks, term: LeaderTerm) -> None:
        """The term's own periodic task besides aggregation and shedding (never returns)."""
        ...

    async def after_update(self, leader: LeaderTasks, aggregation: LeaderAggregation) -> None:
        """Run after every ``updateAll`` of the leader's load data."""
        ...

    async def wait_for_shedding(self, clock: Clock, deadline: float, interval: float) -> float:
        """Wait for the next shedding cycle; returns the deadline the next wait starts from."""
        ...

    async def shed(self, leader: LeaderTasks, term: LeaderTerm, conf: BrokerConfig) -> None:
        """Run one shedding cycle: decide, unload, log, trace, count."""
        ...

    def unload_counts(self, leader: LeaderTasks) -> tuple[int, int]:
        """``(unload_broker_count, unload_bundle_count)`` of this manager's counters."""
        ...

    def exported_counters(self, leader: LeaderTasks) -> ExportedCounters:
        """The counters ``/metrics`` shows for this manager (none before they mean anything)."""
        ...

    # ---- the owner of a bundle --------------------------------------------------------------

    def transfers(self, conf: BrokerConfig) -> bool:
        """Whether an unload with a destination broker is a *transfer* at the bundle's owner.

        A transfer (the extensible manager's multi-phase unload) hands the bundle to the
        destination before its clients are told, with the destination's address, so that
        they reconnect there without a lookup (``ownership.unloading`` rule 5).
        """
        ...

    # ---- placement -------------------------------------------------------------------------

    def hold_affinity(self, manager: ModularLoadManager, bundle: str, broker: str) -> None:
        """Keep a ``destinationBroker`` choice for the bundle's other lookups.

        Only a manager that preallocates (the modular one) keeps it.
        """
        ...

    def place(
        self,
        bundle: str,
        aggregation: LeaderAggregation,
        conf: BrokerConfig,
        extensible_strategy: LeastResourceUsageWithWeight,
    ) -> Placement:
        """Choose a broker for an unowned ``bundle`` from the leader's load data."""
        ...
