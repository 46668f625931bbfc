"""Pulsar's ``ExtensibleLoadManagerImpl`` as a ``LoadManager`` (``loadbalance.load_manager``).

The leader samples each broker's ``BrokerLoadData`` moving averages every
``loadBalancerReportUpdateMinIntervalMillis``, writes no bundle data (the extensible manager's
wrapper makes that a no-op), splits nothing automatically here, and sheds at a fixed rate
(``UnloadScheduler``) through TransferShedder, counting with ``UnloadCounter``. Placement is
``selectAsync``'s filter pipeline and its ``LeastResourceUsageWithWeight`` over the brokers'
``BrokerLoadData``, without preallocation (Pulsar's state channel holds an assigning bundle
instead). Spec §4.7.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from emubroker.loadbalance.load_manager import ExportedCounters, Placement
from emubroker.loadbalance.model.extensible_data import Label, LoadManagerContext, Reason
from emubroker.loadbalance.runtime.shedding_runtime import bundle_numbers
from emubroker.loadbalance.strategies.extensible_placement import select_extensible_broker
from emubroker.loadbalance.strategies.isolation import namespace_of

if TYPE_CHECKING:
    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.load_manager import LeaderTasks, LeaderTerm
    from emubroker.loadbalance.model.extensible_data import UnloadDecision
    from emubroker.loadbalance.runtime.aggregation import LeaderAggregation
    from emubroker.loadbalance.runtime.shedding_runtime import SheddingRunner
    from emubroker.loadbalance.strategies.extensible_placement import LeastResourceUsageWithWeight
    from emubroker.loadbalance.strategies.modular_manager import ModularLoadManager
    from emubroker.loadbalance.strategies.transfer_shedder import TransferShedder
    from protocol.clock import Clock

__all__ = ["ExtensibleKind"]

log = logging.getLogger(__name__)

_MINUTE_MS = 60_000
STRATEGY: Final = "TransferShedder"


class ExtensibleKind:
    """The extensible load manager (module docstring)."""

    name: Final = "extensible"

    async def run_term_task(self, leader: LeaderTasks, term: LeaderTerm) -> None:
        await leader.sample_loads_periodically(term.aggregation)

    async def after_update(self, leader: LeaderTasks, aggregation: LeaderAggregation) -> None:
        return  # no automatic split check

    async def wait_for_shedding(self, clock: Clock, deadline: float, interval: float) -> float:
        deadline += interval  # UnloadScheduler: a fixed rate
        await clock.sleep_until(deadline)
        return deadline

    async def shed(self, leader: LeaderTasks, term: LeaderTerm, conf: BrokerConfig) -> None:
        """``UnloadScheduler.execute``: TransferShedder's decisions, each unloaded."""
        await shed(
            leader.runner,
            leader.transfer_shedder,
            term.aggregation,
            conf,
            term.cycle,
            term.recently_unloaded_bundles,
            term.recently_unloaded_brokers,
        )

    def unload_counts(self, leader: LeaderTasks) -> tuple[int, int]:
        counter = leader.runner.extensible
        return counter.unload_broker_count, counter.unload_bundle_count

    def exported_counters(self, leader: LeaderTasks) -> ExportedCounters:
        if leader.shedding_cycles == 0:
            return ExportedCounters()
        return ExportedCounters(extensible=leader.runner.extensible)

    def transfers(self, conf: BrokerConfig) -> bool:
        # ServiceUnitStateChannelImpl: with the multi-phase unload the clients are disconnected
        # once the destination owns the bundle, with its address; without it, at release.
        return conf.loadBalancerMultiPhaseBundleUnload

    def hold_affinity(self, manager: ModularLoadManager, bundle: str, broker: str) -> None:
        return  # no preallocation (module docstring)

    def place(
        self,
        bundle: str,
        aggregation: LeaderAggregation,
        conf: BrokerConfig,
        extensible_strategy: LeastResourceUsageWithWeight,
    ) -> Placement:
        """``selectAsync`` over the brokers' ``BrokerLoadData``."""
        manager = aggregation.manager
        context = LoadManagerContext(conf, broker_load_data_store=aggregation.broker_loads)
        considered: list[str] = []
        broker = select_extensible_broker(
            bundle,
            manager.available_brokers,
            context,
            load_data=manager.load_data,
            policies=manager.policies,
            ranges=manager.ranges,
            strategy=extensible_strategy,
            round_robin=manager.round_robin,
            considered=considered,
        )
        load = aggregation.broker_loads.get(broker) if broker is not None else None
        excluded = namespace_of(bundle) in conf.loadBalancerSheddingExcludedNamespaces
        return Placement(
            bundle,
            broker,
            "strategy",
            "RoundRobinBrokerSelector" if excluded else "LeastResourceUsageWithWeight",
            candidates=len(considered),
            score=load.weighted_max_ema if load is not None else -1.0,
        )


