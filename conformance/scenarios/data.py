"""Schemas (admin and producers under each strategy), compacted reads, reader seeks."""

from __future__ import annotations

import functools
import time
from typing import Any

import pulsar
from pulsar.schema import Integer, JsonSchema, Record, String, StringSchema

from conformance import javaprobe
from conformance.probe import Probe, normalise, outcome
from conformance.scenarios.registry import TIMEOUT_MS, T, scenario

S = "/admin/v2/schemas/public/default/"
_AVRO = '{"type":"record","name":"R","fields":[{"name":"a","type":"string"}]}'
_AVRO_B = (
    '{"type":"record","name":"R","fields":[{"name":"a","type":"string"},'
    '{"name":"b","type":["null","int"],"default":null}]}'
)


@scenario("data")
def schema_admin(probe: Probe) -> dict[str, Any]:
    """Upload, read, list, a malformed one, delete and read again, over REST."""
    path = S + "cf-schema-admin/schema"
    return {
        "get_none": probe.rest("GET", path),
        "post": probe.rest("POST", path, {"type": "AVRO", "schema": _AVRO, "properties": {}}),
        "post_same": probe.rest("POST", path, {"type": "AVRO", "schema": _AVRO, "properties": {}}),
        "post_evolved": probe.rest(
            "POST", path, {"type": "AVRO", "schema": _AVRO_B, "properties": {}}
        ),
        "get": normalise(probe.rest("GET", path)),
        "list": normalise(probe.rest("GET", S + "cf-schema-admin/schemas")),
        "malformed": probe.rest(
            "POST", path, {"type": "AVRO", "schema": "{nope", "properties": {}}
        ),
        "bad_type": probe.rest("POST", path, {"type": "WHAT", "schema": "", "properties": {}})[
            "status"
        ],
        "delete": probe.rest("DELETE", path),
        "get_deleted": probe.rest("GET", path),
    }


def _strategy(probe: Probe, namespace: str, strategy: str) -> dict[str, Any]:
    base = f"/admin/v2/namespaces/public/{namespace}"
    probe.rest("PUT", base)
    probe.rest("PUT", base + "/schemaCompatibilityStrategy", strategy)
    topic = f"persistent://public/{namespace}/t"
    v1 = type("U", (Record,), {"name": String()})
    added = type("U", (Record,), {"name": String(), "age": Integer(required=False, default=None)})
    required = type("U", (Record,), {"name": String(), "age": Integer(required=True)})
    removed = type("U", (Record,), {})
    with probe.client() as client:
        record: dict[str, Any] = {
            "v1": outcome(lambda: client.create_producer(topic, schema=JsonSchema(v1)) and "ok")
        }
        for name, cls in [("optional_added", added), ("required_added", required),
                          ("field_removed", removed)]:  # fmt: skip
            schema = JsonSchema(cls)
            record[name] = outcome(
                lambda schema=schema: client.create_producer(topic, schema=schema) and "ok"  # type: ignore[misc]
            )
        record["string_schema"] = outcome(
            lambda: client.create_producer(topic, schema=StringSchema()) and "ok"
        )
        record["consumer_string"] = outcome(
            lambda: client.subscribe(topic, "s", schema=StringSchema()) and "ok"
        )
        record["versions"] = len(
            probe.rest("GET", f"/admin/v2/schemas/public/{namespace}/t/schemas")["body"].get(
                "getSchemaResponses", []
            )
        )
    return record


@scenario("data")
def schema_backward(probe: Probe) -> dict[str, Any]:
    """JSON schema evolution under BACKWARD."""
    return _strategy(probe, "cf-sch-backward", "BACKWARD")


@scenario("data")
def schema_forward(probe: Probe) -> dict[str, Any]:
    """JSON schema evolution under FORWARD."""
    return _strategy(probe, "cf-sch-forward", "FORWARD")


@scenario("data")
def schema_always_incompatible(probe: Probe) -> dict[str, Any]:
    """JSON schema evolution under ALWAYS_INCOMPATIBLE."""
    return _strategy(probe, "cf-sch-never", "ALWAYS_INCOMPATIBLE")


@scenario("data")
def schema_always_compatible(probe: Probe) -> dict[str, Any]:
    """JSON schema evolution under ALWAYS_COMPATIBLE."""
    return _strategy(probe, "cf-sch-always", "ALWAYS_COMPATIBLE")


