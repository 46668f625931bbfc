"""One shedding cycle of the leader, performed: decisions, unloads, log lines, trace rows, counters.

The decisions are the pure strategies' (``ModularLoadManager.do_load_shedding`` for the modular
shedders, ``TransferShedder.find_bundles_for_unloading`` for the extensible manager); this module
carries them out through an injected :class:`BundleUnloader`, Pulsar's admin call
``unloadNamespaceBundle(namespace, range, destinationBroker)`` (modular) or its unload event on
the service-unit state channel (extensible). For every decision it writes:

- a log line naming the strategy, the bundle, both brokers, the reason and the numbers;
- a ``shed`` row in the load-balancer trace (docs/load-balancer-trace.md);
- Pulsar's unload counters: ``pulsar_lb_unload_bundle_total`` counts bundles unloaded and
  ``pulsar_lb_unload_broker_total`` brokers that gave up at least one bundle in a cycle
  (``ModularLoadManagerImpl.doLoadShedding``; ``UnloadScheduler`` with its ``UnloadCounter``
  breakdown for the extensible manager).

As in Pulsar, a bundle counts as recently unloaded (and so escapes the strategies for
``loadBalancerSheddingGracePeriodMinutes``) only once its unload went through; a failed unload
is logged and the cycle carries on.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from emubroker.loadbalance.avg_shedder import AvgShedder
from emubroker.loadbalance.extensible_data import (
    Label,
    LoadManagerContext,
    Reason,
    UnloadCounter,
    UnloadDecision,
)
from emubroker.loadbalance.shed_explain import bundle_numbers, explain
from emubroker.loadbalance.strategies import simple_name
from emubroker.loadbalance.trace import LoadBalancerTraceRecord, unload_record

if TYPE_CHECKING:
    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.aggregation import LeaderAggregation
    from emubroker.loadbalance.extensible_data import Unload
    from emubroker.loadbalance.modular import ModularLoadManager
    from emubroker.loadbalance.transfer_shedder import TransferShedder
    from protocol.clock import Clock

__all__ = [
    "BundleUnloader",
    "ModularUnloadCounters",
    "SheddingRunner",
    "TraceSink",
]

log = logging.getLogger(__name__)

_MINUTE_MS = 60_000


class BundleUnloader(Protocol):
    """Unload a bundle from its owner, optionally naming the broker that should take it.

    ``bundle`` is ``tenant/namespace/0x..._0x...``. Returns once the owner released it; raises
    if it could not be unloaded (the leader logs it and carries on).
    """

    async def __call__(self, bundle: str, destination_broker: str | None = None) -> None:
        """Unload ``bundle``; the next owner is ``destination_broker`` when one is named."""
        ...


class TraceSink(Protocol):
    """Where the trace rows go (``LoadBalancerTraceSink``)."""

    def append(self, record: LoadBalancerTraceRecord) -> None:
        """Buffer one row."""
        ...


class ModularUnloadCounters(msgspec.Struct):
    """``unloadBrokerCount`` and ``unloadBundleCount`` of ``ModularLoadManagerImpl``.

    They live as long as the broker (Pulsar keeps them in the load manager, across leadership
    terms) and appear on ``/metrics`` once this broker ran a shedding cycle.
    """

    unload_broker_count: int = 0
    unload_bundle_count: int = 0
    cycles: int = 0  # cycles that got past the enabled and broker-count checks


class SheddingRunner:
    """Carries out shedding decisions for the leader.

    Args:
        clock: The leader's clock (wall milliseconds stamp the unloads, as Pulsar's
            ``System.currentTimeMillis()``).
        broker_id: The leader's id (the trace rows' ``broker``).
        unload: Performs one unload.
        trace: Where ``shed`` rows go, if anywhere.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        broker_id: str,
        unload: BundleUnloader,
        trace: TraceSink | None = None,
    ) -> None:
        self._clock = clock
        self._broker_id = broker_id
        self._unload = unload
        self._trace = trace
        self.modular = ModularUnloadCounters()
        self.extensible = UnloadCounter()

    # ---- the modular load manager ----------------------------------------------------------

    async def modular_cycle(self, manager: ModularLoadManager, cycle: int) -> list[Unload]:
        """``doLoadShedding``: decide, then unload each bundle to its destination.

        Returns:
            The unloads that went through.
        """
        conf = manager.conf
        strategy = manager.shedding
        avg_hits = (
            (dict(strategy.hit_count_high), dict(strategy.hit_count_low))
            if isinstance(strategy, AvgShedder)
            else ({}, {})
        )
        now = self._clock.wall_ms()
        decisions = manager.do_load_shedding(now)
        if not (conf.loadBalancerEnabled and conf.loadBalancerSheddingEnabled):
            return []
        if len(manager.available_brokers) <= 1:
            return []  # Pulsar returns before updating its unload metrics
        self.modular.cycles += 1
        name = simple_name(conf.loadBalancerLoadSheddingStrategy)
        done: list[Unload] = []
        for decision in decisions:
            numbers = explain(
                strategy,
                manager.load_data,
                conf,
                decision.source_broker,
                decision.dest_broker or "",
                avg_hits=avg_hits,
            ) | bundle_numbers(manager.load_data, decision.service_unit)
            self._record(decision, name, cycle, "modular", numbers)
            if await self._perform(name, decision):
                done.append(decision)
                self.modular.unload_bundle_count += 1
            else:
                manager.load_data.recently_unloaded_bundles.pop(decision.service_unit, None)
        self.modular.unload_broker_count += len({u.source_broker for u in done})
        return done

    # ---- the extensible load manager -------------------------------------------------------

    async def extensible_cycle(
        self,
        shedder: TransferShedder,
        aggregation: LeaderAggregation,
        conf: BrokerConfig,
        cycle: int,
        recently_unloaded_bundles: dict[str, int],
        recently_unloaded_brokers: dict[str, int],
    ) -> list[UnloadDecision]:
        """``UnloadScheduler.execute``: TransferShedder's decisions, each unloaded (transferred).

        Returns:
            The decisions whose unload went through.
        """
        if not (conf.loadBalancerEnabled and conf.loadBalancerSheddingEnabled):
            return []
        now = self._clock.wall_ms()
        expiry = now - conf.loadBalancerSheddingGracePeriodMinutes * _MINUTE_MS
        for bundle in [b for b, at in recently_unloaded_bundles.items() if at < expiry]:
            del recently_unloaded_bundles[bundle]
        brokers = aggregation.manager.available_brokers
        if len(brokers) <= 1:
            log.info("Only 1 broker available: no load shedding will be performed. Skipping.")
            return []
        counter = self.extensible
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
        name = "TransferShedder"
        if not decisions:
            self._record_skip(skips_before, cycle, shedder)
            return []
        done: list[UnloadDecision] = []
        loads = aggregation.broker_loads
        for decision in sorted(
            decisions, key=lambda d: (d.unload.source_broker, d.unload.service_unit)
        ):
            unload = decision.unload
            source = loads.get(unload.source_broker)
            dest = loads.get(unload.dest_broker or "")
            numbers: dict[str, Any] = {
                "broker_load": source.weighted_max_ema if source else -1.0,
                "dest_load": dest.weighted_max_ema if dest else -1.0,
                "cluster_load": shedder.stats.avg,
                "threshold": conf.loadBalancerBrokerLoadTargetStd,
            } | bundle_numbers(aggregation.manager.load_data, unload.service_unit)
            self._record(decision, name, cycle, "extensible", numbers)
            if await self._perform(name, unload):
                counter.update(Label.Success, decision.reason)
                recently_unloaded_bundles[unload.service_unit] = now
                recently_unloaded_brokers[unload.source_broker] = now
                done.append(decision)
            else:
                counter.update(Label.Failure, Reason.Unknown)
        counter.unload_broker_count += len({d.unload.source_broker for d in done})
        return done

    def _record_skip(self, before: dict[Reason, int], cycle: int, shedder: TransferShedder) -> None:
        after = self.extensible.breakdown_counters[Label.Skip]
        reason = next((r for r, n in after.items() if n > before.get(r, 0)), None)
        if reason is None:
            return  # a failure, already logged by the shedder
        log.info("[TransferShedder] cycle %d: no unload (%s)", cycle, reason)
        if self._trace is not None:
            self._trace.append(
                self._row(
                    event="shed",
                    load_manager="extensible",
                    cycle=cycle,
                    strategy="TransferShedder",
                    label=str(Label.Skip),
                    reason=str(reason),
                    cluster_load=shedder.stats.avg,
                )
            )

    # ---- shared ----------------------------------------------------------------------------

    def _record(
        self,
        decision: Unload | UnloadDecision,
        strategy: str,
        cycle: int,
        load_manager: str,
        numbers: dict[str, Any],
    ) -> None:
        # A modular decision's reason comes with its numbers; TransferShedder's with the decision
        # (and unload_record copies it from there).
        fields = dict(numbers)
        if isinstance(decision, UnloadDecision):
            unload, reason = decision.unload, str(decision.reason)
        else:
            unload, reason = decision, str(fields.pop("reason", ""))
        shown = ", ".join(
            f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}"
            for key, value in fields.items()
        )
        log.info(
            "[%s] cycle %d: unloading %s from %s to %s: %s (%s)",
            strategy,
            cycle,
            unload.service_unit,
            unload.source_broker,
            unload.dest_broker or "(next lookup)",
            reason or "no reason",
            shown,
        )
        if self._trace is None:
            return
        if not isinstance(decision, UnloadDecision):
            fields["reason"] = reason
        self._trace.append(
            unload_record(
                decision,
                event="shed",
                wall_ns=self._clock.wall_ns(),
                monotonic=self._clock.now(),
                broker=self._broker_id,
                cycle=cycle,
                strategy=strategy,
                load_manager=load_manager,
                **fields,
            )
        )

    def _row(self, **fields: Any) -> LoadBalancerTraceRecord:
        return LoadBalancerTraceRecord(
            wall_ns=self._clock.wall_ns(),
            monotonic=self._clock.now(),
            broker=self._broker_id,
            **fields,
        )

    async def _perform(self, strategy: str, unload: Unload) -> bool:
        try:
            await self._unload(unload.service_unit, unload.dest_broker)
        except Exception as exc:
            # The unload belongs to another subsystem (the owner's bundle release); a failure
            # there is Pulsar's "Error when trying to perform load shedding", logged, not fatal.
            log.warning(
                "[%s] unloading %s from %s failed: %s",
                strategy,
                unload.service_unit,
                unload.source_broker,
                exc,
            )
            return False
        return True
