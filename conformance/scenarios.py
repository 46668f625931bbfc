"""The scenarios: each one runs against a broker and returns what a user observes.

Names (tenants, namespaces, topics, subscriptions) are the same on both brokers, so they are
compared as they are. Each scenario uses its own topics, so the order they run in does not matter.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pulsar
from pulsar.schema import Integer, JsonSchema, Record, String

from conformance.probe import Probe, normalise, outcome, shape

Scenario = Callable[[Probe], dict[str, Any]]
SCENARIOS: dict[str, Scenario] = {}
# Relative tolerance for the numbers under a record's top-level key (rates measured in real time).
TOLERANCES: dict[str, dict[str, float]] = {}

T = "persistent://public/default/"
TIMEOUT_MS = 10_000


def scenario(fn: Scenario) -> Scenario:
    """Register a scenario under its function's name."""
    SCENARIOS[fn.__name__] = fn
    return fn


@scenario
def produce_consume_receipts(probe: Probe) -> dict[str, Any]:
    """Send receipts, the received messages' metadata, and the producer's sequence ids."""
    topic = T + "cf-receipts"
    with probe.client() as client:
        consumer = client.subscribe(topic, "s")
        producer = client.create_producer(topic)
        receipts = [
            probe.message_id(
                producer.send(f"m{i}".encode(), properties={"i": str(i)}, partition_key=f"k{i % 2}")
            )
            for i in range(5)
        ]
        received = []
        for _ in range(5):
            msg = consumer.receive(TIMEOUT_MS)
            received.append(
                {
                    "data": msg.data().decode(),
                    "properties": msg.properties(),
                    "key": msg.partition_key(),
                    "redelivery_count": msg.redelivery_count(),
                    "topic": msg.topic_name(),
                    "id": probe.message_id(msg.message_id()),
                    "event_timestamp": msg.event_timestamp(),
                }
            )
            consumer.acknowledge(msg)
        return {
            "receipts": receipts,
            "received": received,
            "last_sequence_id": producer.last_sequence_id(),
            "producer_name": re.sub(r"\d+", "N", producer.producer_name()),
            "nothing_more": outcome(lambda: consumer.receive(300) and "received"),
        }


@scenario
def unknown_namespace(probe: Probe) -> dict[str, Any]:
    """A producer, a consumer and admin calls on a namespace that does not exist."""
    topic = "persistent://public/cf-missing/t"
    schema = "/admin/v2/schemas/public/cf-missing/t/schema"
    with probe.client() as client:
        return {
            "producer": outcome(lambda: client.create_producer(topic) and "created"),
            "consumer": outcome(lambda: client.subscribe(topic, "s") and "subscribed"),
            "admin_namespace": probe.rest("GET", "/admin/v2/namespaces/public/cf-missing"),
            "admin_topics": probe.rest("GET", "/admin/v2/persistent/public/cf-missing"),
            "admin_stats": probe.rest("GET", "/admin/v2/persistent/public/cf-missing/t/stats"),
            "admin_unknown_topic": probe.rest(
                "GET", "/admin/v2/persistent/public/default/cf-never-created/stats"
            ),
            "admin_delete_topic": probe.rest("DELETE", "/admin/v2/persistent/public/cf-missing/t"),
            "admin_last_message_id": probe.rest(
                "GET", "/admin/v2/persistent/public/cf-missing/t/lastMessageId"
            ),
            "admin_partitions": probe.rest(
                "GET", "/admin/v2/persistent/public/cf-missing/t/partitions"
            ),
            "admin_schema_get": probe.rest("GET", schema),
            "admin_schema_post": probe.rest(
                "POST", schema, {"type": "STRING", "schema": "", "properties": {}}
            ),
            "admin_schema_delete": probe.rest("DELETE", schema),
        }


@scenario
def subscription_type_errors(probe: Probe) -> dict[str, Any]:
    """Which second subscribe succeeds, by subscription type."""
    topic = T + "cf-subtypes"
    kinds = pulsar.ConsumerType
    with probe.client() as client:

        def second(first: pulsar.ConsumerType, then: pulsar.ConsumerType, sub: str) -> Any:
            client.subscribe(topic, sub, consumer_type=first)
            return outcome(lambda: client.subscribe(topic, sub, consumer_type=then) and "ok")

        return {
            "exclusive_exclusive": second(kinds.Exclusive, kinds.Exclusive, "ee"),
            "exclusive_shared": second(kinds.Exclusive, kinds.Shared, "es"),
            "shared_shared": second(kinds.Shared, kinds.Shared, "ss"),
            "shared_failover": second(kinds.Shared, kinds.Failover, "sf"),
            "failover_failover": second(kinds.Failover, kinds.Failover, "ff"),
            "shared_key_shared": second(kinds.Shared, kinds.KeyShared, "sk"),
            "key_shared_key_shared": second(kinds.KeyShared, kinds.KeyShared, "kk"),
        }


