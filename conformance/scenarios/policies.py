"""Broker policies enforced: backlog quotas, auto subscription creation, Key_Shared hash ranges.

These run under the ``broker-policies`` profile: a 1 s backlog quota check (Pulsar's default is
60 s) and Key_Shared without consistent hashing (the auto-split hash ranges), as the Go client's
test broker is configured.
"""

from __future__ import annotations

import time
from typing import Any

import pulsar

from conformance.probe import Probe, outcome
from conformance.scenarios.registry import TIMEOUT_MS, T, scenario

_NS = "/admin/v2/namespaces/public"
_HOLD = {"limit": "1", "policy": "producer_request_hold"}


@scenario("policies", profile="broker-policies")
def backlog_quota_rest(probe: Probe) -> dict[str, Any]:
    """Namespace and topic backlog quotas set, read and removed over REST."""
    ns = f"{_NS}/cf-bq-rest"
    topic_path = "/admin/v2/persistent/public/cf-bq-rest/t"
    record = {
        "create": probe.rest("PUT", ns),
        "map_unset": probe.rest("GET", f"{ns}/backlogQuotaMap"),
    }
    record["set_size"] = probe.rest(
        "POST", f"{ns}/backlogQuota", {"limit": "1024", "policy": "producer_exception"}
    )
    age = {"limitTime": 30, "policy": "consumer_backlog_eviction"}
    record["set_age"] = probe.rest("POST", f"{ns}/backlogQuota?backlogQuotaType=message_age", age)
    record["map"] = probe.rest("GET", f"{ns}/backlogQuotaMap")
    record["delete_age"] = probe.rest("DELETE", f"{ns}/backlogQuota?backlogQuotaType=message_age")
    record["map_after_delete"] = probe.rest("GET", f"{ns}/backlogQuotaMap")
    record["create_topic"] = probe.rest("PUT", topic_path)
    record["topic_set"] = probe.rest(
        "POST", f"{topic_path}/backlogQuota", {"limitSize": 2048, "policy": "producer_request_hold"}
    )
    time.sleep(1)  # Pulsar's topic policies travel through a system topic
    record["topic_map"] = probe.rest("GET", f"{topic_path}/backlogQuotaMap")
    record["topic_delete"] = probe.rest("DELETE", f"{topic_path}/backlogQuota")
    time.sleep(1)
    record["topic_map_after_delete"] = probe.rest("GET", f"{topic_path}/backlogQuotaMap")
    stats = probe.rest("GET", f"{topic_path}/stats")["body"]
    record["stats"] = {
        k: stats.get(k)
        for k in (
            "backlogQuotaLimitSize",
            "backlogQuotaLimitTime",
            "oldestBacklogMessageAgeSeconds",
        )
    }
    return record  # fmt: skip


@scenario("policies", profile="broker-policies")
def backlog_quota_producer_hold(probe: Probe) -> dict[str, Any]:
    """producer_request_hold: a new producer is refused, a connected one disconnected."""
    ns = f"{_NS}/cf-bq-hold"
    topic = "persistent://public/cf-bq-hold/t"
    record = {
        "create": probe.rest("PUT", ns),
        "set": probe.rest("POST", f"{ns}/backlogQuota", _HOLD),
    }
    with probe.client() as client:
        consumer = client.subscribe(topic, "s")  # never reads: all is backlog
        producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=2000)
        record["first_send"] = outcome(lambda: producer.send(b"x" * 100) and "sent")
        record["second_producer"] = outcome(lambda: client.create_producer(topic) and "created")
        time.sleep(2.5)  # a quota check ran: the first producer was disconnected
        record["send_after_check"] = outcome(lambda: producer.send(b"y") and "sent")
        stats = probe.rest("GET", "/admin/v2/persistent/public/cf-bq-hold/t/stats")["body"]
        record["stats"] = {
            k: stats[k]
            for k in (
                "backlogQuotaLimitSize",
                "backlogQuotaLimitTime",
                "oldestBacklogMessageSubscriptionName",
            )
            if k in stats  # Pulsar's null is absent
        }
        record["remove"] = probe.rest("DELETE", f"{ns}/backlogQuota")
        time.sleep(0.5)
        record["producer_after_remove"] = outcome(
            lambda: client.create_producer(topic) and "created"
        )
        consumer.close()
    return record  # fmt: skip