async def shed(
    runner: SheddingRunner,
    shedder: TransferShedder,
    aggregation: LeaderAggregation,
    conf: BrokerConfig,
    cycle: int,
    recently_unloaded_bundles: dict[str, int],
    recently_unloaded_brokers: dict[str, int],
) -> list[UnloadDecision]:
    """One extensible shedding cycle; returns the decisions whose unload went through."""
    if not (conf.loadBalancerEnabled and conf.loadBalancerSheddingEnabled):
        return []
    now = runner.clock.wall_ms()
    expiry = now - conf.loadBalancerSheddingGracePeriodMinutes * _MINUTE_MS
    for bundle in [b for b, at in recently_unloaded_bundles.items() if at < expiry]:
        del recently_unloaded_bundles[bundle]
    brokers = aggregation.manager.available_brokers
    if len(brokers) <= 1:
        log.info("Only 1 broker available: no load shedding will be performed. Skipping.")
        return []
    counter = runner.extensible
    skips_before = dict(counter.breakdown_counters[Label.Skip])
    context = LoadManagerContext(
        broker_configuration=conf,
        broker_load_data_store=aggregation.broker_loads,
        top_bundle_load_data_store=aggregation.top_bundles,
        available_brokers=frozenset(brokers),
        now=now,
    )
    decisions = shedder.find_bundles_for_unloading(
        context, recently_unloaded_bundles, recently_unloaded_brokers
    )
    if not decisions:
        _record_skip(runner, skips_before, cycle, shedder)
        return []
    done: list[UnloadDecision] = []
    for decision in sorted(
        decisions, key=lambda d: (d.unload.source_broker, d.unload.service_unit)
    ):
        unload = decision.unload
        numbers = shedder.explain(decision, context) | bundle_numbers(
            aggregation.manager.load_data, unload.service_unit
        )
        runner.record(decision, STRATEGY, cycle, "extensible", numbers)
        if await runner.perform(STRATEGY, unload):
            counter.update(Label.Success, decision.reason)
            recently_unloaded_bundles[unload.service_unit] = now
            recently_unloaded_brokers[unload.source_broker] = now
            done.append(decision)
        else:
            counter.update(Label.Failure, Reason.Unknown)
    counter.unload_broker_count += len({d.unload.source_broker for d in done})
    return done


def _record_skip(
    runner: SheddingRunner, before: dict[Reason, int], cycle: int, shedder: TransferShedder
) -> None:
    after = runner.extensible.breakdown_counters[Label.Skip]
    reason = next((r for r, n in after.items() if n > before.get(r, 0)), None)
    if reason is None:
        return  # a failure, already logged by the shedder
    log.info("[TransferShedder] cycle %d: no unload (%s)", cycle, reason)
    runner.append(
        runner.row(
            event="shed",
            load_manager="extensible",
            cycle=cycle,
            strategy=STRATEGY,
            label=str(Label.Skip),
            reason=str(reason),
            cluster_load=shedder.stats.avg,
        )
    )