@scenario
def admin_tenants_crud(probe: Probe) -> dict[str, Any]:
    """Create, read, conflict, delete a tenant, over the admin API."""
    path = "/admin/v2/tenants/cf-tenant"
    info = {"adminRoles": ["admin"], "allowedClusters": ["standalone"]}
    steps: dict[str, Any] = {
        "create": probe.rest("PUT", path, info),
        "get": probe.rest("GET", path),
        "create_again": probe.rest("PUT", path, info),
        "unknown_cluster": probe.rest(
            "PUT", "/admin/v2/tenants/cf-tenant2", {"allowedClusters": ["nowhere"]}
        ),
        "namespace": probe.rest("PUT", "/admin/v2/namespaces/cf-tenant/ns"),
        "delete_non_empty": probe.rest("DELETE", path),
        "delete_namespace": probe.rest("DELETE", "/admin/v2/namespaces/cf-tenant/ns"),
        "delete": probe.rest("DELETE", path),
        "get_deleted": probe.rest("GET", path),
    }
    listed = probe.rest("GET", "/admin/v2/tenants")
    steps["listed_after_delete"] = "cf-tenant" in listed["body"]
    return steps


@scenario
def admin_namespaces_crud(probe: Probe) -> dict[str, Any]:
    """Create, list, conflict, delete a namespace, and one in a tenant that does not exist."""
    path = "/admin/v2/namespaces/public/cf-ns"
    steps: dict[str, Any] = {
        "create": probe.rest("PUT", path),
        "create_again": probe.rest("PUT", path),
        "in_missing_tenant": probe.rest("PUT", "/admin/v2/namespaces/cf-nobody/ns"),
        "bad_name": probe.rest("PUT", "/admin/v2/namespaces/public/bad%20name"),
    }
    steps["listed"] = "public/cf-ns" in probe.rest("GET", "/admin/v2/namespaces/public")["body"]
    steps["delete"] = probe.rest("DELETE", path)
    steps["delete_again"] = probe.rest("DELETE", path)
    steps["get_deleted"] = probe.rest("GET", path)
    return steps


@scenario
def namespace_policies(probe: Probe) -> dict[str, Any]:
    """The policies body of a freshly created namespace, and a few policy reads and writes."""
    base = "/admin/v2/namespaces/public/cf-policies"
    created = probe.rest("PUT", base)
    return {
        "create": created,
        "policies": normalise(probe.rest("GET", base)),
        "retention": probe.rest("GET", base + "/retention"),
        "set_ttl": probe.rest("POST", base + "/messageTTL", 120),
        "ttl": probe.rest("GET", base + "/messageTTL"),
        "set_bad_ttl": probe.rest("POST", base + "/messageTTL", -5),
        "backlog_quota": probe.rest("GET", base + "/backlogQuotaMap"),
        "bundles": probe.rest("GET", base + "/bundles"),
    }


def _traffic(probe: Probe, topic: str, count: int = 3) -> tuple[dict[str, Any], dict[str, Any]]:
    """Stats and internal stats of a topic whose subscription ``s`` acknowledged ``count`` messages.

    Both are read while the producer and the consumer are still connected.
    """
    path = "/admin/v2/persistent/" + topic.removeprefix("persistent://")
    with probe.client() as client:
        consumer = client.subscribe(topic, "s")
        producer = client.create_producer(topic)
        for i in range(count):
            producer.send(f"m{i}".encode())
        for _ in range(count):
            consumer.acknowledge(consumer.receive(TIMEOUT_MS))
        # The client sends acks in groups (every 100 ms): read the stats once the backlog has
        # drained (a broker that never drains it shows it after the bound).
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            stats = probe.rest("GET", path + "/stats")["body"]
            if stats.get("subscriptions", {}).get("s", {}).get("msgBacklog") == 0:
                break
            time.sleep(0.05)
        return probe.rest("GET", path + "/stats"), probe.rest("GET", path + "/internalStats")


@scenario
def topic_stats(probe: Probe) -> dict[str, Any]:
    """The keys of a topic's stats with one producer and one consumer, and the counters."""
    answer, _ = _traffic(probe, T + "cf-stats")
    stats = answer["body"]
    sub = stats.get("subscriptions", {}).get("s", {})
    return {
        "status": answer["status"],
        "keys": shape(stats),
        "counters": {
            "msgInCounter": stats.get("msgInCounter"),
            "sub.msgOutCounter": sub.get("msgOutCounter"),
            "sub.msgBacklog": sub.get("msgBacklog"),
            "sub.type": sub.get("type"),
            "publishers": len(stats.get("publishers", [])),
            "consumers": len(sub.get("consumers", [])),
        },
    }


