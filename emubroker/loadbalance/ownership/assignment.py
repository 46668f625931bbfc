"""Which broker gets an unowned bundle: Pulsar's placement behind the ``BrokerSelector`` seam.

The leader answers a lookup for a bundle nobody owns by naming a broker (spec §3.1 step 3).
:class:`LoadManagerSelector` answers as Pulsar's load manager does (§3.2):

1. Only registered brokers (``/loadbalance/brokers``) are candidates; none: no answer.
2. A one-shot affinity set by an unload with ``destinationBroker`` wins
   (``ModularLoadManagerWrapper.getLeastLoaded``'s ``bundleBrokerAffinityMap``): keyed by the
   bundle's range only, consumed by the next choice for any bundle of that range (§8.14). Unlike
   Pulsar, the destination is then preallocated like any choice (Pulsar returns it without, so
   the bundle's other clients, looking up before the new owner takes it, would have it placed
   again by load), and a destination that is no longer registered is skipped (Pulsar would
   redirect the client to a dead broker) and the bundle is placed by load.
3. The load manager ``loadManagerClassName`` names places it
   (:class:`~emubroker.loadbalance.load_manager.LoadManager`):

   - the modular manager (default): ``selectBrokerForAssignment`` on the leader's own
     :class:`~emubroker.loadbalance.strategies.modular_manager.ModularLoadManager` (the one its
     aggregation keeps up to date from the reports, no second copy): a bundle already preallocated
     keeps its broker; otherwise the whole ``selectBroker`` pipeline (isolation, topic-count filter,
     anti-affinity, even distribution, broker filters, ``loadBalancerLoadPlacementStrategy``,
     the overload fallback), then the bundle is preallocated to the choice. Preallocations
     count in the strategy's score (so a burst of lookups spreads) until the broker reports
     the bundle, and go with a broker that leaves (``updateAll`` clears them);
   - ``ExtensibleLoadManagerImpl``: ``selectAsync``'s filter pipeline and its
     ``LeastResourceUsageWithWeight`` over the brokers' ``BrokerLoadData``
     (:func:`~emubroker.loadbalance.strategies.extensible_placement.select_extensible_broker`); no
     preallocation (Pulsar's state channel holds an assigning bundle instead).

   The namespace isolation policies, anti-affinity groups and failure domains come from the
   broker's :class:`~emubroker.loadbalance.ownership.placement_policies.PlacementPolicyCache` (read
   once, kept current by a metadata watch): a choice reads no policy from the store.

Which load data: while this broker leads, its leader term's. A term that has not read the
reports yet (just elected) reads them first, so a new leader answers with what Pulsar's would
have (Pulsar's followers keep the load data too). A broker that decides without being the
leader (no live leader known, spec §3.1) or before its leader tasks are attached decides from
a one-off read of the reports, as a Pulsar follower would from its own copy; its choices are
not remembered. With no report readable there is no candidate and no answer (the lookup fails
with ``ServiceNotReady`` and the client retries, as Pulsar's does when no broker is available).

Every choice is logged with its reason and written to the load-balancer trace as a
``placement`` row (docs/load-balancer-trace.md).
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING, Protocol

from emubroker.loadbalance.load_manager import Placement
from emubroker.loadbalance.load_managers import load_manager
from emubroker.loadbalance.runtime.aggregation import LeaderAggregation
from emubroker.loadbalance.runtime.broker_registry import available_brokers
from emubroker.loadbalance.strategies.extensible_placement import LeastResourceUsageWithWeight
from emubroker.loadbalance.trace.records import placement_record

if TYPE_CHECKING:
    from collections.abc import Callable

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.strategies.isolation import PlacementPolicies
    from emubroker.loadbalance.trace.records import TraceSink
    from emubroker.metadata import MetadataStore
    from emubroker.naming import NamespaceBundle
    from protocol.clock import Clock

__all__ = ["BrokerSelector", "LoadManagerSelector", "Placement"]

log = logging.getLogger(__name__)


class BrokerSelector(Protocol):
    """The leader's choice of a broker for an unowned bundle."""

    async def select(self, bundle: NamespaceBundle) -> str | None:
        """The id (``host:webServicePort``) of the broker to own ``bundle``; None: none."""
        ...

    def set_affinity(self, bundle_range: str, broker_id: str) -> None:
        """Send the next bundle of this range to ``broker_id`` (unload ``destinationBroker``)."""
        ...


