"""The modular load manager's shedding strategies (spec §4.2–§4.4), as pure objects.

``find_bundles_for_unloading(load_data, conf)`` returns ``broker -> bundles to unload`` and
changes nothing in ``load_data``. What a strategy remembers between cycles (ThresholdShedder's
usage averages) lives in the strategy object and changes only through these calls and
``on_active_brokers_change``.

Common rules (spec §4.1): candidate bundles come from ``bundle_data_for_load_shedding()``
(heartbeat and SLA-monitor bundles left out), must be in the broker's reported ``bundles`` and
not recently unloaded; a bundle's size is its short-term data. Ties keep Pulsar's map order
(``emubroker.loadbalance.model.javaorder``).
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any, Final, Protocol

from emubroker.loadbalance.model.data import weighted_max_usage
from emubroker.loadbalance.model.javaorder import double_key, to_int

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Mapping

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.model.data import BrokerData, BundleData, LoadData, LocalBrokerData

__all__ = [
    "BYTES",
    "MESSAGES",
    "LoadSheddingStrategy",
    "OverloadShedder",
    "ThresholdShedder",
    "UniformLoadShedder",
    "select_largest",
]

log = logging.getLogger(__name__)

MIB: Final = 1024 * 1024
ADDITIONAL_THRESHOLD_PERCENT_MARGIN: Final = 0.05
"""Shed a little more than the excess so the broker does not sit right at the threshold."""
LOWER_BOUNDARY_THRESHOLD_MARGIN: Final = 0.5
BYTES: Final = "bytes/s"
"""``offload_unit`` of an amount in bytes per second (an explanation's)."""
MESSAGES: Final = "msg/s"
"""``offload_unit`` of an amount in messages per second."""


class LoadSheddingStrategy(Protocol):
    """Pulsar's ``LoadSheddingStrategy``."""

    def find_bundles_for_unloading(
        self, load_data: LoadData, conf: BrokerConfig
    ) -> dict[str, list[str]]:
        """Which bundles each broker should give up this cycle."""
        ...

    def on_active_brokers_change(self, active_brokers: Collection[str]) -> None:
        """Forget brokers that left the cluster."""
        ...

    def explain(
        self, load_data: LoadData, conf: BrokerConfig, broker: str, destination: str
    ) -> dict[str, Any]:
        """The numbers behind moving a bundle off ``broker`` (to ``destination``).

        For the decision of the cycle just run: its log line and ``shed`` trace row
        (docs/load-balancer-trace.md).
        The keys are the trace row's decision fields (``reason``, ``broker_load``,
        ``cluster_load``, ``threshold``, ``to_offload``, ``offload_unit``, ``dest_load``),
        each present when the strategy has that figure; they are recomputed with the
        strategy's own formulas from the same inputs and its state after the cycle.
        """
        ...


def _throughput(local: LocalBrokerData) -> float:
    return local.msg_throughput_in + local.msg_throughput_out


def _rate(local: LocalBrokerData) -> float:
    return local.msg_rate_in + local.msg_rate_out


def dest_usage(load_data: LoadData, conf: BrokerConfig, destination: str) -> dict[str, Any]:
    """``dest_load`` of an explanation: the destination's weighted maximum usage."""
    data = load_data.broker_data.get(destination)
    return {} if data is None else {"dest_load": weighted_max_usage(data.local_data, conf)}


def _short_term_throughput(data: BundleData) -> float:
    short = data.short_term_data
    return short.msg_throughput_in + short.msg_throughput_out


def _short_term_rate(data: BundleData) -> float:
    short = data.short_term_data
    return short.msg_rate_in + short.msg_rate_out


def _candidates(
    load_data: LoadData,
    sheddable: Mapping[str, BundleData],
    local_data: LocalBrokerData,
    size: Callable[[BundleData], float],
) -> list[tuple[str, float]]:
    """The broker's sheddable bundles with their size, largest first (stable, Java order).

    Args:
        load_data: For the recently unloaded bundles.
        sheddable: ``load_data.bundle_data_for_load_shedding()``, computed once per cycle.
        local_data: The broker's report (its ``bundles``).
        size: A bundle's size (short-term throughput or message rate).
    """
    recent = load_data.recently_unloaded_bundles
    owned = local_data.bundles
    sized = [
        (bundle, size(data))
        for bundle, data in sheddable.items()
        if bundle in owned and bundle not in recent
    ]
    sized.sort(key=lambda item: double_key(item[1]), reverse=True)
    return sized


def select_largest(sized: Iterable[tuple[str, float]], minimum: float) -> list[str]:
    """Take bundles in order until their sum reaches ``minimum``; always at least one."""
    chosen: list[str] = []
    marked = 0.0
    for bundle, value in sized:
        if marked < minimum or not chosen:
            chosen.append(bundle)
            marked += value
    return chosen


def _shed_largest(
    load_data: LoadData,
    sheddable: Callable[[], Mapping[str, BundleData]],
    broker: str,
    local: LocalBrokerData,
    minimum: float,
    result: dict[str, list[str]],
) -> None:
    """Record the broker's largest bundles covering ``minimum``; a sole bundle is spared."""
    if len(local.bundles) > 1:
        chosen = select_largest(
            _candidates(load_data, sheddable(), local, _short_term_throughput), minimum
        )
        if chosen:
            result[broker] = chosen
    elif local.bundles:
        log.warning("sole bundle is overloading %s: no load shedding on this broker", broker)
    else:
        log.warning("%s is overloaded despite having no bundles", broker)


def _broker_throughput(local_data: LocalBrokerData) -> float:
    return local_data.msg_throughput_in + local_data.msg_throughput_out


class OverloadShedder:
    """Shed from every broker whose weighted usage is at or above the overload threshold.

    ``toOffload = (usage - threshold + 0.05) * broker throughput``, taken from the largest
    bundles by short-term throughput; brokers with one bundle or none shed nothing (spec §4.2).
    """

    def find_bundles_for_unloading(
        self, load_data: LoadData, conf: BrokerConfig
    ) -> dict[str, list[str]]:
        """Which bundles each overloaded broker should give up."""
        result: dict[str, list[str]] = {}
        sheddable = functools.cache(load_data.bundle_data_for_load_shedding)
        threshold = conf.loadBalancerBrokerOverloadedThresholdPercentage / 100.0
        for broker, broker_data in load_data.brokers_in_java_order():
            local = broker_data.local_data
            usage = weighted_max_usage(local, conf)
            if usage < threshold:
                continue
            minimum = _broker_throughput(local) * (
                usage - threshold + ADDITIONAL_THRESHOLD_PERCENT_MARGIN
            )
            log.info(
                "OverloadShedder: %s at %.1f%% >= %.1f%%: offloading at least %.2f MiB/s (%s)",
                broker,
                100 * usage,
                100 * threshold,
                minimum / MIB,
                local.print_resource_usage(),
            )
            _shed_largest(load_data, sheddable, broker, local, minimum, result)
        return result

    def on_active_brokers_change(self, active_brokers: Collection[str]) -> None:
        """Nothing to forget."""

    def explain(
        self, load_data: LoadData, conf: BrokerConfig, broker: str, destination: str
    ) -> dict[str, Any]:
        """See ``LoadSheddingStrategy.explain``: the broker's usage over the threshold."""
        local = load_data.broker_data[broker].local_data
        usage = weighted_max_usage(local, conf)
        threshold = conf.loadBalancerBrokerOverloadedThresholdPercentage / 100.0
        return {
            "reason": "Overloaded",
            "broker_load": usage,
            "threshold": threshold,
            "to_offload": _throughput(local)
            * (usage - threshold + ADDITIONAL_THRESHOLD_PERCENT_MARGIN),
            "offload_unit": BYTES,
            **dest_usage(load_data, conf, destination),
        }


class ThresholdShedder:
    """Shed from brokers whose usage average exceeds the cluster average by the threshold.

    Keeps an exponential average of each broker's weighted usage
    (``loadBalancerHistoryResourcePercentage`` of the old value). A broker at or above
    ``cluster average + loadBalancerBrokerThresholdShedderPercentage`` sheds
    ``(avg - clusterAvg - threshold + 0.05) * throughput``, unless that is below
    ``loadBalancerBundleUnloadMinThroughputThreshold``. With ``lowerBoundarySheddingEnabled`` and
    nothing chosen, the busiest multi-bundle broker sheds ``throughput * threshold * 0.5`` when
    some broker is below ``clusterAvg - threshold``; Pulsar updates the averages a second time
    in that path, and so do we (spec §4.3, §8.8).

    Attributes:
        broker_avg_resource_usage: Broker -> its usage average (Pulsar's
            ``brokerAvgResourceUsage``).
    """

    def __init__(self) -> None:
        self.broker_avg_resource_usage: dict[str, float] = {}

    def find_bundles_for_unloading(
        self, load_data: LoadData, conf: BrokerConfig
    ) -> dict[str, list[str]]:
        """Which bundles each broker above the cluster average should give up."""
        result: dict[str, list[str]] = {}
        sheddable = functools.cache(load_data.bundle_data_for_load_shedding)
        threshold = conf.loadBalancerBrokerThresholdShedderPercentage / 100.0
        min_throughput = conf.loadBalancerBundleUnloadMinThroughputThreshold * MIB
        brokers = load_data.brokers_in_java_order()
        avg_usage = self._update_averages(brokers, conf)
        if avg_usage == 0:
            log.warning("ThresholdShedder: average max resource usage is 0")
            return result
        for broker, broker_data in brokers:
            local = broker_data.local_data
            usage = self.broker_avg_resource_usage.get(broker, 0.0)
            if usage < avg_usage + threshold:
                continue
            share = usage - avg_usage - threshold + ADDITIONAL_THRESHOLD_PERCENT_MARGIN
            minimum = _broker_throughput(local) * share
            if minimum < min_throughput:
                continue
            log.info(
                "ThresholdShedder: %s at %.1f%% > average %.1f%% + %.1f%%: offloading at least "
                "%.2f MiB/s (%s)",
                broker,
                100 * usage,
                100 * avg_usage,
                100 * threshold,
                minimum / MIB,
                local.print_resource_usage(),
            )
            _shed_largest(load_data, sheddable, broker, local, minimum, result)
        if not result and conf.lowerBoundarySheddingEnabled:
            self._lower_boundary_shedding(load_data, brokers, threshold, conf, result)
        return result

    def _update_averages(self, brokers: list[tuple[str, BrokerData]], conf: BrokerConfig) -> float:
        history = conf.loadBalancerHistoryResourcePercentage
        total = 0.0
        for broker, broker_data in brokers:
            usage = weighted_max_usage(broker_data.local_data, conf)
            previous = self.broker_avg_resource_usage.get(broker)
            average = usage if previous is None else previous * history + (1 - history) * usage
            self.broker_avg_resource_usage[broker] = average
            total += average
        return total / len(brokers) if brokers else 0.0

    def _lower_boundary_shedding(
        self,
        load_data: LoadData,
        brokers: list[tuple[str, BrokerData]],
        threshold: float,
        conf: BrokerConfig,
        result: dict[str, list[str]],
    ) -> None:
        avg_usage = self._update_averages(brokers, conf)
        max_broker, max_usage = "", avg_usage - threshold
        below_lower_bound = False
        for broker, broker_data in brokers:
            usage = self.broker_avg_resource_usage.get(broker, 0.0)
            if usage > max_usage and len(broker_data.local_data.bundles) > 1:
                max_broker, max_usage = broker, usage
            if usage < avg_usage - threshold:
                below_lower_bound = True
        if not below_lower_bound or max_broker not in load_data.broker_data:
            return
        local = load_data.broker_data[max_broker].local_data
        sheddable = load_data.bundle_data_for_load_shedding
        minimum = _broker_throughput(local) * threshold * LOWER_BOUNDARY_THRESHOLD_MARGIN
        if conf.loadBalancerBundleUnloadMinThroughputThreshold * MIB > minimum:
            return
        chosen = select_largest(
            _candidates(load_data, sheddable(), local, _short_term_throughput), minimum
        )
        if chosen:
            log.info("ThresholdShedder: lower-boundary shedding from %s", max_broker)
            result[max_broker] = chosen

    def on_active_brokers_change(self, active_brokers: Collection[str]) -> None:
        """Drop the averages of brokers that left."""
        for broker in [b for b in self.broker_avg_resource_usage if b not in active_brokers]:
            del self.broker_avg_resource_usage[broker]

    def explain(
        self, load_data: LoadData, conf: BrokerConfig, broker: str, destination: str
    ) -> dict[str, Any]:
        """See ``LoadSheddingStrategy.explain``: the averages after the cycle.

        Against the cluster's mean, over (``Overloaded``) or under (``Underloaded``) it by the
        threshold.
        """
        local = load_data.broker_data[broker].local_data
        averages = self.broker_avg_resource_usage
        known = [averages.get(b, 0.0) for b in load_data.broker_data]
        cluster = sum(known) / len(known) if known else 0.0
        threshold = conf.loadBalancerBrokerThresholdShedderPercentage / 100.0
        usage = averages.get(broker, 0.0)
        numbers: dict[str, Any] = {
            "broker_load": usage,
            "cluster_load": cluster,
            "offload_unit": BYTES,
            "dest_load": averages.get(destination, -1.0),
        }
        if usage >= cluster + threshold:
            share = usage - cluster - threshold + ADDITIONAL_THRESHOLD_PERCENT_MARGIN
            return numbers | {
                "reason": "Overloaded",
                "threshold": cluster + threshold,
                "to_offload": _throughput(local) * share,
            }
        # The lower-boundary path: some broker is below the average by the threshold. (A broker
        # above the upper threshold but short of the minimum throughput is not chosen there
        # either: its lower-boundary amount, threshold * 0.5 of its throughput, is never larger.)
        return numbers | {
            "reason": "Underloaded",
            "threshold": cluster - threshold,
            "to_offload": _throughput(local) * threshold * LOWER_BOUNDARY_THRESHOLD_MARGIN,
        }


class UniformLoadShedder:
    """Even out message rate (or throughput) between the busiest and the idlest broker.

    Only one path runs per cycle: message rate when its difference exceeds
    ``loadBalancerMsgRateDifferenceShedderThreshold`` percent, else throughput when the ratio
    exceeds ``loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold``. The amount is
    ``int((max - min) * maxUnloadPercentage)``; bundles of the busiest broker are taken in
    descending order whenever they still fit, each subtracted truncated to int (spec §4.4).
    """

    EPS: Final = 1e-6

    def find_bundles_for_unloading(
        self, load_data: LoadData, conf: BrokerConfig
    ) -> dict[str, list[str]]:
        """Which bundles the busiest broker should give up."""
        max_rate = max_tp = -1.0
        min_rate = min_tp = float(2**31 - 1)
        rate_broker = tp_broker = ""
        for broker, data in load_data.brokers_in_java_order():
            local = data.local_data
            rate = local.msg_rate_in + local.msg_rate_out
            throughput = _broker_throughput(local)
            if rate > max_rate:
                rate_broker, max_rate = broker, rate
            if throughput > max_tp:
                tp_broker, max_tp = broker, throughput
            min_rate = min(min_rate, rate)
            min_tp = min(min_tp, throughput)
        if -self.EPS <= min_rate <= self.EPS:
            min_rate = 1.0
        if -self.EPS <= min_tp <= self.EPS:
            min_tp = 1.0
        rate_threshold = conf.loadBalancerMsgRateDifferenceShedderThreshold
        tp_threshold = conf.loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold
        rate_exceeded = (
            rate_threshold > 0 and (max_rate - min_rate) * 100 / min_rate > rate_threshold
        )
        tp_exceeded = tp_threshold > 0 and max_tp / min_tp > tp_threshold
        if rate_exceeded:
            required = to_int((max_rate - min_rate) * conf.maxUnloadPercentage)
            broker, minimum, size = rate_broker, conf.minUnloadMessage, _short_term_rate
        elif tp_exceeded:
            required = to_int((max_tp - min_tp) * conf.maxUnloadPercentage)
            broker, minimum, size = (
                tp_broker,
                conf.minUnloadMessageThroughput,
                _short_term_throughput,
            )
        else:
            return {}
        local = load_data.broker_data[broker].local_data
        if len(local.bundles) <= 1 or required < minimum:
            return {}
        limit = conf.maxUnloadBundleNumPerShedding
        sheddable = load_data.bundle_data_for_load_shedding
        chosen: list[str] = []
        for bundle, value in _candidates(load_data, sheddable(), local, size):
            if limit != -1 and len(chosen) >= limit:
                break
            if value <= required:
                log.info("UniformLoadShedder: unloading %s (%.1f) from %s", bundle, value, broker)
                required += to_int(-value)  # MutableInt.add(double) adds intValue()
                chosen.append(bundle)
        return {broker: chosen} if chosen else {}

    def on_active_brokers_change(self, active_brokers: Collection[str]) -> None:
        """Nothing to forget."""

    def explain(
        self, load_data: LoadData, conf: BrokerConfig, broker: str, destination: str
    ) -> dict[str, Any]:
        """See ``LoadSheddingStrategy.explain``: the busiest and idlest brokers' difference.

        In message rate, or else in throughput.
        """
        local = load_data.broker_data[broker].local_data
        locals_ = [data.local_data for data in load_data.broker_data.values()]
        min_rate = min(_rate(b) for b in locals_) or 1.0
        max_rate = max(_rate(b) for b in locals_)
        min_tp = min(_throughput(b) for b in locals_) or 1.0
        max_tp = max(_throughput(b) for b in locals_)
        rate_threshold = conf.loadBalancerMsgRateDifferenceShedderThreshold
        if rate_threshold > 0 and (max_rate - min_rate) * 100 / min_rate > rate_threshold:
            return {
                "reason": "MsgRateDifference",
                "broker_load": _rate(local),
                "cluster_load": min_rate,
                "threshold": min_rate * (1 + rate_threshold / 100),
                "to_offload": float(to_int((max_rate - min_rate) * conf.maxUnloadPercentage)),
                "offload_unit": MESSAGES,
            }
        multiplier = conf.loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold
        return {
            "reason": "ThroughputDifference",
            "broker_load": _throughput(local),
            "cluster_load": min_tp,
            "threshold": min_tp * multiplier,
            "to_offload": float(to_int((max_tp - min_tp) * conf.maxUnloadPercentage)),
            "offload_unit": BYTES,
        }
