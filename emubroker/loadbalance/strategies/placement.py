"""The modular load manager's placement strategies (spec §3.3, §3.4), as pure objects.

``select_broker(candidates, bundle_data, load_data, conf)`` returns the chosen broker id, or
``None`` when there is no candidate. Where Pulsar picks at random among equals, the strategy
draws from its own ``random.Random`` (seeded, so runs are reproducible).

Candidates are iterated in the order given; an unordered ``set``/``frozenset`` is iterated in
the order Java's ``HashSet`` would use, so a result never depends on Python's string hashing.
"""

from __future__ import annotations

import logging
import math
import random
from typing import TYPE_CHECKING, Protocol

from emubroker.loadbalance.model.data import weighted_max_usage
from emubroker.loadbalance.model.javaorder import hash_map_order

if TYPE_CHECKING:
    from collections.abc import Collection

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.model.data import BrokerData, BundleData, LoadData

__all__ = [
    "LeastLongTermMessageRate",
    "LeastResourceUsageWithWeight",
    "ModularLoadManagerStrategy",
    "RoundRobinBrokerSelector",
    "in_java_order",
]

log = logging.getLogger(__name__)

_INT_MAX = 2**31 - 1


def in_java_order(candidates: Collection[str]) -> list[str]:
    """``candidates`` as a list: given order, or Java ``HashSet`` order for an unordered set."""
    if isinstance(candidates, (set, frozenset)):
        return hash_map_order(candidates)
    return list(candidates)


class ModularLoadManagerStrategy(Protocol):
    """Pulsar's ``ModularLoadManagerStrategy``."""

    def select_broker(
        self,
        candidates: Collection[str],
        bundle_to_assign: BundleData,
        load_data: LoadData,
        conf: BrokerConfig,
    ) -> str | None:
        """The broker to assign the bundle to, or ``None`` if there is none."""
        ...

    def on_active_brokers_change(self, active_brokers: Collection[str]) -> None:
        """Forget brokers that left the cluster."""
        ...


def _seeded(rng: random.Random | None) -> random.Random:
    return rng if rng is not None else random.Random(0)


class LeastLongTermMessageRate:
    """The default: the broker with the least long-term message rate, random among equals.

    Score = long-term rate in+out of the broker's bundles (time-average data) plus that of the
    bundles preallocated to it; ``+inf`` when its weighted usage exceeds
    ``loadBalancerBrokerOverloadedThresholdPercentage`` (strictly). All brokers overloaded: all
    tie at ``+inf``. There is no usage weighting of the score in current Pulsar (spec §8.2).
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = _seeded(rng)

    @staticmethod
    def score(broker_data: BrokerData, conf: BrokerConfig) -> float:
        """A broker's score (lower is better)."""
        threshold = conf.loadBalancerBrokerOverloadedThresholdPercentage / 100.0
        if weighted_max_usage(broker_data.local_data, conf) > threshold:
            return math.inf
        preallocated = 0.0
        for bundle in broker_data.preallocated_bundle_data.values():
            preallocated += bundle.long_term_data.msg_rate_in + bundle.long_term_data.msg_rate_out
        average = broker_data.time_average_data
        return preallocated + (average.long_term_msg_rate_in + average.long_term_msg_rate_out)

    def select_broker(
        self,
        candidates: Collection[str],
        bundle_to_assign: BundleData,
        load_data: LoadData,
        conf: BrokerConfig,
    ) -> str | None:
        """A broker with the minimal score, uniformly at random among ties."""
        best: list[str] = []
        best_score = math.inf
        ordered = in_java_order(candidates)
        for broker in ordered:
            data = load_data.broker_data.get(broker)
            score = math.inf if data is None else self.score(data, conf)
            if score == math.inf:
                log.warning("LeastLongTermMessageRate: %s is overloaded", broker)
            if score < best_score:
                best, best_score = [broker], score
            elif score == best_score:
                best.append(broker)
        if not best:
            best = ordered
        return best[self._rng.randrange(len(best))] if best else None

    def on_active_brokers_change(self, active_brokers: Collection[str]) -> None:
        """Nothing to forget."""


