"""A bundle's traffic: samples, time averages and the broker sums (spec §2.1).

``NamespaceBundleStats`` is one sample, ``TimeAverageMessageData`` an average over the last
samples (10 short-term, 1000 long-term), ``BundleData`` both averages of a bundle, and
``TimeAverageBrokerData`` their sums over a broker's bundles. Also here: the namespace helpers
that tell heartbeat and SLA-monitor bundles apart (``emubroker.system_names``').
``emubroker.loadbalance.model.data`` re-exports everything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec

from emubroker.loadbalance.model.usage import java_div
from emubroker.system_names import (
    SYSTEM_NAMESPACE,
    is_sla_or_heartbeat_namespace,
    is_system_service_namespace,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "DEFAULT_MESSAGE_RATE",
    "DEFAULT_MESSAGE_THROUGHPUT",
    "NUM_LONG_SAMPLES",
    "NUM_SHORT_SAMPLES",
    "SYSTEM_NAMESPACE",
    "BundleData",
    "NamespaceBundleStats",
    "TimeAverageBrokerData",
    "TimeAverageMessageData",
    "bundle_namespace",
    "default_bundle_stats",
    "is_sla_or_heartbeat_namespace",
    "is_system_service_namespace",
]

NUM_SHORT_SAMPLES: Final = 10
NUM_LONG_SAMPLES: Final = 1000
DEFAULT_MESSAGE_RATE: Final = 50.0
DEFAULT_MESSAGE_THROUGHPUT: Final = 50_000.0


def bundle_namespace(bundle: str) -> str:
    """The namespace of ``<namespace>/<range>``; a name without ``/`` is its own namespace."""
    index = bundle.rfind("/")
    return bundle[:index] if index != -1 else bundle


def _compare_beyond(*criteria: tuple[float, float, float]) -> int:
    """Compare by the first ``(mine, theirs, threshold)`` whose values differ by more."""
    for mine, theirs, threshold in criteria:
        if abs(mine - theirs) > threshold:
            return -1 if mine < theirs else 1
    return 0


class NamespaceBundleStats(msgspec.Struct, rename="camel"):
    """One sample of a bundle's traffic, summed over its topics by the owning broker."""

    msg_rate_in: float = 0.0
    msg_throughput_in: float = 0.0
    msg_rate_out: float = 0.0
    msg_throughput_out: float = 0.0
    consumer_count: int = 0
    producer_count: int = 0
    topics: int = 0
    cache_size: int = 0

    def compare_to(self, other: NamespaceBundleStats) -> int:
        """Pulsar's ranking: throughput in, out, message rate, topics+connections, cache size.

        Differences below 100 000 B/s, 100 msg/s, 500 topics+connections and 100 000 bytes of
        cache count as equal.
        """
        return _compare_beyond(
            (self.msg_throughput_in, other.msg_throughput_in, 1e5),
            (self.msg_throughput_out, other.msg_throughput_out, 1e5),
            (self.msg_rate_in + self.msg_rate_out, other.msg_rate_in + other.msg_rate_out, 100),
            (
                self.topics + self.consumer_count + self.producer_count,
                other.topics + other.consumer_count + other.producer_count,
                500,
            ),
            (self.cache_size, other.cache_size, 100_000),
        )


def default_bundle_stats() -> NamespaceBundleStats:
    """What the leader assumes of a bundle it knows nothing about: 50 msg/s, 50 000 B/s each way."""
    return NamespaceBundleStats(
        msg_rate_in=DEFAULT_MESSAGE_RATE,
        msg_throughput_in=DEFAULT_MESSAGE_THROUGHPUT,
        msg_rate_out=DEFAULT_MESSAGE_RATE,
        msg_throughput_out=DEFAULT_MESSAGE_THROUGHPUT,
    )


