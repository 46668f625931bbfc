"""Topic auto-creation under the namespace's ``autoTopicCreation`` override (area ``policies``).

The broker keys of ``conformance/broker.conf`` allow non-partitioned auto-creation; each scenario
sets the override on a namespace of its own and observes what the official client and the REST
paths that may create a topic (lookup, ``partitions?checkAllowAutoCreation``, a subscription on a
missing topic) do, then removes it. One scenario turns the broker key off for its duration.
"""

from __future__ import annotations

import time
from typing import Any

import pulsar

from conformance.probe import Probe, outcome
from conformance.scenarios.registry import TIMEOUT_MS, scenario

_SETTLE_S = 0.5  # a policy write reaches Pulsar's policy cache through a metadata notification
_BROKER_KEY = "/admin/v2/brokers/configuration/allowAutoTopicCreation"


def _ok(call: Any) -> Any:
    return outcome(lambda: call() and "ok")


def _override(probe: Probe, namespace: str, body: Any) -> dict[str, Any]:
    path = f"/admin/v2/namespaces/{namespace}/autoTopicCreation"
    answer = probe.rest("POST" if body is not None else "DELETE", path, body)
    time.sleep(_SETTLE_S)
    return answer


def _rest_paths(probe: Probe, namespace: str, local: str) -> dict[str, Any]:
    """The REST answers that may create ``local`` (persistent), and its partitions after."""
    lookup = probe.rest("GET", f"/lookup/v2/topic/persistent/{namespace}/{local}")
    topic = f"/admin/v2/persistent/{namespace}/{local}"
    return {
        "lookup": lookup["status"],
        "lookup_non_persistent": probe.rest(
            "GET", f"/lookup/v2/topic/non-persistent/{namespace}/{local}"
        )["status"],
        "partitions_may_create": probe.rest(
            "GET", f"{topic}/partitions?checkAllowAutoCreation=true"
        ),
        "create_subscription": probe.rest("PUT", f"{topic}/subscription/s"),
        "partitions_after": probe.rest("GET", f"{topic}/partitions"),
    }


@scenario("policies")
def auto_topic_creation_override_off(probe: Probe) -> dict[str, Any]:
    """The override says false where the broker allows: producers, consumers, REST; removed."""
    ns = "public/cf-autotopic-off"
    topic = f"persistent://{ns}/t"
    record: dict[str, Any] = {"create": probe.rest("PUT", f"/admin/v2/namespaces/{ns}")}
    record["set"] = _override(probe, ns, {"allowAutoTopicCreation": False})
    record["get"] = probe.rest("GET", f"/admin/v2/namespaces/{ns}/autoTopicCreation")
    record["partitioned"] = probe.rest("PUT", f"/admin/v2/persistent/{ns}/p/partitions", 2)
    with probe.client() as client:
        record["producer"] = _ok(lambda: client.create_producer(topic))
        record["consumer"] = _ok(lambda: client.subscribe(topic, "s"))
        record["reader"] = _ok(lambda: client.create_reader(topic, pulsar.MessageId.earliest))
        record["partitions"] = outcome(lambda: client.get_topic_partitions(topic))
        record["non_persistent_producer"] = _ok(
            lambda: client.create_producer(f"non-persistent://{ns}/t")
        )
        record["partitioned_producer"] = _ok(
            lambda: client.create_producer(f"persistent://{ns}/p").send(b"x")
        )
        record["beyond_partitions"] = _ok(
            lambda: client.create_producer(f"persistent://{ns}/p-partition-2")
        )
        record["rest"] = _rest_paths(probe, ns, "r")
        record["remove"] = _override(probe, ns, None)
        record["get_removed"] = probe.rest("GET", f"/admin/v2/namespaces/{ns}/autoTopicCreation")
        record["producer_after_removal"] = _ok(lambda: client.create_producer(topic))
        record["rest_after_removal"] = _rest_paths(probe, ns, "r2")
    return record


@scenario("policies")
def auto_topic_creation_override_partitioned(probe: Probe) -> dict[str, Any]:
    """The override creates partitioned topics of its count; dead letters stay single; removed."""
    ns = "public/cf-autotopic-part"
    override = {
        "allowAutoTopicCreation": True,
        "topicType": "partitioned",
        "defaultNumPartitions": 3,
    }
    record: dict[str, Any] = {"create": probe.rest("PUT", f"/admin/v2/namespaces/{ns}")}
    record["set"] = _override(probe, ns, override)
    with probe.client() as client:
        producer = client.create_producer(f"persistent://{ns}/t")
        record["sent_to"] = sorted({producer.send(b"m").partition() for _ in range(9)})
        record["partitions"] = client.get_topic_partitions(f"persistent://{ns}/t")
        record["consumer_partitions"] = client.get_topic_partitions(f"persistent://{ns}/c")
        consumer = client.subscribe(f"persistent://{ns}/c", "s")
        record["dead_letter"] = client.get_topic_partitions(f"persistent://{ns}/t-s-DLQ")
        record["non_persistent"] = client.get_topic_partitions(f"non-persistent://{ns}/np")
        record["rest"] = _rest_paths(probe, ns, "r")
        record["list"] = probe.rest("GET", f"/admin/v2/persistent/{ns}/partitioned")
        record["remove"] = _override(probe, ns, None)
        record["after_removal"] = client.get_topic_partitions(f"persistent://{ns}/later")
        consumer.close()
        producer.close()
    return record


@scenario("policies")
def auto_topic_creation_override_over_broker_off(probe: Probe) -> dict[str, Any]:
    """allowAutoTopicCreation=false (dynamic) with a namespace override saying true; removed."""
    ns = "public/cf-autotopic-on"
    record: dict[str, Any] = {"create": probe.rest("PUT", f"/admin/v2/namespaces/{ns}")}
    record["disable"] = probe.rest("POST", f"{_BROKER_KEY}/false")
    try:
        time.sleep(1)
        with probe.client() as client:
            record["before"] = _ok(lambda: client.create_producer(f"persistent://{ns}/before"))
            record["set"] = _override(
                probe, ns, {"allowAutoTopicCreation": True, "topicType": "non-partitioned"}
            )
            producer = client.create_producer(f"persistent://{ns}/t")
            consumer = client.subscribe(f"persistent://{ns}/t", "s")
            producer.send(b"m")
            record["received"] = consumer.receive(TIMEOUT_MS).data().decode()
            record["partitions"] = client.get_topic_partitions(f"persistent://{ns}/t")
            record["rest"] = _rest_paths(probe, ns, "r")
            record["remove"] = _override(probe, ns, None)
            record["after_removal"] = _ok(
                lambda: client.create_producer(f"persistent://{ns}/after")
            )
            record["rest_after_removal"] = _rest_paths(probe, ns, "r2")
    finally:
        record["enable"] = probe.rest("POST", f"{_BROKER_KEY}/true")
        time.sleep(1)
    return record