class LoadManagerSelector:
    """Pulsar's placement of unowned bundles (see the module docstring).

    Args:
        store: The metadata store (registered brokers, reports, policies).
        clock: Times the trace rows.
        broker_id: This broker's id (the trace rows' writer).
        config: The live configuration.
        policies: The current placement policies (``PlacementPolicyCache.policies``).
        seed: Seed of the extensible strategy's randomness.
    """

    def __init__(
        self,
        store: MetadataStore,
        clock: Clock,
        *,
        broker_id: str,
        config: Callable[[], BrokerConfig],
        policies: Callable[[], PlacementPolicies],
        seed: int = 0,
    ) -> None:
        self._store = store
        self._policies = policies
        self._clock = clock
        self._broker_id = broker_id
        self._config = config
        self._affinity: dict[str, str] = {}
        self._leader_term: Callable[[], LeaderAggregation | None] = lambda: None
        self._trace: TraceSink | None = None
        self._extensible = LeastResourceUsageWithWeight(random.Random(seed))
        self.last: Placement | None = None  # the latest choice (tests, debugging)

    def attach(
        self, leader_term: Callable[[], LeaderAggregation | None], trace: TraceSink | None = None
    ) -> None:
        """Use the leader term's load data while this broker leads, and trace the choices."""
        self._leader_term = leader_term
        self._trace = trace

    def set_affinity(self, bundle_range: str, broker_id: str) -> None:
        """See ``BrokerSelector.set_affinity`` (rule 2)."""
        self._affinity[bundle_range] = broker_id

    async def select(self, bundle: NamespaceBundle) -> str | None:
        """See ``BrokerSelector.select`` (module docstring).

        Raises:
            MetadataStoreError: The store failed.
        """
        brokers = await available_brokers(self._store)
        if not brokers:
            return None
        name = str(bundle)
        wanted = self._affinity.pop(bundle.bundle_range.name, None)
        if wanted is not None and wanted not in brokers:
            log.info("destination broker %s of %s is not available: placing by load", wanted, name)
            wanted = None
        conf = self._config()
        aggregation = self._leader_term()
        if aggregation is None:
            aggregation = LeaderAggregation(self._store, conf)
            await aggregation.refresh()
            aggregation.sample_broker_loads()
        elif aggregation.updates == 0:
            await aggregation.refresh()
        manager = aggregation.manager
        manager.conf = conf
        manager.policies = self._policies()
        # Pulsar reads the registry at each choice: a broker gone since the last report update
        # is no candidate; one not reported yet has no load data and is none either.
        registered = set(brokers)
        manager.available_brokers = [b for b in manager.available_brokers if b in registered]
        kind = load_manager(conf)
        if wanted is not None:
            # Held like any choice (a departure, module docstring): the bundle's other clients,
            # looking up before it is owned, get the same broker.
            kind.hold_affinity(manager, name, wanted)
            return self._decided(Placement(name, wanted, "affinity", "destinationBroker"))
        return self._decided(kind.place(name, aggregation, conf, self._extensible))

    def _decided(self, placement: Placement) -> str | None:
        self.last = placement
        if placement.broker is None:
            log.warning(
                "placement: no broker for %s (%s, %d candidates)",
                placement.bundle,
                placement.strategy,
                placement.candidates,
            )
            return None
        log.info(
            "placement: %s -> %s (%s, %s, %d candidates, score %.3f)",
            placement.bundle,
            placement.broker,
            placement.reason,
            placement.strategy,
            placement.candidates,
            placement.score,
        )
        if self._trace is not None:
            self._trace.append(
                placement_record(
                    placement.bundle,
                    placement.broker,
                    wall_ns=self._clock.wall_ns(),
                    monotonic=self._clock.now(),
                    broker=self._broker_id,
                    load_manager=load_manager(self._config()).name,
                    strategy=placement.strategy,
                    reason=placement.reason,
                    candidates=placement.candidates,
                    broker_load=placement.score,
                )
            )
        return placement.broker
