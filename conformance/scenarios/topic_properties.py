"""A topic's own properties over REST: given at creation, read, merged, removed.

``GET/PUT/DELETE .../{topic}/properties`` on a non-partitioned topic (its managed ledger's
properties), on a partitioned one (its ``PartitionedTopicMetadata``, created with Pulsar's own
media type) and on one partition; JSON values Jackson coerces or refuses; the non-persistent
domain. Bad bodies are compared by status only (the reasons are Jackson's words). Left out: the
calls Pulsar never answers (``PUT``/``DELETE`` on a missing non-partitioned topic, a null value
in a non-partitioned topic's ``PUT``), which would only time out.
"""

from __future__ import annotations

from typing import Any

from conformance.probe import TIMEOUT_S, Probe
from conformance.scenarios.registry import scenario

A = "/admin/v2/persistent/public/default/"
N = "/admin/v2/non-persistent/public/default/"
METADATA = "application/vnd.partitioned-topic-metadata+json"


def _put(probe: Probe, path: str, body: str, content_type: str) -> int:
    """A PUT with a raw body under a given media type; its status."""
    answer = probe.session.put(
        probe.target.admin_url.rstrip("/") + path,
        data=body.encode(),
        headers={"Content-Type": content_type},
        timeout=TIMEOUT_S,
    )
    return int(answer.status_code)


def _get(probe: Probe, path: str) -> dict[str, Any]:
    """A GET's status and body, an empty body told apart (Pulsar's null map)."""
    answer = probe.session.get(probe.target.admin_url.rstrip("/") + path, timeout=TIMEOUT_S)
    return {"status": answer.status_code, "body": answer.json() if answer.content else "<empty>"}


@scenario("topics")
def topic_properties(probe: Probe) -> dict[str, Any]:
    """Properties of a non-partitioned topic: at creation, merged, removed; bad bodies; 404s."""
    path = A + "cf-props"
    props = path + "/properties"
    record: dict[str, Any] = {
        "create": probe.rest("PUT", path, {"key1": "value1"}),
        "get": _get(probe, props),
        "update": probe.rest("PUT", props, {"key1": "value1-updated", "key2": "value2"}),
        "merge": probe.rest("PUT", props, {"key3": "value3"}),
        "empty_update": probe.rest("PUT", props, {}),
        "after_updates": _get(probe, props),
        "remove": probe.rest("DELETE", props + "?key=key1"),
        "remove_unset_key": probe.rest("DELETE", props + "?key=nope"),
        "remove_without_key": probe.rest("DELETE", props),
        "after_removes": _get(probe, props),
        "coerced": probe.rest("PUT", props, text='{"n": 1, "f": 1.50, "t": true}'),
        "after_coerced": _get(probe, props),
        "array_body": probe.rest("PUT", props, text="[1]")["status"],
        "text_body": probe.rest("PUT", props, text="nope")["status"],
        "object_value": probe.rest("PUT", props, text='{"o": {"a": 1}}')["status"],
        "after_bad_bodies": _get(probe, props),
        "create_plain": probe.rest("PUT", A + "cf-props-plain"),
        "plain": _get(probe, A + "cf-props-plain/properties"),
        "create_coerced": probe.rest("PUT", A + "cf-props-num", text='{"i": 7}'),
        "create_coerced_get": _get(probe, A + "cf-props-num/properties"),
        "create_object_value": probe.rest("PUT", A + "cf-props-bad", text='{"o": {}}')["status"],
        "missing": _get(probe, A + "cf-props-missing/properties"),
        "missing_empty_update": probe.rest("PUT", A + "cf-props-missing/properties", {}),
        "missing_namespace": _get(probe, "/admin/v2/persistent/public/nope/t/properties"),
    }
    return record


