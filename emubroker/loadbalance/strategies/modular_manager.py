"""The leader's side of Pulsar's ``ModularLoadManagerImpl``, without I/O (spec §2.4, §3.2, §4.1).

:class:`ModularLoadManager` holds what Pulsar's leader holds in memory (``LoadData``,
preallocations, the bundle-range cache, the strategies) and turns inputs into decisions:

- :meth:`update_all`: new broker reports in; bundle time averages and broker time averages
  updated as ``updateAll()`` does; returns what the caller should delete from the store;
- :meth:`select_broker_for_assignment`: a broker for an unowned bundle (with preallocation);
- :meth:`do_load_shedding`: this cycle's unloads, each with its destination broker;
- :meth:`check_namespace_bundle_split`: bundles to split, with the unload flag;
- :meth:`bundles_to_write`: which bundle data the 15-minute writer stores (top K per broker).

The async leader loop (issue 14's cluster part) reads the store, calls these with the clock's
time and applies the results; nothing here sleeps, reads a clock or touches the store.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, NamedTuple

from emubroker.loadbalance.model.data import (
    BrokerData,
    BundleData,
    LoadData,
    TimeAverageBrokerData,
    bundle_namespace,
    default_bundle_stats,
)
from emubroker.loadbalance.model.extensible_data import Unload, partition_sort
from emubroker.loadbalance.model.javaorder import hash_map_order
from emubroker.loadbalance.strategies.factory import create_modular_strategies, simple_name
from emubroker.loadbalance.strategies.isolation import (
    BundleRangeCache,
    PlacementPolicies,
    bundle_range_of,
    namespace_of,
)
from emubroker.loadbalance.strategies.placement import RoundRobinBrokerSelector
from emubroker.loadbalance.strategies.selection import (
    apply_namespace_policies,
    select_broker,
    should_anti_affinity_namespace_unload,
)
from emubroker.loadbalance.strategies.split import (
    SplitDecision,
    can_split_bundle,
    find_bundles_to_split,
)
from emubroker.naming import BundleRange

if TYPE_CHECKING:
    import random
    from collections.abc import Callable, Collection, Mapping

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.model.data import LocalBrokerData

__all__ = ["ModularLoadManager", "SplitDecision", "UpdateResult"]

log = logging.getLogger(__name__)

_MINUTE_MS = 60_000


class UpdateResult(NamedTuple):
    """What :meth:`ModularLoadManager.update_all` asks the caller to remove from the store.

    Attributes:
        dead_brokers: Brokers gone since the last update (their ``broker-time-average`` node).
        removed_bundles: Bundles no broker reports any more (their ``bundle-data`` node).
    """

    dead_brokers: list[str]
    removed_bundles: list[str]


class ModularLoadManager:
    """Pure state and decisions of the modular load manager's leader.

    Args:
        conf: The configuration (replace :attr:`conf` to apply a dynamic change).
        policies: Isolation policies, anti-affinity groups and failure domains.
        stored_bundle_data: Bundle -> data the store holds for it (``/loadbalance/bundle-data``),
            consulted for bundles seen for the first time; default data otherwise.
        rng: Randomness of the placement strategy.
    """

    def __init__(
        self,
        conf: BrokerConfig,
        *,
        policies: PlacementPolicies | None = None,
        stored_bundle_data: Callable[[str], BundleData | None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.conf = conf
        self.policies = policies if policies is not None else PlacementPolicies()
        self.load_data = LoadData()
        self.placement, self.shedding = create_modular_strategies(conf, rng)
        self.round_robin = RoundRobinBrokerSelector()
        self.ranges = BundleRangeCache()
        self.preallocated_bundle_to_broker: dict[str, str] = {}
        self.available_brokers: list[str] = []
        self.last_candidates: list[str] = []  # what the latest selection chose among
        self._known_brokers: set[str] = set()
        self._stored_bundle_data = stored_bundle_data or (lambda _bundle: None)

    def bundle_data_or_default(self, bundle: str) -> BundleData:
        """Stored data for ``bundle``, else 10/1000-sample averages at the default rates."""
        stored = self._stored_bundle_data(bundle)
        if stored is not None:
            return stored
        return BundleData.initial(default_stats=default_bundle_stats())

    def update_all(
        self,
        reports: Mapping[str, LocalBrokerData],
        *,
        leader_owned_bundles: Collection[str] = (),
    ) -> UpdateResult:
        """Take the current broker reports (``handleDataNotification`` + ``updateAll``).

        Args:
            reports: Broker id -> its report, for every registered broker.
            leader_owned_bundles: Bundles the leader broker itself owns. Pulsar drops a
                preallocation unless the leader owns the bundle (it asks its own namespace
                service), so preallocations elsewhere last until the next update.
        """
        active = list(reports)
        self.available_brokers = active
        broker_data = self.load_data.broker_data
        for broker in [b for b in broker_data if b not in reports]:
            for bundle in [k for k, v in self.preallocated_bundle_to_broker.items() if v == broker]:
                del self.preallocated_bundle_to_broker[bundle]
        dead = sorted(self._known_brokers.difference(active))
        self._known_brokers = set(active)
        self.placement.on_active_brokers_change(active)
        self.shedding.on_active_brokers_change(active)
        for broker in dead:
            self.ranges.remove_broker(broker)
        for broker, report in reports.items():
            existing = broker_data.get(broker)
            if existing is None:
                broker_data[broker] = BrokerData(local_data=report)
            else:
                existing.local_data = report
        for broker in [b for b in broker_data if b not in reports]:
            del broker_data[broker]
        return UpdateResult(
            dead, self.update_bundle_data(leader_owned_bundles=leader_owned_bundles)
        )

    def update_bundle_data(self, *, leader_owned_bundles: Collection[str] = ()) -> list[str]:
        """Add each reported bundle's latest stats as a sample (``updateBundleData``).

        Also drops preallocations now reported (or not owned by the leader), recomputes each
        broker's time averages, and forgets bundles no broker reports.

        Returns:
            The bundles forgotten (the caller deletes their ``bundle-data`` node).
        """
        leader_owned = set(leader_owned_bundles)
        bundle_data = self.load_data.bundle_data
        active: set[str] = set()
        default_stats = default_bundle_stats()
        for broker, data in self.load_data.brokers_in_java_order():
            stats_map = data.local_data.last_stats
            for bundle, stats in stats_map.items():
                active.add(bundle)
                known = bundle_data.get(bundle)
                if known is None:
                    known = bundle_data[bundle] = self.bundle_data_or_default(bundle)
                known.update(stats)
            preallocated = data.preallocated_bundle_data
            for bundle in preallocated:
                self.preallocated_bundle_to_broker.pop(bundle, None)
            for bundle in list(preallocated):
                if bundle not in leader_owned or (
                    bundle in data.local_data.bundles and bundle in bundle_data
                ):
                    del preallocated[bundle]
            data.time_average_data = TimeAverageBrokerData.of(stats_map, bundle_data, default_stats)
            self.ranges.reload_from_bundles(broker, [*stats_map, *preallocated])
        removed = [b for b in bundle_data if b not in active]
        for bundle in removed:
            del bundle_data[bundle]
        return removed

    def select_broker_for_assignment(
        self, bundle: str, *, non_persistent: bool = False
    ) -> str | None:
        """A broker for an unowned ``bundle``; preallocated to it until it reports the bundle."""
        preallocated = self.preallocated_bundle_to_broker.get(bundle)
        if preallocated is not None:
            return preallocated
        broker = self.select_broker(bundle, non_persistent=non_persistent)
        if broker is not None:
            self.preallocate(bundle, broker)
        return broker

    def preallocate(self, bundle: str, broker: str) -> None:
        """``bundle`` is ``broker``'s until its report has it (Pulsar's ``preallocateBundle``).

        Every lookup meanwhile gets the same answer. A broker without load data yet is not
        preallocated to (its first report would not clear it).
        """
        broker_data = self.load_data.broker_data.get(broker)
        if broker_data is None:
            return
        data = self.load_data.bundle_data.setdefault(bundle, self.bundle_data_or_default(bundle))
        broker_data.preallocated_bundle_data[bundle] = data
        self.preallocated_bundle_to_broker[bundle] = broker
        self.ranges.add(broker, namespace_of(bundle), bundle_range_of(bundle))

    def select_broker(self, bundle: str, *, non_persistent: bool = False) -> str | None:
        """The selection pipeline alone (no preallocation); a shedding destination."""
        data = self.load_data.bundle_data.setdefault(bundle, self.bundle_data_or_default(bundle))
        return select_broker(
            bundle,
            data,
            self.load_data,
            self.available_brokers,
            self.conf,
            placement=self.placement,
            round_robin=self.round_robin,
            policies=self.policies,
            ranges=self.ranges,
            non_persistent=non_persistent,
            considered=self.last_candidates,
        )

    def do_load_shedding(self, now: int) -> list[Unload]:
        """This cycle's unloads, each with a destination (``doLoadShedding``).

        Bundles are recorded as recently unloaded at ``now`` (ms); grace-period expiries are
        removed first. Nothing happens with the load balancer or shedding disabled, or with at
        most one broker.
        """
        conf = self.conf
        if not (conf.loadBalancerEnabled and conf.loadBalancerSheddingEnabled):
            return []
        if len(self.available_brokers) <= 1:
            log.info("Only 1 broker available: no load shedding will be performed")
            return []
        recent = self.load_data.recently_unloaded_bundles
        expiry = now - conf.loadBalancerSheddingGracePeriodMinutes * _MINUTE_MS
        for bundle in [b for b, at in recent.items() if at < expiry]:
            del recent[bundle]
        strategy = simple_name(conf.loadBalancerLoadSheddingStrategy)
        unloads: list[Unload] = []
        for broker, bundles in self.shedding.find_bundles_for_unloading(
            self.load_data, conf
        ).items():
            for bundle in bundles:
                if not self._may_unload(bundle, broker):
                    continue
                destination = self.select_broker(bundle)
                if destination is None or destination == broker:
                    log.info("[%s] no other broker for %s of %s", strategy, bundle, broker)
                    continue
                log.info(
                    "[%s] Unloading bundle: %s from broker %s to dest broker %s",
                    strategy,
                    bundle,
                    broker,
                    destination,
                )
                unloads.append(Unload(broker, bundle, destination))
                recent[bundle] = now
        return unloads

    def _may_unload(self, bundle: str, broker: str) -> bool:
        if namespace_of(bundle) in self.conf.loadBalancerSheddingExcludedNamespaces:
            return False
        return self._policies_allow_unload(bundle, broker)

    def _policies_allow_unload(self, bundle: str, broker: str) -> bool:
        # shouldNamespacePoliciesUnload and shouldAntiAffinityNamespaceUnload.
        namespace = namespace_of(bundle)
        candidates = apply_namespace_policies(
            bundle, self.available_brokers, self.load_data, self.policies
        )
        if not [b for b in candidates if b != broker]:
            return False  # only the current broker satisfies the namespace policies
        if self.policies.anti_affinity_group(namespace) is None:
            return True
        counts = self.policies.anti_affinity_counts(namespace, self.ranges)
        return should_anti_affinity_namespace_unload(broker, candidates, counts)

    def check_namespace_bundle_split(
        self, bundle_count: Callable[[str], int]
    ) -> list[SplitDecision]:
        """Bundles to split now (``checkNamespaceBundleSplit``), removed from the load data.

        Args:
            bundle_count: Namespace -> its current number of bundles.
        """
        conf = self.conf
        if not conf.loadBalancerAutoBundleSplitEnabled or len(self._known_brokers) <= 1:
            return []
        decisions: list[SplitDecision] = []
        for bundle, broker in find_bundles_to_split(self.load_data, conf, bundle_count).items():
            if not can_split_bundle(BundleRange.parse(bundle_range_of(bundle))):
                continue
            self.load_data.bundle_data.pop(bundle, None)
            # The split path checks the policies but not the shedding exclusion.
            unload = conf.loadBalancerAutoUnloadSplitBundlesEnabled and self._policies_allow_unload(
                bundle, broker
            )
            log.info("Load-manager splitting bundle %s and unloading %s", bundle, unload)
            decisions.append(SplitDecision(bundle, broker, unload))
        return decisions

    def bundles_to_write(self) -> list[str]:
        """The bundles whose data the periodic writer stores (``selectTopKBundle``).

        All but shedding-excluded namespaces when ``loadBalancerMaxNumberOfBundlesInBundle
        LoadReport`` is not positive; else the ``K × brokers`` largest by ``BundleData``
        ranking.
        """
        excluded = self.conf.loadBalancerSheddingExcludedNamespaces
        bundle_data = self.load_data.bundle_data
        entries = [
            (b, bundle_data[b])
            for b in hash_map_order(bundle_data, concurrent=True)
            if bundle_namespace(b) not in excluded
        ]
        k = self.conf.loadBalancerMaxNumberOfBundlesInBundleLoadReport
        if k <= 0:
            return [b for b, _ in entries]
        count = min(k * max(1, len(self.load_data.broker_data)), len(entries))
        if count == 0:
            return []
        partition_sort(entries, count, lambda a, b: a[1].compare_to(b[1]))
        return [b for b, _ in entries[:count]]
