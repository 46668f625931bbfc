"""More stats: subscription counters, non-persistent and partitioned stats, labels, load."""

from __future__ import annotations

import re
import time
from typing import Any

import pulsar

from conformance.probe import Probe, shape
from conformance.scenarios.core import _traffic
from conformance.scenarios.registry import TIMEOUT_MS, T, scenario


@scenario("stats")
def metrics_labels(probe: Probe) -> dict[str, Any]:
    """The label names of the topic and subscription families on /metrics."""
    _traffic(probe, T + "cf-labels")
    page = probe.session.get(probe.target.admin_url.rstrip("/") + "/metrics/", timeout=10)
    labels: dict[str, list[str]] = {}
    for line in page.text.splitlines():
        match = re.match(r"(pulsar_(?:rate_in|rate_out|in_messages_total|storage_size|"
                         r"subscription_back_log|msg_backlog|producers_count|consumers_count|"
                         r"subscriptions_count))\{([^}]*)\}", line)  # fmt: skip
        if match and 'topic="persistent://public/default/cf-labels"' in match.group(2):
            labels[match.group(1)] = sorted(re.findall(r"(\w+)=", match.group(2)))
    return {"status": page.status_code, "labels": labels}


@scenario("stats")
def subscription_counters(probe: Probe) -> dict[str, Any]:
    """A Shared subscription's counters after negative acks and unacked messages."""
    topic = T + "cf-subcounters"
    path = "/admin/v2/persistent/public/default/cf-subcounters/stats"
    with probe.client() as client:
        consumer = client.subscribe(
            topic, "s", consumer_type=pulsar.ConsumerType.Shared,
            negative_ack_redelivery_delay_ms=100,
        )  # fmt: skip
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(4):
            producer.send(f"m{i}".encode())
        msgs = [consumer.receive(TIMEOUT_MS) for _ in range(4)]
        consumer.acknowledge(msgs[0])
        consumer.negative_acknowledge(msgs[1])
        consumer.receive(TIMEOUT_MS)
        time.sleep(0.5)
        sub = probe.rest("GET", path)["body"]["subscriptions"]["s"]
        c = sub["consumers"][0]
        return {
            "sub": {k: sub.get(k) for k in ("msgBacklog", "unackedMessages", "type",
                    "isDurable", "isReplicated", "msgOutCounter", "msgBacklogNoDelayed",
                    "blockedSubscriptionOnUnackedMsgs")},
            "consumer": {k: c.get(k) for k in ("unackedMessages", "msgOutCounter",
                         "blockedConsumerOnUnackedMsgs", "availablePermits")},
        }  # fmt: skip


@scenario("stats")
def non_persistent_stats(probe: Probe) -> dict[str, Any]:
    """The keys of a non-persistent topic's stats with a producer and a consumer."""
    topic = "non-persistent://public/default/cf-np-stats"
    with probe.client() as client:
        client.subscribe(topic, "s")
        client.create_producer(topic).send(b"x")
        answer = probe.rest("GET", "/admin/v2/non-persistent/public/default/cf-np-stats/stats")
        return {"status": answer["status"], "keys": shape(answer["body"])}


@scenario("stats")
def partitioned_stats_keys(probe: Probe) -> dict[str, Any]:
    """The keys of partitioned-stats with a producer."""
    path = "/admin/v2/persistent/public/default/cf-pstats"
    probe.rest("PUT", path + "/partitions", 2)
    with probe.client() as client:
        client.create_producer(T + "cf-pstats").send(b"x")
        answer = probe.rest("GET", path + "/partitioned-stats?perPartition=false")
        return {"status": answer["status"], "keys": shape(answer["body"])}


@scenario("stats")
def load_report_keys(probe: Probe) -> dict[str, Any]:
    """The keys of the broker's load report."""
    answer = probe.rest("GET", "/admin/v2/broker-stats/load-report")
    return {
        "status": answer["status"],
        "keys": sorted(answer["body"]) if isinstance(answer["body"], dict) else answer["body"],
    }
