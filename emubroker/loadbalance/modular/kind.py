"""Pulsar's ``ModularLoadManagerImpl`` as a ``LoadManager`` (``loadbalance.load_manager``).

The leader writes the top bundles' data every ``loadBalancerResourceQuotaUpdateIntervalMinutes``
(``LoadResourceQuotaUpdaterTask``), checks for bundles to split after every ``updateAll``
(``checkNamespaceBundleSplit``) and sheds with a fixed delay after each cycle
(``LoadSheddingTask``) through ``loadBalancerLoadSheddingStrategy``; placement runs the whole
``selectBroker`` pipeline and preallocates the bundle to its choice (spec §3.2).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final

from emubroker.loadbalance.load_manager import ExportedCounters, Placement
from emubroker.loadbalance.model.data import weighted_max_usage
from emubroker.loadbalance.runtime.shedding_runtime import bundle_numbers
from emubroker.loadbalance.strategies.factory import simple_name
from emubroker.loadbalance.strategies.isolation import namespace_of
from emubroker.loadbalance.strategies.placement import LeastLongTermMessageRate

if TYPE_CHECKING:
    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.load_manager import LeaderTasks, LeaderTerm
    from emubroker.loadbalance.model.extensible_data import Unload
    from emubroker.loadbalance.runtime.aggregation import LeaderAggregation
    from emubroker.loadbalance.runtime.shedding_runtime import SheddingRunner
    from emubroker.loadbalance.strategies.extensible_placement import LeastResourceUsageWithWeight
    from emubroker.loadbalance.strategies.modular_manager import ModularLoadManager
    from protocol.clock import Clock

__all__ = ["ModularKind"]


class ModularKind:
    """The modular load manager (module docstring)."""

    name: Final = "modular"

    async def run_term_task(self, leader: LeaderTasks, term: LeaderTerm) -> None:
        await leader.write_bundle_data_periodically(term)

    async def after_update(self, leader: LeaderTasks, aggregation: LeaderAggregation) -> None:
        await leader.check_splits(aggregation)

    async def wait_for_shedding(self, clock: Clock, deadline: float, interval: float) -> float:
        await clock.sleep(interval)  # LoadSheddingTask: a fixed delay after each run
        return deadline

    async def shed(self, leader: LeaderTasks, term: LeaderTerm, conf: BrokerConfig) -> None:
        """``doLoadShedding``: decide, then unload each bundle to its destination."""
        await shed(leader.runner, term.aggregation.manager, term.cycle)

    def unload_counts(self, leader: LeaderTasks) -> tuple[int, int]:
        counters = leader.runner.modular
        return counters.unload_broker_count, counters.unload_bundle_count

    def exported_counters(self, leader: LeaderTasks) -> ExportedCounters:
        counters = leader.runner.modular
        return ExportedCounters(
            modular=counters if counters.cycles > 0 else None,
            bundles_split=leader.bundles_split if leader.split_checks > 0 else None,
        )

    def transfers(self, conf: BrokerConfig) -> bool:
        return False  # the destination is the leader's preallocation: clients look up again

    def hold_affinity(self, manager: ModularLoadManager, bundle: str, broker: str) -> None:
        # A destination with no report yet has no load data to hold it in.
        if broker in manager.load_data.broker_data:
            manager.preallocate(bundle, broker)

    def place(
        self,
        bundle: str,
        aggregation: LeaderAggregation,
        conf: BrokerConfig,
        extensible_strategy: LeastResourceUsageWithWeight,
    ) -> Placement:
        """``selectBrokerForAssignment`` on the leader's own ``ModularLoadManager``."""
        manager = aggregation.manager
        strategy = simple_name(conf.loadBalancerLoadPlacementStrategy)
        if namespace_of(bundle) in conf.loadBalancerSheddingExcludedNamespaces:
            strategy = "RoundRobinBrokerSelector"
        preallocated = manager.preallocated_bundle_to_broker.get(bundle)
        if preallocated is not None:
            return Placement(bundle, preallocated, "preallocated", strategy)
        manager.last_candidates.clear()
        broker = manager.select_broker_for_assignment(bundle)
        score = -1.0
        data = manager.load_data.broker_data.get(broker) if broker is not None else None
        if data is not None:
            if strategy == "LeastLongTermMessageRate":
                score = LeastLongTermMessageRate.score(data, conf)
                if math.isfinite(score):  # as it was before this bundle's preallocation
                    rates = manager.load_data.bundle_data[bundle].long_term_data
                    score -= rates.msg_rate_in + rates.msg_rate_out
            else:
                score = weighted_max_usage(data.local_data, conf)
        return Placement(
            bundle,
            broker,
            "strategy",
            strategy,
            candidates=len(manager.last_candidates),
            score=score,
        )


async def shed(runner: SheddingRunner, manager: ModularLoadManager, cycle: int) -> list[Unload]:
    """One modular shedding cycle; returns the unloads that went through."""
    conf = manager.conf
    strategy = manager.shedding
    decisions = manager.do_load_shedding(runner.clock.wall_ms())
    if not (conf.loadBalancerEnabled and conf.loadBalancerSheddingEnabled):
        return []
    if len(manager.available_brokers) <= 1:
        return []  # Pulsar returns before updating its unload metrics
    runner.modular.cycles += 1
    name = simple_name(conf.loadBalancerLoadSheddingStrategy)
    done: list[Unload] = []
    for decision in decisions:
        numbers = strategy.explain(
            manager.load_data, conf, decision.source_broker, decision.dest_broker or ""
        ) | bundle_numbers(manager.load_data, decision.service_unit)
        runner.record(decision, name, cycle, "modular", numbers)
        if await runner.perform(name, decision):
            done.append(decision)
            runner.modular.unload_bundle_count += 1
        else:
            manager.load_data.recently_unloaded_bundles.pop(decision.service_unit, None)
    runner.modular.unload_broker_count += len({u.source_broker for u in done})
    return done
