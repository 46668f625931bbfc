"""Schemas (admin and producers under each strategy), compacted reads, reader seeks."""

from __future__ import annotations

from typing import Any

import pulsar
from pulsar.schema import Integer, JsonSchema, Record, String, StringSchema

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
        import time

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