@scenario("data")
def compacted_consumer(probe: Probe) -> dict[str, Any]:
    """A read_compacted consumer and a plain one after compaction, and messages after it."""
    topic = T + "cf-compacted-consumer"
    path = "/admin/v2/persistent/public/default/cf-compacted-consumer/compaction"
    with probe.client() as client:
        client.subscribe(topic, "plain").close()
        producer = client.create_producer(topic, batching_enabled=False)
        for key, value in [("k1", "a"), ("k2", "a"), ("k1", "b"), ("k3", "a"), ("k3", "")]:
            producer.send(value.encode(), partition_key=key)
        probe.rest("PUT", path)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            body = probe.rest("GET", path)["body"]
            if isinstance(body, dict) and body.get("status") != "RUNNING":
                break
            time.sleep(0.2)
        producer.send(b"c", partition_key="k2")

        def drain(consumer: pulsar.Consumer) -> list[Any]:
            out: list[Any] = []
            while True:
                try:
                    msg = consumer.receive(800)
                except pulsar.Timeout:
                    return out
                out.append([msg.partition_key(), msg.data().decode()])
                consumer.acknowledge(msg)

        compacted = client.subscribe(
            topic, "compacted", is_read_compacted=True,
            initial_position=pulsar.InitialPosition.Earliest,
        )  # fmt: skip
        return {
            "compacted": drain(compacted),
            "plain": drain(client.subscribe(topic, "plain")),
        }


@scenario("data")
def reader_seeks(probe: Probe) -> dict[str, Any]:
    """A reader's seek to a message id, to earliest, to latest; has_message_available after."""
    topic = T + "cf-reader-seek"
    with probe.client() as client:
        producer = client.create_producer(topic, batching_enabled=False)
        ids = [producer.send(f"m{i}".encode()) for i in range(5)]
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        record = {"first": reader.read_next(TIMEOUT_MS).data().decode()}
        reader.seek(ids[3])
        record["after_seek_3"] = reader.read_next(TIMEOUT_MS).data().decode()
        reader.seek(pulsar.MessageId.earliest)
        record["after_seek_earliest"] = reader.read_next(TIMEOUT_MS).data().decode()
        reader.seek(pulsar.MessageId.latest)
        record["available_after_latest"] = reader.has_message_available()
        producer.send(b"new")
        record["after_latest_then_send"] = reader.read_next(TIMEOUT_MS).data().decode()
        return record


def _versions(probe: Probe, topic: str, namespace: str = "default") -> Any:
    """The schema versions of a topic over REST: status, then each version's number and type."""
    answer = probe.rest("GET", f"/admin/v2/schemas/public/{namespace}/{topic}/schemas")
    body = answer["body"]
    if isinstance(body, dict):
        body = [[s.get("version"), s.get("type")] for s in body.get("getSchemaResponses", [])]
    return {"status": answer["status"], "versions": body}


_GET_OR_CREATE = javaprobe.job("schema-goc", f"multi-schema {T}cf-schema-goc")


@scenario("data")
def schema_get_or_create(probe: Probe) -> dict[str, Any]:
    """Schemas registered by producers and consumers, and the versions REST shows after.

    A Java producer without a schema sending messages of several schemas (GET_OR_CREATE_SCHEMA,
    which the Python client never sends), and Python consumers and producers with JSON schemas.
    """
    v1 = _record("U", name=String())
    v2 = _record("U", name=String(), age=Integer(required=False, default=None))
    required = _record("U", name=String(), age=Integer(required=True))
    topic = T + "cf-schema-registers"
    record: dict[str, Any] = {"java_sends": javaprobe.observe(probe.target, _GET_OR_CREATE)}
    record["java_versions"] = normalise(probe.rest("GET", S + "cf-schema-goc/schemas"))
    with probe.client() as client:
        steps = [("consumer_v1", "a", v1), ("producer_v2", "", v2), ("consumer_v2", "b", v2),
                 ("producer_v1", "", v1), ("consumer_required", "c", required),
                 ("producer_required", "", required)]  # fmt: skip
        for name, subscription, cls in steps:
            schema = JsonSchema(cls)
            if subscription:
                call = functools.partial(client.subscribe, topic, subscription, schema=schema)
            else:
                call = functools.partial(client.create_producer, topic, schema=schema)
            record[name] = {
                "outcome": outcome(lambda call=call: call() and "ok"),  # type: ignore[misc]
                "after": _versions(probe, "cf-schema-registers"),
            }
    return record


def _record(record_name: str, **fields: Any) -> type[Record]:
    return type(record_name, (Record,), fields)


