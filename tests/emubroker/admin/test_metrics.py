"""Prometheus text with Pulsar's names, from statistics snapshots, with scrape-to-scrape rates."""

from __future__ import annotations

import math

import msgspec
import pytest

from emubroker.admin.metrics import MetricsCollector, Rates, RateTracker, render_metrics
from emubroker.topics.stats import ServiceStats, SubscriptionStats, TopicStats
from protocol.clock import FakeClock
from tests.support.prometheus import parse_exposition

LABELS = 'cluster="c1",namespace="public/default",topic="persistent://public/default/t"'


def stats(msg_in: int = 10, bytes_in: int = 1000) -> ServiceStats:
    sub = SubscriptionStats(
        name='s"1',
        type="Shared",
        durable=True,
        consumers=2,
        backlog=7,
        unacked=1,
        mark_delete=(1, 2),
    )
    topic = TopicStats(
        name="persistent://public/default/t",
        namespace="public/default",
        persistent=True,
        producers=1,
        consumers=2,
        msg_in=msg_in,
        bytes_in=bytes_in,
        msg_out=4,
        bytes_out=400,
        msg_dropped=0,
        entries=10,
        backlog=7,
        subscriptions=(sub,),
    )
    return ServiceStats(topics_count=1, producers=1, consumers=2, subscriptions=1, topics=(topic,))


def test_render_uses_pulsars_names_and_labels() -> None:
    text = render_metrics(stats(), cluster="c1")
    lines = text.splitlines()
    assert 'pulsar_topics_count{cluster="c1",namespace="public/default"} 1' in lines
    for line in (
        f"pulsar_producers_count{{{LABELS}}} 1",
        f"pulsar_consumers_count{{{LABELS}}} 2",
        f"pulsar_subscriptions_count{{{LABELS}}} 1",
        f"pulsar_msg_backlog{{{LABELS}}} 7",
        f"pulsar_in_messages_total{{{LABELS}}} 10",
        f"pulsar_out_bytes_total{{{LABELS}}} 400",
        f"pulsar_rate_in{{{LABELS}}} 0.0",
        f"pulsar_throughput_out{{{LABELS}}} 0.0",
        f'pulsar_subscription_back_log{{{LABELS},subscription="s\\"1"}} 7',
        "# TYPE pulsar_in_messages_total counter",
        "# TYPE pulsar_rate_in gauge",
    ):
        assert line in lines, line
    names = {line.split("{")[0] for line in lines if line and not line.startswith("#")}
    assert all(name.startswith("pulsar_") for name in names)


@pytest.mark.anyio
async def test_rates_are_deltas_between_samples() -> None:
    clock = FakeClock()
    snapshots = [stats(10, 1000), stats(10, 1000), stats(30, 5000)]
    collector = MetricsCollector(lambda: snapshots.pop(0), clock=clock, cluster="c1")
    collector.render()
    await clock.advance(0.5)  # too soon: no new sample
    assert f"pulsar_rate_in{{{LABELS}}} 0.0" in collector.render().splitlines()
    await clock.advance(1.5)
    lines = collector.render().splitlines()
    assert f"pulsar_rate_in{{{LABELS}}} 10.0" in lines
    assert f"pulsar_throughput_in{{{LABELS}}} 2000.0" in lines


@pytest.mark.anyio
async def test_subscription_families_and_shared_tracker() -> None:
    clock = FakeClock()
    tracker = RateTracker(clock=clock)
    before = stats()
    tracker.sample(before)
    after = stats(msg_in=10)
    sub = msgspec.structs.replace(
        after.topics[0].subscriptions[0], msg_out=8, bytes_out=800, msg_dropped=6
    )
    topic = msgspec.structs.replace(after.topics[0], subscriptions=(sub,))
    after = msgspec.structs.replace(after, topics=(topic,))
    await clock.advance(2.0)
    tracker.sample(after)
    lines = render_metrics(after, cluster="c1", rates=tracker).splitlines()
    sub_labels = f'{LABELS},subscription="s\\"1"'
    for line in (
        f"pulsar_subscription_msg_rate_out{{{sub_labels}}} 4.0",
        f"pulsar_subscription_msg_throughput_out{{{sub_labels}}} 400.0",
        f"pulsar_subscription_unacked_messages{{{sub_labels}}} 1",
        f"pulsar_subscription_consumers_count{{{sub_labels}}} 2",
        f"pulsar_subscription_msg_drop_rate{{{sub_labels}}} 3.0",
        "# TYPE pulsar_subscription_msg_rate_out gauge",
        "# TYPE pulsar_subscription_msg_drop_rate gauge",
    ):
        assert line in lines, line
    assert tracker.topic("persistent://public/default/t").msg_out == 0.0
    assert tracker.subscription("persistent://public/default/t", "other").msg_out == 0.0


class _ExtremeRates(RateTracker):
    """A tracker whose topic rates are the values Python spells differently from Prometheus."""

    def topic(self, name: str) -> Rates:
        return Rates(msg_in=math.inf, msg_out=-math.inf, bytes_in=math.nan, bytes_out=1.5e300)


def test_infinities_and_nan_are_spelled_as_prometheus_text_requires() -> None:
    text = render_metrics(stats(), cluster="c1", rates=_ExtremeRates(clock=FakeClock()))
    lines = text.splitlines()
    assert f"pulsar_rate_in{{{LABELS}}} +Inf" in lines
    assert f"pulsar_rate_out{{{LABELS}}} -Inf" in lines
    assert f"pulsar_throughput_in{{{LABELS}}} NaN" in lines
    families = parse_exposition(text)
    [rate_in] = families["pulsar_rate_in"].samples
    [rate_out] = families["pulsar_rate_out"].samples
    [throughput_in] = families["pulsar_throughput_in"].samples
    [throughput_out] = families["pulsar_throughput_out"].samples
    assert (rate_in.value, rate_out.value) == (math.inf, -math.inf)
    assert math.isnan(throughput_in.value)
    assert throughput_out.value == 1.5e300
    assert throughput_out.labels["namespace"] == "public/default"


def test_whole_output_parses_with_the_subscription_label_escaped() -> None:
    families = parse_exposition(render_metrics(stats(), cluster="c1"))
    [backlog] = families["pulsar_subscription_back_log"].samples
    assert (backlog.labels["subscription"], backlog.value) == ('s"1', 7)
    assert families["pulsar_in_messages"].type == "counter"