class TimeAverageMessageData(msgspec.Struct, rename="camel"):
    """Averages of a bundle's rates over its last ``max_samples`` samples.

    ``update`` sets ``num_samples = min(num_samples + 1, max_samples)`` and moves each average
    to ``((num_samples - 1) * old + new) / num_samples``: exact until ``max_samples`` samples,
    then an exponential average with weight ``1 / max_samples``. The first sample overwrites
    whatever the averages were initialised with.
    """

    max_samples: int = 0
    num_samples: int = 0
    msg_throughput_in: float = 0.0
    msg_throughput_out: float = 0.0
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0

    @classmethod
    def initial(
        cls, max_samples: int, default_stats: NamespaceBundleStats | None = None
    ) -> TimeAverageMessageData:
        """A new average of ``max_samples``, starting from ``default_stats`` if given."""
        if default_stats is None:
            return cls(max_samples=max_samples)
        return cls(
            max_samples=max_samples,
            msg_throughput_in=default_stats.msg_throughput_in,
            msg_throughput_out=default_stats.msg_throughput_out,
            msg_rate_in=default_stats.msg_rate_in,
            msg_rate_out=default_stats.msg_rate_out,
        )

    def update(self, sample: NamespaceBundleStats) -> None:
        """Add one sample."""
        self.update_values(
            sample.msg_throughput_in,
            sample.msg_throughput_out,
            sample.msg_rate_in,
            sample.msg_rate_out,
        )

    def update_values(
        self, throughput_in: float, throughput_out: float, rate_in: float, rate_out: float
    ) -> None:
        """Add one sample given as its four values."""
        n = self.num_samples = min(self.num_samples + 1, self.max_samples)
        self.msg_throughput_in = java_div((n - 1) * self.msg_throughput_in + throughput_in, n)
        self.msg_throughput_out = java_div((n - 1) * self.msg_throughput_out + throughput_out, n)
        self.msg_rate_in = java_div((n - 1) * self.msg_rate_in + rate_in, n)
        self.msg_rate_out = java_div((n - 1) * self.msg_rate_out + rate_out, n)

    def total_msg_rate(self) -> float:
        """Message rate in + out."""
        return self.msg_rate_in + self.msg_rate_out

    def total_msg_throughput(self) -> float:
        """Throughput in + out."""
        return self.msg_throughput_in + self.msg_throughput_out

    def compare_to(self, other: TimeAverageMessageData) -> int:
        """Throughput in, then out, then total rate; below 100 000 B/s or 100 msg/s is equal."""
        return _compare_beyond(
            (self.msg_throughput_in, other.msg_throughput_in, 1e5),
            (self.msg_throughput_out, other.msg_throughput_out, 1e5),
            (self.total_msg_rate(), other.total_msg_rate(), 100),
        )


class BundleData(msgspec.Struct, rename="camel"):
    """A bundle's short-term (10 samples) and long-term (1000 samples) averages."""

    short_term_data: TimeAverageMessageData = msgspec.field(default_factory=TimeAverageMessageData)
    long_term_data: TimeAverageMessageData = msgspec.field(default_factory=TimeAverageMessageData)
    topics: int = 0

    @classmethod
    def initial(
        cls,
        num_short_samples: int = NUM_SHORT_SAMPLES,
        num_long_samples: int = NUM_LONG_SAMPLES,
        default_stats: NamespaceBundleStats | None = None,
    ) -> BundleData:
        """Empty averages of the given sizes, starting from ``default_stats`` if given."""
        return cls(
            short_term_data=TimeAverageMessageData.initial(num_short_samples, default_stats),
            long_term_data=TimeAverageMessageData.initial(num_long_samples, default_stats),
        )

    def update(self, sample: NamespaceBundleStats) -> None:
        """Add a sample to both averages and take its topic count."""
        self.short_term_data.update(sample)
        self.long_term_data.update(sample)
        self.topics = sample.topics

    def compare_to(self, other: BundleData) -> int:
        """Short-term data first, then long-term (``BundleData.compareTo``)."""
        return self.short_term_data.compare_to(other.short_term_data) or (
            self.long_term_data.compare_to(other.long_term_data)
        )


class TimeAverageBrokerData(msgspec.Struct, rename="camel"):
    """Short- and long-term rate sums over a broker's bundles."""

    short_term_msg_throughput_in: float = 0.0
    short_term_msg_throughput_out: float = 0.0
    short_term_msg_rate_in: float = 0.0
    short_term_msg_rate_out: float = 0.0
    long_term_msg_throughput_in: float = 0.0
    long_term_msg_throughput_out: float = 0.0
    long_term_msg_rate_in: float = 0.0
    long_term_msg_rate_out: float = 0.0

    @classmethod
    def of(
        cls,
        bundles: Iterable[str],
        data: Mapping[str, BundleData],
        default_stats: NamespaceBundleStats,
    ) -> TimeAverageBrokerData:
        """The sums over ``bundles``; a bundle without data counts as ``default_stats``."""
        result = cls()
        result.reset(bundles, data, default_stats)
        return result

    def reset(
        self,
        bundles: Iterable[str],
        data: Mapping[str, BundleData],
        default_stats: NamespaceBundleStats,
    ) -> None:
        """Recompute the sums from scratch."""
        sums = [0.0] * 8
        for bundle in bundles:
            bundle_data = data.get(bundle)
            if bundle_data is None:
                short = long = (
                    default_stats.msg_throughput_in,
                    default_stats.msg_throughput_out,
                    default_stats.msg_rate_in,
                    default_stats.msg_rate_out,
                )
            else:
                s, lt = bundle_data.short_term_data, bundle_data.long_term_data
                short = (s.msg_throughput_in, s.msg_throughput_out, s.msg_rate_in, s.msg_rate_out)
                long = (
                    lt.msg_throughput_in,
                    lt.msg_throughput_out,
                    lt.msg_rate_in,
                    lt.msg_rate_out,
                )
            for i, value in enumerate((*short, *long)):
                sums[i] += value
        (
            self.short_term_msg_throughput_in,
            self.short_term_msg_throughput_out,
            self.short_term_msg_rate_in,
            self.short_term_msg_rate_out,
            self.long_term_msg_throughput_in,
            self.long_term_msg_throughput_out,
            self.long_term_msg_rate_in,
            self.long_term_msg_rate_out,
        ) = sums