@scenario("data")
def schema_versions_after_delete(probe: Probe) -> dict[str, Any]:
    """Version numbers over REST across a schema's deletion, a new upload, and a forced deletion."""
    topic = "cf-schema-versions"
    path = S + topic + "/schema"
    avro = {"type": "AVRO", "schema": _AVRO, "properties": {}}
    avro_b = {"type": "AVRO", "schema": _AVRO_B, "properties": {}}
    record: dict[str, Any] = {
        "post": probe.rest("POST", path, avro),
        "post_evolved": probe.rest("POST", path, avro_b),
        "before": _versions(probe, topic),
        "delete": probe.rest("DELETE", path),
    }
    record["get_latest"] = probe.rest("GET", path)["status"]
    record["get_0"] = probe.rest("GET", path + "/0")["status"]
    record["get_1"] = probe.rest("GET", path + "/1")["status"]
    record["after_delete"] = _versions(probe, topic)
    record["post_again"] = probe.rest("POST", path, avro)
    record["get_after_post"] = {
        k: v for k, v in probe.rest("GET", path)["body"].items() if k in ("version", "type")
    }
    record["after_post"] = _versions(probe, topic)
    record["post_same_again"] = probe.rest("POST", path, avro)
    record["force_delete"] = probe.rest("DELETE", path + "?force=true")
    record["after_force_delete"] = _versions(probe, topic)
    record["post_after_force"] = probe.rest("POST", path, avro_b)
    record["after_post_after_force"] = _versions(probe, topic)
    with probe.client() as client:
        producer = outcome(
            lambda: (
                client.create_producer(T + topic, schema=JsonSchema(_record("R", a=String())))
                and "ok"
            )
        )
    record["json_producer_after"] = producer
    return record


def _topic_strategy(probe: Probe, topic: str, strategy: str | None) -> dict[str, Any]:
    """PUT (or DELETE for None) the topic's strategy; the GET once it reads back changed."""
    path = f"/admin/v2/persistent/public/cf-topic-schema/{topic}/schemaCompatibilityStrategy"
    before = probe.rest("GET", path)["body"]
    if strategy is None:
        answer = probe.rest("DELETE", path)
    else:
        answer = probe.rest("PUT", path, text=f'"{strategy}"')
    # Pulsar applies topic policies from its __change_events topic: wait until it reads back.
    deadline = time.monotonic() + 10
    got = probe.rest("GET", path)
    while got["body"] == before and time.monotonic() < deadline:
        time.sleep(0.2)
        got = probe.rest("GET", path)
    time.sleep(0.5)  # the loaded topic hears the policy a moment after the GET's cache does
    return {"set": answer["status"], "get": got}


@scenario("data")
def topic_schema_compatibility(probe: Probe) -> dict[str, Any]:
    """The topic policy schemaCompatibilityStrategy over the namespace's, seen by producers."""
    ns = "/admin/v2/namespaces/public/cf-topic-schema"
    probe.rest("PUT", ns)
    v1 = _record("U", name=String())
    v2 = _record("U", name=String(), age=Integer(required=False, default=None))
    v3 = _record("U", name=String(), age=Integer(required=False, default=None), x=String())
    required = _record("U", name=String(), age=Integer(required=True))
    topic = "persistent://public/cf-topic-schema/t"
    record: dict[str, Any] = {
        "create": probe.rest("PUT", "/admin/v2/persistent/public/cf-topic-schema/t")["status"],
        "get_unset": probe.rest(
            "GET", "/admin/v2/persistent/public/cf-topic-schema/t/schemaCompatibilityStrategy"
        ),
        "get_unset_applied": probe.rest(
            "GET",
            "/admin/v2/persistent/public/cf-topic-schema/t/schemaCompatibilityStrategy"
            "?applied=true",
        ),
        "missing_topic": probe.rest(
            "GET", "/admin/v2/persistent/public/cf-topic-schema/nope/schemaCompatibilityStrategy"
        )["status"],
    }
    with probe.client() as client:

        def produce(cls: type[Record]) -> Any:
            return outcome(lambda: client.create_producer(topic, schema=JsonSchema(cls)) and "ok")

        record["v1"] = produce(v1)
        record["set_never"] = _topic_strategy(probe, "t", "ALWAYS_INCOMPATIBLE")
        record["v2_never"] = produce(v2)
        record["set_always"] = _topic_strategy(probe, "t", "ALWAYS_COMPATIBLE")
        probe.rest("PUT", ns + "/schemaCompatibilityStrategy", text='"ALWAYS_INCOMPATIBLE"')
        record["required_always_over_ns_never"] = produce(required)
        record["applied"] = probe.rest(
            "GET",
            "/admin/v2/persistent/public/cf-topic-schema/t/schemaCompatibilityStrategy"
            "?applied=true",
        )
        record["removed"] = _topic_strategy(probe, "t", None)
        record["v3_ns_never"] = produce(v3)
        record["versions"] = _versions(probe, "t", "cf-topic-schema")
    return record
