"""Bundle splitting: the split algorithms, boundary updates and the leader's split choice.

Spec §5.3 and §5.4.

The algorithms return split *positions* inside a bundle, or ``None`` for "do not split";
:func:`split_bundle` turns positions into the namespace's new boundaries and the children.
Topic hashes are CRC-32 of the topic name exactly as given (``naming.name_hash``), as
``NamespaceBundleFactory.getLongHashCode`` computes them.
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Final, NamedTuple, Protocol

from emubroker.loadbalance.strategies.isolation import namespace_of
from emubroker.naming import BundleRange, name_hash

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.model.data import LoadData

__all__ = [
    "ALGORITHMS",
    "SplitDecision",
    "SplitResult",
    "TopicLoad",
    "can_split_bundle",
    "find_bundles_to_split",
    "flow_or_qps_equally_divide",
    "range_equally_divide",
    "specified_positions_divide",
    "split_bundle",
    "split_positions",
    "topic_count_equally_divide",
]

log = logging.getLogger(__name__)

MIB: Final = 1024 * 1024


class HashRange(Protocol):
    """Anything with ``lower`` and ``upper`` hash bounds, like a ``BundleRange``."""

    @property
    def lower(self) -> int: ...

    @property
    def upper(self) -> int: ...


class TopicLoad(Protocol):
    """A topic's rates, as ``flow_or_qps_equally_divide`` reads them from topic stats."""

    @property
    def msg_rate_in(self) -> float: ...

    @property
    def msg_rate_out(self) -> float: ...

    @property
    def msg_throughput_in(self) -> float: ...

    @property
    def msg_throughput_out(self) -> float: ...


