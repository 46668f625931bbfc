"""Builders for load-balancer test data: Pulsar's tests set a few fields, so do we."""

from __future__ import annotations

from emubroker.loadbalance.model.data import (
    BrokerData,
    BundleData,
    LoadData,
    LocalBrokerData,
    TimeAverageMessageData,
)
from emubroker.loadbalance.model.usage import ResourceUsage

MIB = 1024 * 1024
OVERLOADED = {"bandwidth_in": ResourceUsage(999, 1000), "bandwidth_out": ResourceUsage(999, 1000)}
"""Bandwidth at 99.9 % each way: the overloaded broker of Pulsar's shedder tests."""


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


def ten_bundles(
    load_data: LoadData,
    local: LocalBrokerData,
    *,
    other: LocalBrokerData | None = None,
    prefix: str = "",
) -> None:
    """bundle-i carries i MiB/s each way on ``local``, which reports the sum (Pulsar's fixture).

    With ``other``, the same data is also listed as ``<prefix>bundle-(10+i)`` owned by it, so a
    strategy that ignored ownership would pick those.
    """
    total = 0.0
    for i in range(1, 11):
        data = short_term(throughput_in=i * MIB, throughput_out=i * MIB)
        local.bundles.add(f"bundle-{i}")
        load_data.bundle_data[f"bundle-{i}"] = data
        if other is not None:
            load_data.bundle_data[f"{prefix}bundle-{10 + i}"] = data
            other.bundles.add(f"{prefix}bundle-{10 + i}")
        total += i * MIB
    local.msg_throughput_in = local.msg_throughput_out = total
