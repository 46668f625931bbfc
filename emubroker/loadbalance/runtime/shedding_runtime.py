"""Shedding decisions performed: unloads, log lines, trace rows, counters.

The decisions are the pure strategies' (``ModularLoadManager.do_load_shedding`` for the modular
shedders, ``TransferShedder.find_bundles_for_unloading`` for the extensible manager), taken by
the load manager's ``shed`` (``modular_kind``, ``extensible_kind``); this module carries them
out through an injected :class:`BundleUnloader`, Pulsar's admin call ``unloadNamespaceBundle(
namespace, range, destinationBroker)`` (modular) or its unload event on the service-unit state
channel (extensible). For every decision it writes:

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

from emubroker.loadbalance.model.extensible_data import UnloadCounter, UnloadDecision
from emubroker.loadbalance.trace.records import LoadBalancerTraceRecord, unload_record

if TYPE_CHECKING:
    from emubroker.loadbalance.model.data import LoadData
    from emubroker.loadbalance.model.extensible_data import Unload
    from emubroker.loadbalance.trace.records import TraceSink
    from protocol.clock import Clock

__all__ = [
    "BundleUnloader",
    "ModularUnloadCounters",
    "SheddingRunner",
    "bundle_numbers",
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


class ModularUnloadCounters(msgspec.Struct):
    """``unloadBrokerCount`` and ``unloadBundleCount`` of ``ModularLoadManagerImpl``.

    They live as long as the broker (Pulsar keeps them in the load manager, across leadership
    terms) and appear on ``/metrics`` once this broker ran a shedding cycle.
    """

    unload_broker_count: int = 0
    unload_bundle_count: int = 0
    cycles: int = 0  # cycles that got past the enabled and broker-count checks


def bundle_numbers(load_data: LoadData, bundle: str) -> dict[str, Any]:
    """The bundle's short-term rate and throughput and its topics (none when unknown)."""
    data = load_data.bundle_data.get(bundle)
    if data is None:
        return {}
    short = data.short_term_data
    return {
        "bundle_msg_rate": short.msg_rate_in + short.msg_rate_out,
        "bundle_throughput": short.msg_throughput_in + short.msg_throughput_out,
        "bundle_topics": data.topics,
    }


class SheddingRunner:
    """Carries out shedding decisions for the leader (the load manager's ``shed`` decides).

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
        self._clock = self.clock = clock
        self._broker_id = broker_id
        self._unload = unload
        self._trace = trace
        self.modular = ModularUnloadCounters()
        self.extensible = UnloadCounter()

    def record(
        self,
        decision: Unload | UnloadDecision,
        strategy: str,
        cycle: int,
        load_manager: str,
        numbers: dict[str, Any],
    ) -> None:
        """Log one decision with its numbers and write its ``shed`` row."""
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

    def append(self, record: LoadBalancerTraceRecord) -> None:
        """Write ``record`` to the trace, if there is one."""
        if self._trace is not None:
            self._trace.append(record)

    def row(self, **fields: Any) -> LoadBalancerTraceRecord:
        """A trace row stamped now by this broker."""
        return LoadBalancerTraceRecord(
            wall_ns=self._clock.wall_ns(),
            monotonic=self._clock.now(),
            broker=self._broker_id,
            **fields,
        )

    async def perform(self, strategy: str, unload: Unload) -> bool:
        """Unload one bundle; False (logged) when the unload failed."""
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
