"""Bundle splitting: Pulsar's ``*BundleSplitAlgorithmTest``s, the split cases of
``NamespaceBundlesTest`` and ``BundleSplitterTaskTest``, and the spec's worked values."""

from __future__ import annotations

import zlib

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from emubroker.config import BrokerConfig
from emubroker.loadbalance.model.data import (
    BrokerData,
    BundleData,
    LoadData,
    LocalBrokerData,
    NamespaceBundleStats,
    TimeAverageMessageData,
)
from emubroker.loadbalance.strategies.split import (
    ALGORITHMS,
    find_bundles_to_split,
    flow_or_qps_equally_divide,
    range_equally_divide,
    specified_positions_divide,
    split_bundle,
    split_positions,
    topic_count_equally_divide,
)
from emubroker.naming import FULL_RANGE, MAX_HASH, BundleRange, bundle_for, topic_hash

MIB = 1024 * 1024


class TopicStats(msgspec.Struct):
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    msg_throughput_in: float = 0.0
    msg_throughput_out: float = 0.0


def test_algorithm_names() -> None:
    assert ALGORITHMS == (
        "range_equally_divide",
        "topic_count_equally_divide",
        "specified_positions_divide",
        "flow_or_qps_equally_divide",
    )
    assert BrokerConfig().supportedNamespaceBundleSplitAlgorithms == ALGORITHMS


def test_algorithms_by_name() -> None:
    conf = BrokerConfig()
    assert split_positions("range_equally_divide", FULL_RANGE, conf) == [0x7FFFFFFF]
    assert split_positions("topic_count_equally_divide", FULL_RANGE, conf, topics=["a"]) is None
    assert split_positions(
        "specified_positions_divide", FULL_RANGE, conf, positions=[5], force=True
    ) == [5]
    topics = hashed_topics(2)
    heavy = {topics[0]: TopicStats(msg_rate_in=40000), topics[1]: TopicStats(msg_rate_in=1)}
    assert split_positions(
        "flow_or_qps_equally_divide", FULL_RANGE, conf, topics=topics, topic_stats=heavy
    )
    for unknown in ("whatever", ""):
        with pytest.raises(ValueError, match="unsupported"):
            split_positions(unknown, FULL_RANGE, conf)


