"""When a broker rewrites its load report (spec §2.3; extensible variant §4.7).

A report is written when the last written one is older than
``loadBalancerReportUpdateMaxIntervalMinutes``, or when something moved by more than
``loadBalancerReportUpdateThresholdPercentage``: message rate, throughput or bundle count in
percent of the old value (any move away from exactly 0 counts as infinite), or the usage in
percentage points.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Protocol

from emubroker.loadbalance.data import weighted_max_usage

if TYPE_CHECKING:
    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.data import LocalBrokerData
    from emubroker.loadbalance.extensible_data import BrokerLoadData

__all__ = ["need_broker_data_update", "need_broker_load_data_update", "percent_change"]

_MINUTE_MS = 60_000


def percent_change(old: float, new: float) -> float:
    """``100 * |old - new| / old``; 0 if both are 0, infinite if only ``old`` is."""
    if old == 0:
        return 0.0 if new == 0 else math.inf
    return 100 * abs((old - new) / old)


class _Traffic(Protocol):
    msg_rate_in: float
    msg_rate_out: float
    msg_throughput_in: float
    msg_throughput_out: float


def _traffic_changes(last: _Traffic, current: _Traffic) -> tuple[float, float]:
    """Percent changes of the message rate and of the throughput (in + out)."""
    return (
        percent_change(
            last.msg_rate_in + last.msg_rate_out, current.msg_rate_in + current.msg_rate_out
        ),
        percent_change(
            last.msg_throughput_in + last.msg_throughput_out,
            current.msg_throughput_in + current.msg_throughput_out,
        ),
    )


def need_broker_data_update(
    last: LocalBrokerData, current: LocalBrokerData, conf: BrokerConfig, now: int
) -> bool:
    """Whether the modular manager writes ``current`` over ``last`` (``needBrokerDataUpdate``).

    Args:
        last: The report as last written.
        current: The freshly computed report (its ``last_update`` is when it was last written).
        conf: The configuration (the usage term uses the weighted usage).
        now: The time in ms.
    """
    if now - current.last_update > conf.loadBalancerReportUpdateMaxIntervalMinutes * _MINUTE_MS:
        return True
    changes = (
        *_traffic_changes(last, current),
        percent_change(last.num_bundles, current.num_bundles),
        100.0 * abs(weighted_max_usage(last, conf) - weighted_max_usage(current, conf)),
    )
    # LocalBrokerData.max skips NaN: a NaN change never triggers a write.
    return max((c for c in changes if not math.isnan(c)), default=-math.inf) > (
        conf.loadBalancerReportUpdateThresholdPercentage
    )


def need_broker_load_data_update(
    last: BrokerLoadData, current: BrokerLoadData, conf: BrokerConfig, now: int
) -> bool:
    """The extensible manager's rule (``BrokerLoadDataReporter.needBrokerDataUpdate``).

    Uses the unweighted ``max_resource_usage`` and ``current.reported_at``.
    """
    if now - current.reported_at > conf.loadBalancerReportUpdateMaxIntervalMinutes * _MINUTE_MS:
        return True
    changes = (
        100.0 * abs(last.max_resource_usage - current.max_resource_usage),
        *_traffic_changes(last, current),
        percent_change(last.bundle_count, current.bundle_count),
    )
    # Math.max propagates NaN, and NaN > threshold is false.
    if any(math.isnan(c) for c in changes):
        return False
    return max(changes) > conf.loadBalancerReportUpdateThresholdPercentage