@scenario("topics")
def partitioned_topic_properties(probe: Probe) -> dict[str, Any]:
    """Properties of a partitioned topic: in its metadata, not its partitions; nulls; growth."""
    path = A + "cf-pprops"
    props = path + "/properties"
    body = '{"partitions": 2, "properties": {"key1": "value1", "n": 1, "z": null}}'
    record: dict[str, Any] = {
        "create": _put(probe, path + "/partitions", body, METADATA),
        "get": _get(probe, props),
        "metadata": probe.rest("GET", path + "/partitions"),
        "partition": _get(probe, path + "-partition-0/properties"),
        "update": probe.rest("PUT", props, {"key2": "value2"}),
        "null_removes": probe.rest("PUT", props, text='{"key1": null, "key3": "value3"}'),
        "remove": probe.rest("DELETE", props + "?key=n"),
        "remove_unset_key": probe.rest("DELETE", props + "?key=nope"),
        "after": _get(probe, props),
        "partition_after": _get(probe, path + "-partition-0/properties"),
        "partition_update": probe.rest("PUT", path + "-partition-1/properties", {"p": "1"}),
        "partition_own": _get(probe, path + "-partition-1/properties"),
        "beyond_partitions": _get(probe, path + "-partition-5/properties"),
        "grow": probe.rest("POST", path + "/partitions", 3),
        "metadata_grown": probe.rest("GET", path + "/partitions"),
        "object_value": _put(
            probe,
            A + "cf-pprops-bad/partitions",
            '{"partitions": 1, "properties": {"o": []}}',
            METADATA,
        ),
    }
    # Created without properties: the Go client's null map, a bare count, a bare count again
    # under the metadata media type.
    for name, create_body, content_type in (
        ("null_map", '{"partitions": 1, "properties": null}', METADATA),
        ("bare", "1", "application/json"),
        ("bare_metadata", "1", METADATA),
    ):
        other = f"{A}cf-pprops-{name}"
        record[f"{name}_create"] = _put(probe, other + "/partitions", create_body, content_type)
        record[f"{name}_get"] = _get(probe, other + "/properties")
        record[f"{name}_metadata"] = probe.rest("GET", other + "/partitions")
        record[f"{name}_remove"] = probe.rest("DELETE", other + "/properties?key=k")
        record[f"{name}_get_after_remove"] = _get(probe, other + "/properties")
    record["null_update"] = probe.rest("PUT", A + "cf-pprops-bare/properties", text='{"a": null}')
    record["after_null_update"] = _get(probe, A + "cf-pprops-bare/properties")
    return record


@scenario("topics")
def non_persistent_topic_properties(probe: Probe) -> dict[str, Any]:
    """Non-persistent topics: no properties routes; a partitioned topic's metadata keeps them."""
    body = '{"partitions": 2, "properties": {"a": "1"}}'
    record: dict[str, Any] = {
        "create": probe.rest("PUT", N + "cf-np-props", {"a": "1"}),
        "create_partitioned": _put(probe, N + "cf-np-pprops/partitions", body, METADATA),
        "metadata": probe.rest("GET", N + "cf-np-pprops/partitions"),
    }
    for name in ("cf-np-props", "cf-np-pprops", "cf-np-missing"):
        props = f"{N}{name}/properties"
        record[f"{name}_get"] = _get(probe, props)
        record[f"{name}_put"] = probe.rest("PUT", props, {"b": "2"})
        record[f"{name}_delete"] = probe.rest("DELETE", props + "?key=a")
    return record


# The partition count as Jackson reads an ``int``: numbers, numeric strings, and what it refuses.
PARTITION_COUNTS = (
    ("string", '"2"'),
    ("string_spaces", '" 2 "'),
    ("string_plus", '"+2"'),
    ("float", "2.0"),
    ("fraction", "2.7"),
    ("string_fraction", '"2.5"'),
    ("string_word", '"two"'),
    ("string_empty", '""'),
    ("boolean", "true"),
    ("null", "null"),
    ("object", "{}"),
    ("array", "[2]"),
)


@scenario("topics")
def partition_count_coercion(probe: Probe) -> dict[str, Any]:
    """A partitioned topic's count as a number, a numeric string and worse, in both bodies.

    The metadata of each topic created is read back (a missing topic's GET is another matter).
    """
    record: dict[str, Any] = {}
    cases = [
        (form, name, body, content_type)
        for name, value in PARTITION_COUNTS
        for form, body, content_type in (
            ("metadata", f'{{"partitions": {value}}}', METADATA),
            ("bare", value, "application/json"),
        )
    ]
    cases += [
        ("metadata", "absent", '{"properties": {"a": "1"}}', METADATA),
        ("bare", "empty_body", "", "application/json"),
    ]
    for form, name, body, content_type in cases:
        topic = f"{A}cf-pcount-{form}-{name.replace('_', '-')}"
        status = _put(probe, topic + "/partitions", body, content_type)
        record[f"{form}_{name}"] = status
        if status == 204:
            record[f"{form}_{name}_metadata"] = probe.rest("GET", topic + "/partitions")
    return record
