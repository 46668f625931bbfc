"""Per-bundle stats from topic counters (Pulsar's PulsarStats.updateStats)."""

from __future__ import annotations

import pytest

from emubroker.loadbalance.model.bundle_stats import NamespaceBundleStats
from emubroker.loadbalance.reporting.bundle_sampler import BundleStatsSampler, TopicTraffic

A = "public/default/0x00000000_0x40000000"
B = "public/default/0x40000000_0x80000000"


def topic(
    name: str,
    bundle: str,
    msg_in: int = 0,
    bytes_in: int = 0,
    msg_out: int = 0,
    bytes_out: int = 0,
    producers: int = 0,
    consumers: int = 0,
) -> TopicTraffic:
    return TopicTraffic(name, bundle, msg_in, bytes_in, msg_out, bytes_out, producers, consumers)


def test_topics_are_grouped_by_bundle_with_counts_and_rates() -> None:
    sampler = BundleStatsSampler()
    first = sampler.sample(
        10.0,
        [
            topic("t1", A, 100, 1000, 50, 500, producers=1, consumers=2),
            topic("t2", A, 10, 100, producers=2),
            topic("t3", B, consumers=1),
        ],
    )
    # First sight: counts, no rates (the counters may predate this broker).
    assert first == {
        A: NamespaceBundleStats(topics=2, producer_count=3, consumer_count=2),
        B: NamespaceBundleStats(topics=1, consumer_count=1),
    }
    second = sampler.sample(
        12.0,
        [
            topic("t1", A, 300, 3000, 90, 900, producers=1, consumers=2),
            topic("t2", A, 10, 100, producers=2),
            topic("t3", B, 0, 0, 8, 64, consumers=1),
        ],
    )
    assert second[A] == NamespaceBundleStats(
        msg_rate_in=100.0,
        msg_throughput_in=1000.0,
        msg_rate_out=20.0,
        msg_throughput_out=200.0,
        producer_count=3,
        consumer_count=2,
        topics=2,
    )
    assert second[B].msg_rate_out == pytest.approx(4.0)
    assert second[B].msg_throughput_out == pytest.approx(32.0)


def test_bundles_without_loaded_topics_are_not_reported() -> None:
    sampler = BundleStatsSampler()
    sampler.sample(0.0, [topic("t1", A), topic("t2", B)])
    assert set(sampler.sample(1.0, [topic("t2", B)])) == {B}


def test_a_topic_seen_first_contributes_no_rate_and_a_reloaded_one_no_negative_rate() -> None:
    sampler = BundleStatsSampler()
    sampler.sample(0.0, [topic("t1", A, 500, 5000)])
    stats = sampler.sample(
        1.0,
        [topic("t1", A, 10, 100), topic("new", A, 10_000, 10**6)],  # t1 reloaded: reset
    )
    assert stats[A].msg_rate_in == 0.0
    assert stats[A].msg_throughput_in == 0.0
    assert stats[A].topics == 2
