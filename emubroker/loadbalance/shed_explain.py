"""The numbers behind a modular shedding decision, for its log line and its trace row.

A modular strategy returns only ``broker -> bundles``; the figures that made it choose (the
broker's load, what it was compared with, the threshold crossed, the amount to offload) are
recomputed here from the same inputs and from the strategy's state after the cycle, with the
strategy's own formulas (spec §4.2–§4.5). :func:`explain` returns the trace row's decision
fields (docs/load-balancer-trace.md), ``reason`` included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emubroker.loadbalance.avg_shedder import AvgShedder
from emubroker.loadbalance.data import weighted_max_usage
from emubroker.loadbalance.javaorder import to_int
from emubroker.loadbalance.shedding import (
    ADDITIONAL_THRESHOLD_PERCENT_MARGIN,
    LOWER_BOUNDARY_THRESHOLD_MARGIN,
    OverloadShedder,
    ThresholdShedder,
    UniformLoadShedder,
)

if TYPE_CHECKING:
    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.data import LoadData, LocalBrokerData
    from emubroker.loadbalance.shedding import LoadSheddingStrategy

__all__ = ["AvgHitCounts", "bundle_numbers", "explain"]

BYTES = "bytes/s"
MESSAGES = "msg/s"

AvgHitCounts = tuple[dict[str, int], dict[str, int]]
"""AvgShedder's high and low hit counts before the cycle (the cycle resets a ripe pair's)."""


def _throughput(local: LocalBrokerData) -> float:
    return local.msg_throughput_in + local.msg_throughput_out


def _rate(local: LocalBrokerData) -> float:
    return local.msg_rate_in + local.msg_rate_out


def bundle_numbers(load_data: LoadData, bundle: str) -> dict[str, Any]:
    """The bundle's short-term rate and throughput and its topics (``-1`` when unknown)."""
    data = load_data.bundle_data.get(bundle)
    if data is None:
        return {}
    short = data.short_term_data
    return {
        "bundle_msg_rate": short.msg_rate_in + short.msg_rate_out,
        "bundle_throughput": short.msg_throughput_in + short.msg_throughput_out,
        "bundle_topics": data.topics,
    }


def explain(
    strategy: LoadSheddingStrategy,
    load_data: LoadData,
    conf: BrokerConfig,
    broker: str,
    destination: str,
    *,
    avg_hits: AvgHitCounts = ({}, {}),
) -> dict[str, Any]:
    """The decision fields of moving a bundle off ``broker`` (to ``destination``)."""
    local = load_data.broker_data[broker].local_data
    if isinstance(strategy, ThresholdShedder):
        return _threshold(strategy, load_data, conf, broker, destination, local)
    if isinstance(strategy, OverloadShedder):
        usage = weighted_max_usage(local, conf)
        threshold = conf.loadBalancerBrokerOverloadedThresholdPercentage / 100.0
        return {
            "reason": "Overloaded",
            "broker_load": usage,
            "threshold": threshold,
            "to_offload": _throughput(local)
            * (usage - threshold + ADDITIONAL_THRESHOLD_PERCENT_MARGIN),
            "offload_unit": BYTES,
            **_dest_usage(load_data, conf, destination),
        }
    if isinstance(strategy, UniformLoadShedder):
        return _uniform(load_data, conf, local)
    if isinstance(strategy, AvgShedder):
        return _avg(strategy, load_data, conf, broker, destination, local, avg_hits)
    return {}


def _dest_usage(load_data: LoadData, conf: BrokerConfig, destination: str) -> dict[str, Any]:
    data = load_data.broker_data.get(destination)
    return {} if data is None else {"dest_load": weighted_max_usage(data.local_data, conf)}


def _threshold(
    strategy: ThresholdShedder,
    load_data: LoadData,
    conf: BrokerConfig,
    broker: str,
    destination: str,
    local: LocalBrokerData,
) -> dict[str, Any]:
    averages = strategy.broker_avg_resource_usage
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


def _uniform(load_data: LoadData, conf: BrokerConfig, local: LocalBrokerData) -> dict[str, Any]:
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


def _avg(
    strategy: AvgShedder,
    load_data: LoadData,
    conf: BrokerConfig,
    broker: str,
    destination: str,
    local: LocalBrokerData,
    avg_hits: AvgHitCounts,
) -> dict[str, Any]:
    score = strategy.broker_score
    busy, idle = score.get(broker, 0.0), score.get(destination, 0.0)
    high_hits, _ = avg_hits
    high = conf.loadBalancerAvgShedderHitCountHighThreshold
    gap_high = busy - idle >= conf.loadBalancerAvgShedderHighThreshold
    ripe_high = gap_high and any(high_hits.get(b, 0) + 1 >= high for b in (broker, destination))
    threshold = (
        conf.loadBalancerAvgShedderHighThreshold
        if ripe_high
        else conf.loadBalancerAvgShedderLowThreshold
    )
    numbers: dict[str, Any] = {
        "reason": "HighHitCount" if ripe_high else "LowHitCount",
        "broker_load": busy / 100,
        "cluster_load": idle / 100,
        "dest_load": idle / 100,
        "threshold": threshold / 100,
    }
    partner = load_data.broker_data.get(destination)
    if partner is None:
        return numbers
    idle_local = partner.local_data
    rate_needed = (_rate(local) - _rate(idle_local)) * conf.maxUnloadPercentage
    if rate_needed > conf.minUnloadMessage:
        return numbers | {"to_offload": rate_needed, "offload_unit": MESSAGES}
    tp_needed = (_throughput(local) - _throughput(idle_local)) * conf.maxUnloadPercentage
    return numbers | {"to_offload": tp_needed, "offload_unit": BYTES}