class LeastResourceUsageWithWeight:
    """The broker whose averaged weighted usage is well below the candidates' mean.

    Each call moves every candidate's average toward its current weighted usage (keeping
    ``loadBalancerHistoryResourcePercentage``); a broker with no bundles or no message rate
    restarts from its current usage. The best brokers are those with ``average + loadBalancer
    AverageResourceUsageDifferenceThresholdPercentage/100 <= mean``; none: all candidates.

    Attributes:
        broker_avg_resource_usage_with_weight: Broker -> its usage average (Pulsar's
            ``brokerAvgResourceUsageWithWeight``).
    """

    MAX_RESOURCE_USAGE = 1.0

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = _seeded(rng)
        self.broker_avg_resource_usage_with_weight: dict[str, float] = {}

    def _update(self, broker: str, broker_data: BrokerData, conf: BrokerConfig) -> float:
        history_share = conf.loadBalancerHistoryResourcePercentage
        local = broker_data.local_data
        history = self.broker_avg_resource_usage_with_weight.get(broker)
        if not local.bundles or (local.msg_rate_in == 0 and local.msg_rate_out == 0):
            history = None  # a restarted or idle broker starts over from its current usage
        usage = weighted_max_usage(local, conf)
        average = (
            usage if history is None else history * history_share + (1 - history_share) * usage
        )
        self.broker_avg_resource_usage_with_weight[broker] = average
        if average > conf.loadBalancerBrokerOverloadedThresholdPercentage / 100.0:
            log.warning(
                "LeastResourceUsageWithWeight: %s is overloaded (%.1f%%)", broker, 100 * average
            )
        return average

    def select_broker(
        self,
        candidates: Collection[str],
        bundle_to_assign: BundleData,
        load_data: LoadData,
        conf: BrokerConfig,
    ) -> str | None:
        """A random broker among those well below the mean usage."""
        ordered = in_java_order(candidates)
        if not ordered:
            return None
        total = 0.0
        for broker in ordered:
            data = load_data.broker_data.get(broker)
            # No report (Pulsar would throw): counts as fully used, as an unknown history does.
            total += self.MAX_RESOURCE_USAGE if data is None else self._update(broker, data, conf)
        mean = total / len(ordered)
        margin = conf.loadBalancerAverageResourceUsageDifferenceThresholdPercentage / 100.0
        averages = self.broker_avg_resource_usage_with_weight
        best = [b for b in ordered if averages.get(b, self.MAX_RESOURCE_USAGE) + margin <= mean]
        if not best:
            log.warning(
                "LeastResourceUsageWithWeight: no broker below the mean; choosing at random"
            )
            best = ordered
        return best[self._rng.randrange(len(best))]

    def on_active_brokers_change(self, active_brokers: Collection[str]) -> None:
        """Drop the averages of brokers that left."""
        averages = self.broker_avg_resource_usage_with_weight
        for broker in [b for b in averages if b not in active_brokers]:
            del averages[broker]


class RoundRobinBrokerSelector:
    """Candidates in turn (used for ``loadBalancerSheddingExcludedNamespaces``).

    A counter (wrapping to 0 after ``Integer.MAX_VALUE``) modulo the candidate count indexes a
    cached copy of the candidates; the copy is refreshed when the count changes or the indexed
    broker is no longer a candidate.

    Attributes:
        count: The next counter value (Pulsar's ``count``).
    """

    def __init__(self) -> None:
        self.count = 0
        self._cache: list[str] = []

    def select_broker(
        self,
        candidates: Collection[str],
        bundle_to_assign: BundleData | None = None,
        load_data: LoadData | None = None,
        conf: BrokerConfig | None = None,
    ) -> str | None:
        """The next candidate in turn."""
        size = len(candidates)
        if size == 0:
            return None
        index = self.count % size
        self.count = 0 if self.count == _INT_MAX else self.count + 1
        cache = self._cache
        if len(cache) <= index or len(cache) != size:
            cache = in_java_order(candidates)
        selected = cache[index]
        if selected not in candidates:
            cache = in_java_order(candidates)
            selected = cache[index]
        self._cache = cache
        return selected

    def on_active_brokers_change(self, active_brokers: Collection[str]) -> None:
        """Nothing to forget."""
