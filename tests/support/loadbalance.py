"""Builders for load-balancer test data: Pulsar's tests set a few fields, so do we."""

from __future__ import annotations

from emubroker.loadbalance.data import (
    BrokerData,
    BundleData,
    LocalBrokerData,
    TimeAverageMessageData,
)

MIB = 1024 * 1024


def short_term(
    *,
    throughput_in: float = 0.0,
    throughput_out: float = 0.0,
    rate_in: float = 0.0,
    rate_out: float = 0.0,
    num_samples: int = 0,
) -> BundleData:
    """A ``BundleData`` whose short-term data has these values (``setShortTermData``)."""
    return BundleData(
        short_term_data=TimeAverageMessageData(
            num_samples=num_samples,
            msg_throughput_in=throughput_in,
            msg_throughput_out=throughput_out,
            msg_rate_in=rate_in,
            msg_rate_out=rate_out,
        )
    )


def broker(local: LocalBrokerData) -> BrokerData:
    """``new BrokerData(localData)``."""
    return BrokerData(local_data=local)