@scenario
def internal_stats(probe: Probe) -> dict[str, Any]:
    """The keys of a topic's internal stats, and its entry counters and cursor positions."""
    _, answer = _traffic(probe, T + "cf-internal")
    body = answer["body"]
    cursor = body.get("cursors", {}).get("s", {})
    return {
        "status": answer["status"],
        "keys": shape(body),
        "values": {
            "entriesAddedCounter": body.get("entriesAddedCounter"),
            "numberOfEntries": body.get("numberOfEntries"),
            "state": body.get("state"),
            "ledgers": len(body.get("ledgers", [])),
            "cursor.markDeletePosition": probe.position(cursor.get("markDeletePosition", "")),
            "cursor.readPosition": probe.position(cursor.get("readPosition", "")),
            "cursor.messagesConsumedCounter": cursor.get("messagesConsumedCounter"),
            "cursor.state": cursor.get("state"),
        },
    }


@scenario
def metrics_names(probe: Probe) -> dict[str, Any]:
    """The ``pulsar_*`` metric names on /metrics after some traffic."""
    _traffic(probe, T + "cf-metrics")
    page = probe.session.get(probe.target.admin_url.rstrip("/") + "/metrics/", timeout=10)
    names = set()
    for line in page.text.splitlines():
        if line.startswith("pulsar_"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return {"status": page.status_code, "names": dict.fromkeys(sorted(names), True)}


def _record(record_name: str, **fields: Any) -> type[Record]:
    return type(record_name, (Record,), dict(fields))


@scenario
def schema_compatibility(probe: Probe) -> dict[str, Any]:
    """JSON schema evolution under the default (FULL) strategy, and the admin schema answers."""
    topic = T + "cf-schema"
    v1 = _record("User", name=String())
    v2 = _record("User", name=String(), age=Integer(required=False, default=None))
    bad = _record("User", name=Integer(required=True))
    with probe.client() as client:
        first = outcome(lambda: client.create_producer(topic, schema=JsonSchema(v1)) and "ok")
        added = outcome(lambda: client.create_producer(topic, schema=JsonSchema(v2)) and "ok")
        retyped = outcome(lambda: client.create_producer(topic, schema=JsonSchema(bad)) and "ok")
        schema_path = "/admin/v2/schemas/public/default/cf-schema/schema"
        latest = probe.rest("GET", schema_path)
        version_0 = probe.rest("GET", schema_path + "/0")
        version_9 = probe.rest("GET", schema_path + "/9")
        return {
            "first": first,
            "added_optional_field": added,
            "retyped_field": retyped,
            "latest": normalise(latest),
            "version_0": normalise(version_0),
            "missing_version_9": version_9,
            "compatibility": probe.rest(
                "GET", "/admin/v2/namespaces/public/default/schemaCompatibilityStrategy"
            ),
        }


@scenario
def seek_and_readers(probe: Probe) -> dict[str, Any]:
    """Readers from earliest, from a message id (exclusive, inclusive), and consumer seeks."""
    topic = T + "cf-seek"
    with probe.client() as client:
        producer = client.create_producer(topic)
        ids = []
        for i in range(10):
            ids.append(producer.send(f"m{i}".encode()))
            # Publish times are in milliseconds: a seek by m7's time lands on the first message
            # of that millisecond, which may be m6 on a fast broker. Distinct times compare seeks.
            time.sleep(0.005)

        def read_all(reader: pulsar.Reader) -> list[str]:
            out = []
            while reader.has_message_available():
                out.append(reader.read_next(TIMEOUT_MS).data().decode())
            return out

        earliest = read_all(client.create_reader(topic, pulsar.MessageId.earliest))
        after_4 = read_all(client.create_reader(topic, ids[4]))
        from_4 = read_all(client.create_reader(topic, ids[4], start_message_id_inclusive=True))
        latest = read_all(client.create_reader(topic, pulsar.MessageId.latest))
        consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        first = [consumer.receive(TIMEOUT_MS).data().decode() for _ in range(10)]
        consumer.seek(ids[2])
        after_seek_id = consumer.receive(TIMEOUT_MS).data().decode()
        msg7 = client.create_reader(topic, ids[6]).read_next(TIMEOUT_MS)
        consumer.seek(msg7.publish_timestamp())
        after_seek_time = consumer.receive(TIMEOUT_MS).data().decode()
        return {
            "earliest": earliest,
            "after_id_4": after_4,
            "from_id_4_inclusive": from_4,
            "latest": latest,
            "consumer_first": first,
            "after_seek_to_id_2": after_seek_id,
            "after_seek_to_time_of_m7": after_seek_time,
        }


@scenario
def redelivery_counts(probe: Probe) -> dict[str, Any]:
    """Redelivery counts after negative acks, and after a consumer closed with unacked messages."""
    topic = T + "cf-redelivery"
    with probe.client() as client:
        consumer = client.subscribe(
            topic, "s", consumer_type=pulsar.ConsumerType.Shared,
            negative_ack_redelivery_delay_ms=100,
        )  # fmt: skip
        producer = client.create_producer(topic)
        producer.send(b"nacked")
        counts = []
        for _ in range(3):
            msg = consumer.receive(TIMEOUT_MS)
            counts.append(msg.redelivery_count())
            consumer.negative_acknowledge(msg)
        consumer.acknowledge(consumer.receive(TIMEOUT_MS))
        producer.send(b"abandoned")
        consumer.receive(TIMEOUT_MS)
        consumer.close()
        second = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
        again = second.receive(TIMEOUT_MS)
        return {
            "after_negative_acks": counts,
            "after_close": {"data": again.data().decode(), "count": again.redelivery_count()},
        }


THROTTLE_RATE = 100  # messages per second: 5 % of it is 5 messages, above a second's jitter
THROTTLE_SECONDS = 6
TOLERANCES["dispatch_throttling"] = {"per_second_after_first": 0.05}


@scenario
def dispatch_throttling(probe: Probe) -> dict[str, Any]:
    """Deliveries per second under a namespace's subscription dispatch rate, with a backlog."""
    base = "/admin/v2/namespaces/public/cf-throttle"
    topic = "persistent://public/cf-throttle/t"
    created = probe.rest("PUT", base)
    rate = {
        "dispatchThrottlingRateInMsg": THROTTLE_RATE,
        "dispatchThrottlingRateInByte": -1,
        "ratePeriodInSecond": 1,
        "relativeToPublishRate": False,
    }
    set_rate = probe.rest("POST", base + "/subscriptionDispatchRate", rate)
    read_back = probe.rest("GET", base + "/subscriptionDispatchRate")
    with probe.client() as client:
        client.subscribe(topic, "s").close()  # the subscription holds the backlog
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(THROTTLE_RATE * (THROTTLE_SECONDS + 2)):
            producer.send_async(f"m{i}".encode(), None)
        producer.flush()
        consumer = client.subscribe(topic, "s")
        start = time.monotonic()
        seconds = [0] * THROTTLE_SECONDS
        while (elapsed := time.monotonic() - start) < THROTTLE_SECONDS:
            try:
                msg = consumer.receive(200)
            except pulsar.Timeout:
                continue
            seconds[min(int(elapsed), THROTTLE_SECONDS - 1)] += 1
            consumer.acknowledge(msg)
        return {
            "create": created,
            "set_rate": set_rate,
            "read_back": read_back,
            "first_second": seconds[0],
            "per_second_after_first": seconds[1:],
        }


@scenario
def partitioned_topic(probe: Probe) -> dict[str, Any]:
    """A partitioned topic over the admin API, and keyed sends' receipts across its partitions."""
    path = "/admin/v2/persistent/public/default/cf-partitioned"
    created = probe.rest("PUT", path + "/partitions", 3)
    with probe.client() as client:
        producer = client.create_producer(T + "cf-partitioned", batching_enabled=False)
        receipts = [
            probe.message_id(producer.send(b"x", partition_key=f"key-{i}")) for i in range(6)
        ]
        partitions = client.get_topic_partitions(T + "cf-partitioned")
    return {
        "create": created,
        "create_again": probe.rest("PUT", path + "/partitions", 3),
        "metadata": probe.rest("GET", path + "/partitions"),
        "receipts": [(r["partition"], r["entry"]) for r in receipts],
        "partitions": partitions,
        "non_partitioned_stats_of_it": probe.rest("GET", path + "/stats"),
        "shrink": probe.rest("POST", path + "/partitions", 2),
    }


@scenario
def producer_name_conflict(probe: Probe) -> dict[str, Any]:
    """Two producers with one name, and an exclusive producer beside a shared one."""
    topic = T + "cf-producers"
    with probe.client() as client:
        client.create_producer(topic, producer_name="p1")
        same_name = outcome(lambda: client.create_producer(topic, producer_name="p1") and "ok")
        exclusive = outcome(
            lambda: client.create_producer(
                topic, access_mode=pulsar.ProducerAccessMode.Exclusive
            ) and "ok"
        )  # fmt: skip
        return {"same_name": same_name, "exclusive_beside_shared": exclusive}