def test_range_equally_divide() -> None:
    assert range_equally_divide(BundleRange(10, MAX_HASH)) == [10 + (MAX_HASH - 10) // 2]
    # Split boundaries are not the 0x40000000 grid of namespace creation (spec §5.3, §8.12).
    assert range_equally_divide(FULL_RANGE) == [0x7FFFFFFF]
    assert range_equally_divide(BundleRange(0, 0x7FFFFFFF)) == [0x3FFFFFFF]
    assert range_equally_divide(BundleRange(0x7FFFFFFF, MAX_HASH)) == [0xBFFFFFFF]


def test_topic_count_equally_divide() -> None:
    topics = ["a", "b", "c"]
    hashes = sorted(zlib.crc32(t.encode()) for t in topics)
    start, end = hashes[0], hashes[1]  # n // 2 - 1 and n // 2 for three topics
    assert topic_count_equally_divide(FULL_RANGE, topics) == [start + (end - start) // 2]
    assert topic_count_equally_divide(FULL_RANGE, ["a"]) is None
    assert topic_count_equally_divide(FULL_RANGE, []) is None


def test_topic_count_hashes_names_as_given() -> None:
    # getLongHashCode hashes the string; a short name is not expanded to persistent://...
    assert zlib.crc32(b"a") == 0xE8B7BE43
    [cut] = topic_count_equally_divide(FULL_RANGE, ["a", "a"]) or []
    assert cut == 0xE8B7BE43


def test_specified_positions_with_force_on_an_empty_bundle() -> None:
    bundle = BundleRange(1, 1000)
    assert specified_positions_divide(bundle, [], [1, 2], force=True) == [2]


def test_specified_positions_need_two_topics_without_force() -> None:
    assert specified_positions_divide(BundleRange(1, 1000), ["a"], [1, 2]) is None


@pytest.mark.parametrize("positions", [None, []])
def test_specified_positions_must_be_given(positions: list[int] | None) -> None:
    with pytest.raises(ValueError, match="SplitBoundaries can't be empty"):
        specified_positions_divide(BundleRange(1, 1000), ["a", "b"], positions)


def test_specified_positions_keep_those_strictly_inside() -> None:
    positions = [-1, 0, 1, 100, 200, 500, 800, 1000, 1100]
    assert specified_positions_divide(BundleRange(1, 1000), ["topic", "topic2"], positions) == [
        100,
        200,
        500,
        800,
    ]
    assert specified_positions_divide(BundleRange(1, 1000), ["t", "u"], [1, 1000]) is None


def hashed_topics(count: int) -> list[str]:
    return [f"persistent://t/ns/topic-{i}" for i in range(count)]


def flow(topics: list[str], stats: dict[str, TopicStats], **limits: int) -> list[int] | None:
    settings = {
        "max_msg_rate": 30000,
        "max_bandwidth_mbytes": 100,
        "difference_threshold_percentage": 10,
    }
    settings.update(limits)
    return flow_or_qps_equally_divide(FULL_RANGE, topics, stats, **settings)


def test_flow_or_qps_cuts_between_runs_with_plus_one() -> None:
    topics = hashed_topics(6)
    by_hash = sorted(topics, key=lambda t: zlib.crc32(t.encode()))
    stats = {t: TopicStats(msg_rate_in=10000) for t in topics}
    # 60000 msg/s against 30000 (+10 %): runs of three topics of 10000.
    cuts = flow(topics, stats)
    a, b = zlib.crc32(by_hash[2].encode()), zlib.crc32(by_hash[3].encode())
    assert cuts == [a + (b - a) // 2 + 1]


def test_flow_or_qps_may_cut_several_times_by_throughput() -> None:
    topics = hashed_topics(4)
    stats = {t: TopicStats(msg_throughput_out=60 * MIB) for t in topics}
    assert len(flow(topics, stats) or []) == 3  # each 60 MiB topic alone under 100 MiB


def test_flow_or_qps_leaves_small_bundles_alone() -> None:
    topics = hashed_topics(3)
    assert flow(topics, {t: TopicStats(msg_rate_in=10500) for t in topics}) is None  # 31500 < 33000
    assert flow(topics[:1], {topics[0]: TopicStats(msg_rate_in=1e6)}) is None
    stats = {topics[0]: TopicStats(msg_rate_in=1e6), topics[1]: TopicStats()}
    assert flow(topics, stats) is None  # one topic with traffic, one without, one without stats


def test_flow_or_qps_isolates_one_heavy_topic() -> None:
    topics = hashed_topics(2)
    stats = {topics[0]: TopicStats(msg_rate_in=40000), topics[1]: TopicStats(msg_rate_out=0.5)}
    low, high = sorted(zlib.crc32(t.encode()) for t in topics)
    assert flow(topics, stats) == [low + (high - low) // 2 + 1]


NS1 = (0, 0x40000000, 0xA0000000, 0xB0000000, 0xC0000000, MAX_HASH)


def test_find_bundle() -> None:
    topic = "persistent://pulsar/global/ns1/topic-1"
    found = bundle_for(topic_hash(topic), NS1)
    assert found.contains(topic_hash(topic))
    assert found == BundleRange(0, 0x40000000)  # 0x2924fad1


def test_find_bundle_outside_the_boundaries() -> None:
    hash_value = topic_hash("persistent://pulsar/use/ns2/topic-2")
    later = [b for b in NS1 if b > hash_value]
    with pytest.raises(ValueError, match="outside"):
        bundle_for(hash_value, later[1:])


def test_split_full_bundle_in_four() -> None:
    result = split_bundle((0, MAX_HASH), FULL_RANGE, 4)
    assert result.boundaries == (0, 0x3FFFFFFF, 0x7FFFFFFE, 0xBFFFFFFD, MAX_HASH)
    assert [str(c) for c in result.children] == [
        "0x00000000_0x3fffffff",
        "0x3fffffff_0x7ffffffe",
        "0x7ffffffe_0xbffffffd",
        "0xbffffffd_0xffffffff",
    ]
    again = split_bundle(result.boundaries, result.children[0], 4)
    assert len(again.boundaries) - 1 == 4 + 4 - 1
    assert (again.children[0].lower, again.children[-1].upper) == (0, 0x3FFFFFFF)
    thrice = split_bundle(result.boundaries, result.children[1], 3)
    assert len(thrice.children) == 3
    assert len(thrice.boundaries) - 1 == 6


def test_split_in_two_repeatedly() -> None:
    first = split_bundle((0, MAX_HASH), FULL_RANGE)
    assert [str(c) for c in first.children] == ["0x00000000_0x7fffffff", "0x7fffffff_0xffffffff"]
    for child, expected in zip(
        first.children,
        (
            ["0x00000000_0x3fffffff", "0x3fffffff_0x7fffffff"],
            ["0x7fffffff_0xbfffffff", "0xbfffffff_0xffffffff"],
        ),
        strict=True,
    ):
        assert [str(c) for c in split_bundle(first.boundaries, child).children] == expected
    quarter = split_bundle(first.boundaries, first.children[0]).children[0]
    second = split_bundle(first.boundaries, first.children[0])
    assert [str(c) for c in split_bundle(second.boundaries, quarter).children] == [
        "0x00000000_0x1fffffff",
        "0x1fffffff_0x3fffffff",
    ]


def test_split_by_fixed_boundary() -> None:
    with pytest.raises(ValueError, match="must between"):
        split_bundle((0, MAX_HASH), FULL_RANGE, 0, [0])
    with pytest.raises(ValueError, match="must between"):
        split_bundle((0, MAX_HASH), FULL_RANGE, 0, [MAX_HASH])
    result = split_bundle((0, MAX_HASH), FULL_RANGE, 0, [10])
    assert [(c.lower, c.upper) for c in result.children] == [(0, 10), (10, MAX_HASH)]


def test_bundles_spanning_one_hash_cannot_split() -> None:
    with pytest.raises(ValueError, match="can't be split further"):
        split_bundle((0, 1, MAX_HASH), BundleRange(0, 1))
    with pytest.raises(ValueError, match="not a bundle"):
        split_bundle((0, 0x40000000, MAX_HASH), BundleRange(0, 0x20000000))


@given(st.lists(st.integers(0, MAX_HASH), min_size=1, max_size=6, unique=True), st.integers(0, 3))
def test_split_children_cover_the_parent(cuts: list[int], which: int) -> None:
    boundaries = tuple(sorted({0, MAX_HASH, *cuts}))
    index = which % (len(boundaries) - 1)
    parent = BundleRange(boundaries[index], boundaries[index + 1])
    if parent.upper - parent.lower < 2:
        return
    result = split_bundle(boundaries, parent, positions=range_equally_divide(parent))
    assert result.children[0].lower == parent.lower
    assert result.children[-1].upper == parent.upper
    assert all(
        a.upper == b.lower for a, b in zip(result.children, result.children[1:], strict=False)
    )
    assert list(result.boundaries) == sorted(set(result.boundaries))


def splitter_load_data(stats: dict[str, NamespaceBundleStats], rates: dict[str, float]) -> LoadData:
    local = LocalBrokerData(last_stats=stats)
    bundle_data = {
        bundle: BundleData(long_term_data=TimeAverageMessageData(msg_rate_in=rate, msg_rate_out=1))
        for bundle, rate in rates.items()
    }
    return LoadData(broker_data={"broker": BrokerData(local_data=local)}, bundle_data=bundle_data)


def test_split_task_skips_bundles_with_one_topic() -> None:
    conf = BrokerConfig()
    bundle = "ten/ns/0x00000000_0x80000000"
    load_data = splitter_load_data(
        {bundle: NamespaceBundleStats(topics=1)},
        {bundle: conf.loadBalancerNamespaceBundleMaxMsgRate},
    )
    assert find_bundles_to_split(load_data, conf, lambda _ns: 1) == {}


def test_split_task_respects_the_namespace_maximum() -> None:
    conf = BrokerConfig(loadBalancerNamespaceMaximumBundles=3)
    bundles = [
        "ten/ns/0x00000000_0x20000000",
        "ten/ns/0x20000000_0x40000000",
        "ten/ns/0x40000000_0x60000000",
    ]
    load_data = splitter_load_data(
        {b: NamespaceBundleStats(topics=5) for b in bundles},
        dict.fromkeys(bundles, conf.loadBalancerNamespaceBundleMaxMsgRate * 2),
    )
    current = 1
    chosen = find_bundles_to_split(load_data, conf, lambda _ns: current)
    assert len(chosen) + current == conf.loadBalancerNamespaceMaximumBundles
    assert set(chosen.values()) == {"broker"}


@pytest.mark.parametrize(
    ("stats", "rate", "throughput", "split"),
    [
        (NamespaceBundleStats(topics=1001), 0, 0, True),
        (NamespaceBundleStats(topics=1000), 0, 0, False),
        (NamespaceBundleStats(topics=2, consumer_count=600, producer_count=401), 0, 0, True),
        (NamespaceBundleStats(topics=2, consumer_count=600, producer_count=400), 0, 0, False),
        (NamespaceBundleStats(topics=2), 30000.5, 0, True),
        (NamespaceBundleStats(topics=2), 30000, 0, False),
        (NamespaceBundleStats(topics=2), 0, 100 * MIB + 1, True),
        (NamespaceBundleStats(topics=2, msg_rate_in=1e9), 0, 0, False),  # long-term data counts
    ],
)
def test_split_task_thresholds(
    stats: NamespaceBundleStats, rate: float, throughput: float, split: bool
) -> None:
    bundle = "t/ns/0x00000000_0xffffffff"
    load_data = LoadData(
        broker_data={"b": BrokerData(local_data=LocalBrokerData(last_stats={bundle: stats}))},
        bundle_data={
            bundle: BundleData(
                long_term_data=TimeAverageMessageData(
                    msg_rate_in=rate, msg_throughput_in=throughput
                )
            )
        },
    )
    assert (bundle in find_bundles_to_split(load_data, BrokerConfig(), lambda _ns: 1)) is split


def test_split_task_sessions_limit_zero_disables_it() -> None:
    bundle = "t/ns/0x00000000_0xffffffff"
    stats = NamespaceBundleStats(topics=2, consumer_count=10**6)
    load_data = LoadData(
        broker_data={"b": BrokerData(local_data=LocalBrokerData(last_stats={bundle: stats}))}
    )
    conf = BrokerConfig(loadBalancerNamespaceBundleMaxSessions=0)
    assert find_bundles_to_split(load_data, conf, lambda _ns: 1) == {}


FLOW_LIMITS = {
    "max_msg_rate": 1010,
    "max_bandwidth_mbytes": 100,
    "difference_threshold_percentage": 10,
}


def test_split_bundle_by_flow_or_qps() -> None:
    # Pulsar's FlowOrQpsEquallyDivideBundleSplitAlgorithmTest: 241 partitions, each run of
    # topics between two cut positions stays under the limits.
    stats: dict[str, TopicStats] = {}
    for i in range(1, 13):
        rate_in = 24.5 if i < 6 else 25.5
        for j in range(20):
            stats[f"persistent://test-tenant1/test-namespace1/test{i}-partition-{j}"] = TopicStats(
                msg_rate_in=rate_in,
                msg_throughput_in=1000,
                msg_rate_out=25,
                msg_throughput_out=1000,
            )
    stats["persistent://test-tenant1/test-namespace1/test695-partition-0"] = TopicStats(
        msg_rate_in=25, msg_throughput_in=1000, msg_rate_out=35, msg_throughput_out=1000
    )
    topics = list(stats)
    cuts = flow_or_qps_equally_divide(FULL_RANGE, topics, stats, **FLOW_LIMITS)
    assert cuts
    by_hash = sorted((zlib.crc32(t.encode()), t) for t in topics)
    index = 0
    for cut in cuts:
        rate = throughput = 0.0
        while by_hash[index][0] < cut:
            load = stats[by_hash[index][1]]
            rate += load.msg_rate_in + load.msg_rate_out
            throughput += load.msg_throughput_in + load.msg_throughput_out
            index += 1
        assert rate < 1010
        assert throughput < 100 * MIB


def test_flow_or_qps_first_topic_over_the_limit() -> None:
    topics = [f"persistent://test-tenant1/test-namespace1/test-partition-{i}" for i in range(5)]
    hashes = sorted(zlib.crc32(t.encode()) for t in topics)
    first = next(t for t in topics if zlib.crc32(t.encode()) == hashes[0])
    stats = {
        t: TopicStats(
            msg_rate_in=24.5, msg_throughput_in=1000, msg_rate_out=25, msg_throughput_out=1000
        )
        for t in topics
    }
    stats[first] = TopicStats(
        msg_rate_in=1000, msg_throughput_in=1000, msg_rate_out=1000, msg_throughput_out=1000
    )
    cuts = flow_or_qps_equally_divide(FULL_RANGE, topics, stats, **FLOW_LIMITS)
    assert cuts is not None
    assert cuts[0] == hashes[0] + (hashes[1] - hashes[0]) // 2 + 1