def range_equally_divide(bundle: HashRange) -> list[int]:
    """One position in the middle: ``lower + (upper - lower) // 2``."""
    return [bundle.lower + (bundle.upper - bundle.lower) // 2]


def topic_count_equally_divide(bundle: HashRange, topics: Sequence[str]) -> list[int] | None:
    """The middle of the two median topic hashes; ``None`` with fewer than two topics."""
    if len(topics) <= 1:
        return None
    hashes = sorted(name_hash(topic) for topic in topics)
    start = hashes[max(len(hashes) // 2 - 1, 0)]
    end = hashes[len(hashes) // 2]
    return [start + (end - start) // 2]


def specified_positions_divide(
    bundle: HashRange,
    topics: Sequence[str],
    positions: Sequence[int] | None,
    *,
    force: bool = False,
) -> list[int] | None:
    """The given positions strictly inside the bundle, sorted; ``None`` if none are.

    Without ``force`` a bundle with fewer than two topics is not split.

    Raises:
        ValueError: No positions given ("SplitBoundaries can't be empty").
    """
    if not positions:
        raise ValueError("SplitBoundaries can't be empty")
    if not force and len(topics) <= 1:
        return None
    inside = [p for p in sorted(positions) if bundle.lower < p < bundle.upper]
    return inside or None


def flow_or_qps_equally_divide(
    bundle: HashRange,
    topics: Sequence[str],
    topic_stats: Mapping[str, TopicLoad],
    *,
    max_msg_rate: int,
    max_bandwidth_mbytes: int,
    difference_threshold_percentage: int,
) -> list[int] | None:
    """Cut the hash-sorted topics into runs that stay under the rate and bandwidth maxima.

    Topics without stats or without traffic are ignored; fewer than two left, or the bundle
    under both ``max * (1 + difference%)``: ``None``. A cut between hashes ``a < b`` is at
    ``a + (b - a) // 2 + 1`` (note the ``+ 1``, which ``topic_count_equally_divide`` lacks).
    May return several positions, or an empty list when no run overflows.
    """
    if len(topics) <= 1:
        return None
    threshold = difference_threshold_percentage / 100.0
    max_bytes = max_bandwidth_mbytes * MIB
    loads: dict[int, tuple[float, float]] = {}
    hashes: list[int] = []
    total_rate = total_throughput = 0.0
    for topic in topics:
        stats = topic_stats.get(topic)
        if stats is None:
            continue
        rate = stats.msg_rate_in + stats.msg_rate_out
        throughput = stats.msg_throughput_in + stats.msg_throughput_out
        if rate <= 0 and throughput <= 0:
            continue
        topic_hash = name_hash(topic)
        hashes.append(topic_hash)
        loads[topic_hash] = (rate, throughput)
        total_rate += rate
        total_throughput += throughput
    if len(loads) < 2 or (
        total_rate < max_msg_rate * (1 + threshold)
        and total_throughput < max_bytes * (1 + threshold)
    ):
        return None
    hashes.sort()
    positions: list[int] = []
    run_rate, run_throughput = loads[hashes[0]]
    for previous, current in itertools.pairwise(hashes):
        rate, throughput = loads[current]
        if run_rate + rate > max_msg_rate or run_throughput + throughput > max_bytes:
            positions.append(previous + (current - previous) // 2 + 1)
            run_rate, run_throughput = rate, throughput
        else:
            run_rate += rate
            run_throughput += throughput
    return positions


ALGORITHMS: Final = (
    "range_equally_divide",
    "topic_count_equally_divide",
    "specified_positions_divide",
    "flow_or_qps_equally_divide",
)
"""``NamespaceBundleSplitAlgorithm.AVAILABLE_ALGORITHMS``."""


def split_positions(
    algorithm: str,
    bundle: HashRange,
    conf: BrokerConfig,
    *,
    topics: Sequence[str] = (),
    positions: Sequence[int] | None = None,
    topic_stats: Mapping[str, TopicLoad] | None = None,
    force: bool = False,
) -> list[int] | None:
    """Run the named algorithm (``NamespaceBundleSplitAlgorithm.of(name)``) on ``bundle``.

    Args:
        algorithm: One of :data:`ALGORITHMS`.
        bundle: The bundle to split.
        conf: Limits of ``flow_or_qps_equally_divide``.
        topics: The topics the bundle owns (full names, partitions separately).
        positions: For ``specified_positions_divide``.
        topic_stats: Topic -> its rates, for ``flow_or_qps_equally_divide``.
        force: ``specified_positions_divide`` even with fewer than two topics.

    Raises:
        ValueError: An unknown algorithm (Pulsar's ``of`` returns null and the caller fails),
            or no positions for ``specified_positions_divide``.
    """
    if algorithm == "range_equally_divide":
        return range_equally_divide(bundle)
    if algorithm == "topic_count_equally_divide":
        return topic_count_equally_divide(bundle, topics)
    if algorithm == "specified_positions_divide":
        return specified_positions_divide(bundle, topics, positions, force=force)
    if algorithm == "flow_or_qps_equally_divide":
        return flow_or_qps_equally_divide(
            bundle,
            topics,
            topic_stats or {},
            max_msg_rate=conf.loadBalancerNamespaceBundleMaxMsgRate,
            max_bandwidth_mbytes=conf.loadBalancerNamespaceBundleMaxBandwidthMbytes,
            difference_threshold_percentage=conf.flowOrQpsDifferenceThresholdPercentage,
        )
    raise ValueError(f"unsupported namespace bundle split algorithm {algorithm!r}")


def can_split_bundle(bundle: HashRange) -> bool:
    """A bundle can be split only if it spans more than one hash value."""
    return bundle.upper - bundle.lower > 1


class SplitDecision(NamedTuple):
    """The leader's choice: split ``bundle`` of ``broker``; unload the children if ``unload``."""

    bundle: str
    broker: str
    unload: bool


class SplitResult(NamedTuple):
    """A namespace's boundaries after a split, and the bundles that replaced the split one."""

    boundaries: tuple[int, ...]
    children: tuple[BundleRange, ...]


def split_bundle(
    boundaries: Sequence[int],
    bundle: BundleRange,
    num_bundles: int = 2,
    positions: Iterable[int] | None = None,
) -> SplitResult:
    """Split ``bundle`` of a namespace with ``boundaries`` (Pulsar's ``splitBundles``).

    With ``positions`` the children are cut there (``num_bundles`` is then ignored);
    without, into ``num_bundles`` equal parts of ``(upper - lower) // num_bundles``, the last
    taking the remainder.

    Raises:
        ValueError: The bundle spans one hash value, a position is not strictly inside it,
            ``num_bundles`` is below 1 without positions, or the bundle is not one of the
            namespace's bundles.
    """
    if not can_split_bundle(bundle):
        raise ValueError(f"{bundle} bundle can't be split further since range not larger than 1")
    cuts = sorted(positions) if positions is not None else []
    if cuts:
        if not (bundle.lower < cuts[0] and cuts[-1] < bundle.upper):
            raise ValueError(
                f"The given fixed keys must between the key range of the {bundle} bundle"
            )
    else:
        if num_bundles < 1:
            raise ValueError(f"cannot split {bundle} into {num_bundles} bundles")
        segment = (bundle.upper - bundle.lower) // num_bundles
        cuts = [bundle.lower + k * segment for k in range(1, num_bundles)]
    for index in range(len(boundaries) - 1):
        if boundaries[index] == bundle.lower and boundaries[index + 1] == bundle.upper:
            new = (*boundaries[: index + 1], *cuts, *boundaries[index + 1 :])
            edges = (bundle.lower, *cuts, bundle.upper)
            children = tuple(BundleRange(a, b) for a, b in itertools.pairwise(edges))
            return SplitResult(new, children)
    raise ValueError(f"{bundle} is not a bundle of the namespace")


def find_bundles_to_split(
    load_data: LoadData,
    conf: BrokerConfig,
    bundle_count: Callable[[str], int],
) -> dict[str, str]:
    """The bundles the leader should split, with the broker owning each (``BundleSplitterTask``).

    A bundle reported in some broker's ``last_stats`` with at least two topics qualifies if
    its topic count exceeds ``loadBalancerNamespaceBundleMaxTopics``, its sessions
    ``loadBalancerNamespaceBundleMaxSessions`` (when positive), or its *long-term* message rate
    or throughput the ``...MaxMsgRate``/``...MaxBandwidthMbytes`` limits; and only while the
    namespace's bundle count plus those chosen this cycle stays below
    ``loadBalancerNamespaceMaximumBundles``.

    Args:
        load_data: The leader's load data.
        conf: The configuration.
        bundle_count: Namespace -> its current number of bundles.
    """
    chosen: dict[str, str] = {}
    per_namespace: dict[str, int] = {}
    max_topics = conf.loadBalancerNamespaceBundleMaxTopics
    max_sessions = conf.loadBalancerNamespaceBundleMaxSessions
    max_rate = conf.loadBalancerNamespaceBundleMaxMsgRate
    max_bandwidth = conf.loadBalancerNamespaceBundleMaxBandwidthMbytes * MIB
    for broker, data in load_data.brokers_in_java_order():
        for bundle, stats in data.local_data.last_stats.items():
            if stats.topics < 2:
                continue
            rate = throughput = 0.0
            bundle_data = load_data.bundle_data.get(bundle)
            if bundle_data is not None:
                rate = bundle_data.long_term_data.total_msg_rate()
                throughput = bundle_data.long_term_data.total_msg_throughput()
            if not (
                stats.topics > max_topics
                or (max_sessions > 0 and stats.consumer_count + stats.producer_count > max_sessions)
                or rate > max_rate
                or throughput > max_bandwidth
            ):
                continue
            namespace = namespace_of(bundle)
            already = per_namespace.get(namespace, 0)
            if bundle_count(namespace) + already < conf.loadBalancerNamespaceMaximumBundles:
                log.info(
                    "bundle %s should be split: topics %d/%d, sessions %d/%d, rate %.0f/%d msg/s, "
                    "throughput %.2f/%d MiB/s",
                    bundle,
                    stats.topics,
                    max_topics,
                    stats.consumer_count + stats.producer_count,
                    max_sessions,
                    rate,
                    max_rate,
                    throughput / MIB,
                    conf.loadBalancerNamespaceBundleMaxBandwidthMbytes,
                )
                chosen[bundle] = broker
                per_namespace[namespace] = already + 1
    return chosen
