"""When a broker rewrites its load report (spec §2.3; extensible variant §4.7).

A report is written when the last written one is older than
``loadBalancerReportUpdateMaxIntervalMinutes``, or when something moved by more than
``loadBalancerReportUpdateThresholdPercentage``: message rate, throughput or bundle count in
percent of the old value (any move away from exactly 0 counts as infinite), or the usage in
percentage points.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple, Protocol

from emubroker.loadbalance.model.data import weighted_max_usage

if TYPE_CHECKING:
    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.model.data import LocalBrokerData
    from emubroker.loadbalance.model.extensible_data import BrokerLoadData

__all__ = [
    "ReportUpdateReason",
    "need_broker_data_update",
    "need_broker_load_data_update",
    "percent_change",
    "report_update_reason",
]

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


class ReportUpdateReason(NamedTuple):
    """Why a report is written: the term that crossed its limit, and by how much.

    Attributes:
        term: ``maxInterval`` (the last write is older than
            ``loadBalancerReportUpdateMaxIntervalMinutes``), or the largest change:
            ``msgRate``, ``msgThroughput``, ``numBundles`` (percent of the old value) or
            ``resourceUsage`` (percentage points of the weighted usage).
        change: The change (percent or points); for ``maxInterval``, the seconds since the
            last write.
        threshold: What it exceeded (percent or points; minutes for ``maxInterval``).
    """

    term: str
    change: float
    threshold: float

    def describe(self) -> str:
        """The reason as a log line says it."""
        if self.term == MAX_INTERVAL:
            return (
                f"{self.change:.1f} s since the last write exceeded "
                f"loadBalancerReportUpdateMaxIntervalMinutes={self.threshold:g}"
            )
        unit = " points" if self.term == RESOURCE_USAGE else "%"
        return (
            f"{self.term} changed by {self.change:.2f}{unit}, over "
            f"loadBalancerReportUpdateThresholdPercentage={self.threshold:g}"
        )


MAX_INTERVAL = "maxInterval"
RESOURCE_USAGE = "resourceUsage"


def report_update_reason(
    last: LocalBrokerData, current: LocalBrokerData, conf: BrokerConfig, now: int
) -> ReportUpdateReason | None:
    """Why the modular manager would write ``current`` over ``last``, or None if it would not.

    ``needBrokerDataUpdate`` (spec §2.3), naming the term that decided.

    Args:
        last: The report as last written.
        current: The freshly computed report (its ``last_update`` is when it was last written).
        conf: The configuration (the usage term uses the weighted usage).
        now: The time in ms.
    """
    since = now - current.last_update
    max_minutes = conf.loadBalancerReportUpdateMaxIntervalMinutes
    if since > max_minutes * _MINUTE_MS:
        return ReportUpdateReason(MAX_INTERVAL, since / 1000, max_minutes)
    msg_rate, throughput = _traffic_changes(last, current)
    changes = (
        ("msgRate", msg_rate),
        ("msgThroughput", throughput),
        ("numBundles", percent_change(last.num_bundles, current.num_bundles)),
        (
            RESOURCE_USAGE,
            100.0 * abs(weighted_max_usage(last, conf) - weighted_max_usage(current, conf)),
        ),
    )
    # LocalBrokerData.max skips NaN (a NaN change never triggers a write); the first of equal
    # changes names the reason.
    term, change = "", -math.inf
    for name, value in changes:
        if value > change:
            term, change = name, value
    threshold = conf.loadBalancerReportUpdateThresholdPercentage
    return ReportUpdateReason(term, change, threshold) if change > threshold else None


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
    return report_update_reason(last, current, conf, now) is not None


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
