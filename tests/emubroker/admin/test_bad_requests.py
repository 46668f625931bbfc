"""A battery of bad admin requests: each gets the right status and reason, and nothing changes.

"Nothing changes" is checked on everything a request could touch: every metadata node (policies,
partitioned-topic metadata, ownership, dynamic configuration, schemas), every topic of every
namespace, each topic's subscriptions, and the ledger store's counters.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from typing import Any

import pytest

from emubroker.app import Broker
from emubroker.naming import TopicName
from protocol.commands import TopicsMode
from tests.emubroker.admin.conftest import Admin, Wire

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

NS = "/admin/v2/persistent/public/default"
T = f"{NS}/t"
SUB = f"{T}/subscription/s"

# (method, path, body, status, reason fragment); a str body is sent as is, anything else as JSON.
BATTERY: list[tuple[str, str, Any, int, str]] = [
    # malformed bodies and wrong types
    ("PUT", "/admin/v2/tenants/x", "{", 400, "Malformed JSON"),
    ("PUT", "/admin/v2/tenants/x", {"allowedClusters": "standalone"}, 400, "Invalid tenant info"),
    ("PUT", "/admin/v2/tenants/x", [1, 2], 400, "Invalid tenant info"),
    ("PUT", "/admin/v2/clusters/c", {"serviceUrl": 5}, 400, "Invalid cluster data"),
    ("PUT", "/admin/v2/clusters/c", "null", 400, "cluster data is required"),
    ("PUT", "/admin/v2/namespaces/public/x", {"bundles": {"numBundles": "many"}}, 400, "Invalid"),
    ("PUT", "/admin/v2/namespaces/public/x", "[1, 2]", 400, "Invalid policies"),
    ("PUT", "/admin/v2/namespaces/public/x", {"bundles": {"numBundles": 10**7}}, 400, "Too many"),
    (
        "PUT",
        "/admin/v2/namespaces/public/x",
        {"bundles": {"boundaries": ["0x00000000", "zz"], "numBundles": 1}},
        400,
        "Invalid bundle boundary",
    ),
    (
        "PUT",
        "/admin/v2/namespaces/public/x",
        {"bundles": {"boundaries": ["0x00000000", "0x1ffffffff"], "numBundles": 1}},
        400,
        "outside the hash range",
    ),
    ("PUT", "/admin/v2/namespaces/public/x", {"message_ttl_in_seconds": -1}, 412, "message TTL"),
    (
        "PUT",
        "/admin/v2/namespaces/public/x",
        {"schema_compatibility_strategy": "X"},
        400,
        "Invalid",
    ),
    ("POST", "/admin/v2/namespaces/public/default/deduplication", "maybe", 400, "Malformed JSON"),
    ("POST", "/admin/v2/namespaces/public/default/deduplication", "", 400, "is required"),
    (
        "PUT",
        "/admin/v2/namespaces/public/default/schemaCompatibilityStrategy",
        '"NOPE"',
        400,
        "Invalid",
    ),
    ("POST", "/admin/v2/tenants/public", "x" * (1024 * 1024 + 10), 400, "larger than"),
    # msgspec's decoder refuses deep nesting with RecursionError: still a malformed body
    ("PUT", "/admin/v2/tenants/x", '{"a":' * 100_000, 400, "nested too deeply"),
    (
        "POST",
        "/admin/v2/namespaces/public/default/dispatchRate",
        '{"a":' * 100_000,
        400,
        "nested too deeply",
    ),
    (
        "PUT",
        "/admin/v2/namespaces/public/default/schemaCompatibilityStrategy",
        "[" * 100_000,
        400,
        "Invalid schema compatibility strategy",
    ),
    # unknown tenant, namespace, topic, subscription
    ("PUT", "/admin/v2/namespaces/nope/x", None, 404, "Tenant does not exist"),
    ("GET", "/admin/v2/namespaces/nope", None, 404, "Tenant not found"),
    ("GET", "/admin/v2/namespaces/public/nope", None, 404, "Namespace does not exist"),
    ("POST", "/admin/v2/namespaces/public/nope/deduplication", "true", 404, "Namespace does not"),
    # NamespacesBase.internalDeleteNamespace names the namespace (Pulsar 4.0.7 standalone's answer).
    (
        "DELETE",
        "/admin/v2/namespaces/public/nope",
        None,
        404,
        "Namespace public/nope does not exist.",
    ),
    ("GET", "/admin/v2/tenants/nope", None, 404, "Tenant does not exist"),
    ("DELETE", "/admin/v2/tenants/nope", None, 404, "Tenant doesn't exist"),
    ("GET", "/admin/v2/clusters/nope", None, 404, "Cluster does not exist"),
    # Topic operations on an unknown namespace: "Namespace not found" (Pulsar 4.0.7 standalone's
    # answers), but deleting the topic: the topic is not found.
    ("PUT", "/admin/v2/persistent/nope/ns/t", None, 404, "Namespace not found"),
    ("PUT", "/admin/v2/persistent/public/nope/t/partitions", "2", 404, "Namespace not found"),
    ("GET", "/admin/v2/persistent/public/nope/t/stats", None, 404, "Namespace not found"),
    ("GET", "/admin/v2/persistent/public/nope/t/internalStats", None, 404, "Namespace not found"),
    ("GET", "/admin/v2/persistent/public/nope/t/subscriptions", None, 404, "Namespace not found"),
    (
        "DELETE",
        "/admin/v2/persistent/public/nope/t",
        None,
        404,
        "Topic persistent://public/nope/t not found",
    ),
    (
        "GET",
        "/admin/v2/persistent/public/nope/t/lastMessageId",
        None,
        404,
        "Topic persistent://public/nope/t not found",
    ),
    (
        "GET",
        f"{NS}/missing/stats",
        None,
        404,
        "Topic persistent://public/default/missing not found",
    ),
    ("GET", f"{NS}/missing/internalStats", None, 404, "not found"),
    ("GET", f"{NS}/missing/partitioned-stats", None, 404, "Partitioned Topic"),
    ("GET", f"{NS}/missing/subscriptions", None, 404, "not found"),
    ("DELETE", f"{NS}/missing", None, 404, "not found"),
    ("DELETE", f"{NS}/missing/partitions", None, 404, "not found"),
    ("PUT", f"{NS}/missing/unload", None, 404, "not found"),
    ("POST", f"{NS}/missing/partitions", "3", 409, "is not the partitioned topic"),
    ("DELETE", f"{T}/subscription/nope", None, 404, "Subscription nope not found"),
    ("POST", f"{T}/subscription/nope/skip/1", None, 404, "Subscription nope not found"),
    ("POST", f"{T}/subscription/nope/resetcursor/0", None, 404, "Subscription nope not found"),
    ("GET", "/lookup/v2/topic/persistent/nope/ns/t", None, 404, "Topic not found"),
    ("GET", "/admin/v2/brokers/elsewhere", None, 404, "Cluster does not exist"),
    # Pulsar 4.0.7 standalone: the schema is looked up without checking the namespace.
    ("GET", "/admin/v2/schemas/public/nope/t/schema", None, 404, "Schema not found"),
    # bad parameters
    ("PUT", f"{NS}/u/partitions", "-1", 406, "Number of partitions should be more than 0"),
    ("PUT", f"{NS}/u/partitions", "0", 406, "Number of partitions should be more than 0"),
    ("PUT", f"{NS}/u/partitions", "1000000", 406, "less than or equal to"),
    ("PUT", f"{NS}/u/partitions", '"1.5"', 400, "number of partitions"),
    ("PUT", f"{NS}/u/partitions", '{"partitions": 2}', 400, "number of partitions"),
    ("PUT", f"{NS}/u-partition-3/partitions", "2", 412, "should not contain '-partition-'"),
    ("PUT", f"{NS}/%20/partitions", "2", 412, "Topic name is not valid"),
    ("PUT", "/admin/v2/namespaces/public/b%20d", None, 412, "Namespace name is not valid"),
    ("PUT", "/admin/v2/tenants/b%20d", {"allowedClusters": ["standalone"]}, 412, "not valid"),
    ("PUT", "/admin/v2/clusters/b%20d", {}, 412, "Cluster name is not valid"),
    ("PUT", f"{SUB}x", "tomorrow", 400, "Malformed JSON in message id"),
    ("PUT", f"{SUB}x", '"tomorrow"', 400, "Invalid message id"),
    ("PUT", f"{SUB}x", {"ledgerId": "one", "entryId": 0}, 400, "Invalid message id"),
    ("PUT", f"{SUB}x?messageId=1-2", None, 400, "Invalid message id"),
    ("POST", f"{SUB}/skip/-5", None, 400, "numMessages"),
    # Pulsar 4.0.7 (Jersey): a path parameter that is not an integer matches no route, 404.
    ("POST", f"{SUB}/skip/many", None, 404, "not an integer"),
    ("POST", f"{SUB}/resetcursor/abc", None, 404, "not an integer"),
    ("POST", f"{SUB}/resetcursor", None, 400, "A message id is required"),
    ("GET", "/admin/v2/namespaces/public/default/topics?mode=SOME", None, 400, "Invalid mode"),
    ("POST", "/admin/v2/brokers/configuration/clusterName/x", None, 412, "non-dynamic"),
    ("POST", "/admin/v2/brokers/configuration/defaultNumPartitions/-1", None, 412, "Invalid"),
    (
        "POST",
        "/admin/v2/brokers/configuration/allowAutoTopicCreationType/some",
        None,
        412,
        "Invalid",
    ),
    (
        "POST",
        "/admin/v2/schemas/public/default/t/schema",
        {"type": "NOPE"},
        400,
        "Invalid schema type",
    ),
    ("POST", "/admin/v2/schemas/public/default/t/schema", {"schema": "x"}, 400, "Invalid schema"),
    (
        "POST",
        "/admin/v2/schemas/public/default/t/schema",
        {"type": "AVRO", "schema": "not an avro schema"},
        422,
        "Invalid schema definition data for AVRO schema",
    ),
    (
        "POST",
        "/admin/v2/schemas/public/default/t/schema",
        {"type": "JSON", "schema": '{"type": "record", "name": "R", "fields": "none"}'},
        422,
        "Invalid schema definition data for JSON schema",
    ),
    (
        "POST",
        "/admin/v2/schemas/public/default/t/schema",
        {"type": "AVRO", "schema": '["null", "string"]'},
        422,
        "Avro schema typed [UNION] is not supported",
    ),
    # conflicts and refusals
    ("PUT", "/admin/v2/tenants/public", {"allowedClusters": ["standalone"]}, 409, "already exist"),
    ("PUT", "/admin/v2/namespaces/public/default", None, 409, "Namespace already exists"),
    ("PUT", T, None, 409, "This topic already exists"),
    ("PUT", f"{T}/partitions", "2", 409, "This topic already exists"),
    ("PUT", SUB, None, 409, "Subscription already exists for topic"),
    ("DELETE", T, None, 412, "Topic has active producers/subscriptions"),
    ("DELETE", SUB, None, 412, "Subscription has active connected consumers"),
    ("DELETE", "/admin/v2/tenants/public", None, 409, "still has active namespaces"),
    ("DELETE", "/admin/v2/namespaces/public/default", None, 409, "non empty namespace"),
    ("DELETE", "/admin/v2/clusters/standalone", None, 412, "Cluster not empty"),
    ("DELETE", "/admin/v2/tenants/public?force=true", None, 405, "forced deletion"),
    # routing
    (
        "GET",
        "/admin/v2/nothing-here",
        None,
        404,
        "No such REST endpoint here: GET /admin/v2/nothing-here",
    ),
    ("PATCH", "/admin/v2/tenants/public", None, 405, "Method Not Allowed"),
    ("POST", "/admin/v2/clusters", None, 405, "Method Not Allowed"),
]


async def _snapshot(broker: Broker) -> dict[str, Any]:
    store = broker.metadata
    nodes: dict[str, bytes] = {}
    pending = ["/"]
    while pending:
        path = pending.pop()
        for child in await store.children(path):
            full = f"{path.rstrip('/')}/{child}"
            node = await store.get(full)
            if node is not None:
                nodes[full] = node.value
            pending.append(full)
    topics = {
        str(ns): broker.topics.topics_of_namespace(ns, TopicsMode.ALL)
        for ns in broker.namespaces.namespaces()
    }
    subscriptions = {}
    for names in topics.values():
        for name in names:
            loaded = broker.topics.loaded_topic(TopicName.parse(name))
            if loaded is not None:
                subscriptions[name] = loaded.subscriptions()
    assert broker.dynamic is not None
    return {
        "nodes": nodes,
        "topics": topics,
        "subscriptions": subscriptions,
        "ledgers": broker.ledgers.statistics(),
        "dynamic": broker.dynamic.overrides(),
        "config": broker.dynamic.config,
    }


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


async def test_bad_requests_get_pulsars_answers_and_change_nothing(
    admin: Admin, broker: Broker, wire: Wire
) -> None:
    await wire.produce("persistent://public/default/t", 3)
    await wire.consumer("persistent://public/default/t", "s")
    before = await _snapshot(broker)
    failures = []
    for method, path, body, status, reason in BATTERY:
        kwargs: dict[str, Any] = {}
        if isinstance(body, str):
            kwargs["data"] = io.BytesIO(body.encode())  # aiohttp warns on large raw bodies
        elif body is not None:
            kwargs["json"] = body
        got, answer = await admin.call(method, path, **kwargs)
        text = answer.get("reason", "") if isinstance(answer, dict) else ""
        if got != status or reason not in text:
            failures.append((method, path, status, reason, got, answer))
    assert failures == [], "\n".join(map(repr, failures))
    assert await _snapshot(broker) == before


MIB = 1024 * 1024


def _padded(document: str, size: int) -> bytes:
    """``document`` after leading JSON whitespace, ``size`` bytes in all (still valid JSON)."""
    return b" " * (size - len(document)) + document.encode()


async def _chunks(body: bytes) -> AsyncIterator[bytes]:
    """The body in 64 KiB chunks: aiohttp sends it chunked, without a Content-Length."""
    for start in range(0, len(body), 64 * 1024):
        yield body[start : start + 64 * 1024]


async def test_valid_bodies_up_to_the_limit_are_read_whole(admin: Admin) -> None:
    roles = [f"role-{i:06d}" for i in range(60_000)]  # about 0.8 MiB of JSON
    await admin.ok(
        "PUT",
        "/admin/v2/tenants/big",
        json={"adminRoles": roles, "allowedClusters": ["standalone"]},
    )
    assert (await admin.ok("GET", "/admin/v2/tenants/big"))["adminRoles"] == roles
    rate = '{"dispatchThrottlingRateInMsg": 7}'
    for size in (400 * 1024, MIB):
        await admin.ok(
            "POST",
            "/admin/v2/namespaces/public/default/dispatchRate",
            data=io.BytesIO(_padded(rate, size)),
        )
    got = await admin.ok("GET", "/admin/v2/namespaces/public/default/dispatchRate")
    assert got["dispatchThrottlingRateInMsg"] == 7
    await admin.ok(
        "PUT",
        "/admin/v2/namespaces/public/default/schemaCompatibilityStrategy",
        data=io.BytesIO(_padded('"BACKWARD"', 300)),
    )
    path = "/admin/v2/namespaces/public/default/schemaCompatibilityStrategy"
    assert await admin.ok("GET", path) == "BACKWARD"
    await admin.ok(
        "POST",
        "/admin/v2/namespaces/public/default/deduplication",
        data=_chunks(_padded("true", MIB)),
    )


async def test_a_body_past_the_limit_is_refused_however_it_is_sent(admin: Admin) -> None:
    path = "/admin/v2/namespaces/public/default/deduplication"
    before = await admin.get(path)
    for body in (io.BytesIO(_padded("true", MIB + 1)), _chunks(_padded("true", MIB + 1))):
        await admin.fails("POST", path, 400, f"larger than {MIB} bytes", data=body)
    assert await admin.get(path) == before