@scenario("policies", profile="broker-policies")
def backlog_quota_eviction(probe: Probe) -> dict[str, Any]:
    """consumer_backlog_eviction: the slowest subscription skips its oldest backlog."""
    ns = f"{_NS}/cf-bq-evict"
    topic = "persistent://public/cf-bq-evict/t"
    record: dict[str, Any] = {"create": probe.rest("PUT", ns)}
    with probe.client() as client:
        consumer = client.subscribe(topic, "s")
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(20):
            producer.send(f"m{i:02d}".encode() + b"." * 200)
        size = probe.rest("GET", "/admin/v2/persistent/public/cf-bq-evict/t/stats")["body"].get(
            "backlogSize"
        )
        record["set"] = probe.rest(
            "POST", f"{ns}/backlogQuota", {"limit": "3000", "policy": "consumer_backlog_eviction"}
        )
        time.sleep(2.5)
        stats = probe.rest("GET", "/admin/v2/persistent/public/cf-bq-evict/t/stats")["body"]
        record["backlog_after"] = stats["subscriptions"]["s"]["msgBacklog"]
        record["first_received"] = consumer.receive(TIMEOUT_MS).data()[:3].decode()
        record["backlog_size_known"] = size is not None
    return record  # fmt: skip


@scenario("policies", profile="broker-policies")
def auto_subscription_creation_off(probe: Probe) -> dict[str, Any]:
    """allowAutoSubscriptionCreation=false (dynamic): only existing subscriptions may be joined."""
    topic = T + "cf-autosub"
    key = "/admin/v2/brokers/configuration/allowAutoSubscriptionCreation"
    record = {"disable": probe.rest("POST", f"{key}/false")}
    try:
        time.sleep(1)
        with probe.client() as client:
            producer = client.create_producer(topic)
            record["new_subscription"] = outcome(
                lambda: client.subscribe(topic, "fresh") and "subscribed"
            )
            record["reader"] = outcome(
                lambda: client.create_reader(topic, pulsar.MessageId.earliest) and "reading"
            )
            record["create_over_rest"] = probe.rest(
                "PUT", "/admin/v2/persistent/public/default/cf-autosub/subscription/made"
            )
            record["existing_subscription"] = outcome(
                lambda: client.subscribe(topic, "made") and "subscribed"
            )
            producer.close()
    finally:
        record["enable"] = probe.rest("POST", f"{key}/true")
        time.sleep(1)
    return record  # fmt: skip


@scenario("policies", profile="broker-policies")
def key_shared_hash_ranges(probe: Probe) -> dict[str, Any]:
    """Key_Shared without consistent hashing: which consumer gets which key, as they join."""
    topic = T + "cf-ks-ranges"
    owners: dict[str, int] = {}
    with probe.client() as client:
        consumers = [
            client.subscribe(
                topic, "s", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=f"c{i}"
            )
            for i in range(3)
        ]
        producer = client.create_producer(topic, batching_enabled=False)
        keys = [f"key-{i}" for i in range(24)]
        for key in keys:
            producer.send(key.encode(), partition_key=key)
        for index, consumer in enumerate(consumers):
            while True:
                try:
                    msg = consumer.receive(2000)
                except pulsar.Timeout:
                    break
                owners[msg.data().decode()] = index
                consumer.acknowledge(msg)
    return {"owners": dict(sorted(owners.items()))}  # fmt: skip


@scenario("policies")
def initial_subscription_not_allowed(probe: Probe) -> dict[str, Any]:
    """A dead-letter producer's initial subscription where the namespace forbids creating one."""
    ns = "public/cf-initsub-off"
    topic = f"persistent://{ns}/t"
    record: dict[str, Any] = {"create": probe.rest("PUT", f"{_NS}/cf-initsub-off")}
    record["set"] = probe.rest(
        "POST", f"{_NS}/cf-initsub-off/autoSubscriptionCreation",
        {"allowAutoSubscriptionCreation": False},
    )  # fmt: skip
    time.sleep(0.5)  # the policy reaches the broker's cache through a metadata notification
    record["subscription"] = probe.rest("PUT", f"/admin/v2/persistent/{ns}/t/subscription/s")
    with probe.client() as client:
        consumer = client.subscribe(
            topic, "s", consumer_type=pulsar.ConsumerType.Shared,
            negative_ack_redelivery_delay_ms=100,
            dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(
                max_redeliver_count=1, dead_letter_topic=f"{topic}-DLQ",
                initial_subscription_name="init",
            ),
        )  # fmt: skip
        client.create_producer(topic).send(b"poison")
        record["counts"] = []
        for _ in range(2):
            msg = consumer.receive(TIMEOUT_MS)
            record["counts"].append(msg.redelivery_count())
            consumer.negative_acknowledge(msg)
        # Past max_redeliver_count the client creates the dead-letter producer, which names the
        # initial subscription the namespace may not auto-create.
        outcome(lambda: consumer.receive(1500))
        # Pulsar refuses the dead-letter producer: the topic is made, nothing is published.
        dlq = f"/admin/v2/persistent/{ns}/t-DLQ"
        record["dlq_subscriptions"] = probe.rest("GET", f"{dlq}/subscriptions")
        stats = probe.rest("GET", f"{dlq}/stats")["body"]
        record["dlq_messages_in"] = stats.get("msgInCounter")
        record["dlq_publishers"] = len(stats.get("publishers", []))
    return record
