"""Brokers, dynamic configuration, HTTP lookup, schemas and ``/metrics`` over REST."""

from __future__ import annotations

import urllib.parse

import pytest

from emubroker.app import Broker
from emubroker.naming import TopicName
from protocol.clock import FakeClock
from tests.emubroker.admin.conftest import Admin, Wire
from tests.support.prometheus import parse_exposition

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOPIC = "persistent://public/default/t"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


async def test_brokers_list_health_leader_version(admin: Admin) -> None:
    assert await admin.ok("GET", "/admin/v2/brokers/standalone") == ["127.0.0.1:8080"]
    assert await admin.ok("GET", "/admin/v2/brokers") == ["127.0.0.1:8080"]
    assert await admin.ok("GET", "/admin/v2/brokers/health") == "ok"
    assert await admin.ok("GET", "/admin/v2/brokers/ready") == "ok"
    assert await admin.ok("GET", "/admin/v2/brokers/leaderBroker") == {
        "serviceUrl": "http://127.0.0.1:8080",
        "brokerId": "127.0.0.1:8080",
    }
    assert (await admin.ok("GET", "/admin/v2/brokers/version")).startswith("emubroker-")
    await admin.fails("GET", "/admin/v2/brokers/elsewhere", 404, "Cluster does not exist")


async def test_owned_namespaces_after_a_lookup(admin: Admin) -> None:
    await admin.ok("GET", "/lookup/v2/topic/persistent/public/default/t")
    owned = await admin.ok("GET", "/admin/v2/brokers/standalone/127.0.0.1:8080/ownedNamespaces")
    [(bundle, status)] = owned.items()
    assert bundle.startswith("public/default/0x")
    assert status == {"broker_assignment": "shared", "is_controlled": False, "is_active": True}


async def test_dynamic_configuration_applies_live(admin: Admin, broker: Broker) -> None:
    names = await admin.ok("GET", "/admin/v2/brokers/configuration")
    assert "allowAutoTopicCreation" in names
    assert "dispatcherMaxReadBatchSize" in names
    assert "clusterName" not in names
    assert await admin.ok("GET", "/admin/v2/brokers/configuration/values") == {}
    base = "/admin/v2/brokers/configuration"
    # Pulsar 4.0.7 standalone answers an update 200 without a body.
    assert await admin.call("POST", f"{base}/allowAutoTopicCreation/false") == (200, None)
    assert await admin.ok("GET", f"{base}/values") == {"allowAutoTopicCreation": "false"}
    assert (await admin.ok("GET", f"{base}/runtime"))["allowAutoTopicCreation"] == "false"
    # Live: a new topic can no longer be auto-created ...
    with pytest.raises(Exception, match="does not exist"):
        await broker.topics.get_topic(TopicName.parse("persistent://public/default/new"))
    # ... and the override is in the metadata store for every broker of the cluster.
    node = await broker.metadata.get("/admin/configuration")
    assert node is not None
    assert b"allowAutoTopicCreation" in node.value
    await admin.ok("DELETE", f"{base}/allowAutoTopicCreation")
    assert await admin.ok("GET", f"{base}/values") == {}
    await broker.topics.get_topic(TopicName.parse("persistent://public/default/new"))


async def test_a_dynamic_value_may_hold_slashes_and_booleans_parse_as_java(
    admin: Admin, broker: Broker
) -> None:
    base = "/admin/v2/brokers/configuration"
    value = '{"key/123":"https://example.com/"}'
    # Sent %2F-encoded, as the Go admin client's custom-URL test does; Boolean.valueOf reads
    # anything but "true" as false, and the text is kept as sent.
    encoded = urllib.parse.quote(value, safe="")
    response = await admin.client.post(f"{base}/allowAutoTopicCreation/{encoded}")
    assert response.status == 200
    assert await admin.ok("GET", f"{base}/values") == {"allowAutoTopicCreation": value}
    assert broker.dynamic.config.allowAutoTopicCreation is False
    await admin.ok("POST", f"{base}/allowAutoTopicCreation/TRUE")
    assert broker.dynamic.config.allowAutoTopicCreation is True


async def test_dynamic_configuration_refusals(admin: Admin) -> None:
    base = "/admin/v2/brokers/configuration"
    await admin.fails("POST", f"{base}/clusterName/x", 412, "Can't update non-dynamic")
    await admin.fails("POST", f"{base}/noSuchKey/1", 412, "Can't update non-dynamic")
    await admin.fails("POST", f"{base}/defaultNumPartitions/many", 412, "Invalid dynamic-config")
    await admin.fails("POST", f"{base}/defaultNumPartitions/0", 412, "Invalid dynamic-config")
    await admin.fails("DELETE", f"{base}/clusterName", 412, "Can't delete non-dynamic")
    assert await admin.ok("GET", f"{base}/values") == {}


async def test_http_lookup_answers_lookup_data(admin: Admin) -> None:
    data = await admin.ok("GET", "/lookup/v2/topic/persistent/public/default/t")
    assert data["brokerUrl"] == "pulsar://127.0.0.1:6650"
    # Pulsar omits the TLS URLs a broker without TLS lacks (null), but not the legacy alias.
    assert "brokerUrlTls" not in data
    assert "httpUrlTls" not in data
    assert data["brokerUrlSsl"] == ""
    assert data["httpUrl"] == "http://127.0.0.1:8080"
    np = await admin.ok("GET", "/lookup/v2/topic/non-persistent/public/default/t")
    assert np["brokerUrl"] == "pulsar://127.0.0.1:6650"
    bundle = await admin.ok("GET", "/lookup/v2/topic/persistent/public/default/t/bundle")
    assert bundle.startswith("0x")
    await admin.fails("GET", "/lookup/v2/topic/persistent/nope/ns/t", 404, "Topic not found")
    await admin.fails(
        "GET",
        "/lookup/v2/topic/other/public/default/t",
        404,
        "No such REST endpoint here: GET /lookup/v2/topic/other/public/default/t",
    )
    await admin.fails(
        "GET", "/lookup/v2/topic/persistent/public/default/t?listenerName=x", 503, "x listener"
    )
    await admin.ok("POST", "/admin/v2/brokers/configuration/allowAutoTopicCreation/false")
    await admin.fails("GET", "/lookup/v2/topic/persistent/public/default/u", 404, "Topic not found")


async def test_schemas_over_rest(admin: Admin) -> None:
    base = "/admin/v2/schemas/public/default/t"
    await admin.fails("GET", f"{base}/schema", 404, "Schema not found")
    avro = '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'
    posted = await admin.ok("POST", f"{base}/schema", json={"type": "AVRO", "schema": avro})
    assert posted == {"version": {"version": 0}}
    got = await admin.ok("GET", f"{base}/schema")
    assert (got["version"], got["type"], got["data"]) == (0, "AVRO", avro)
    assert (await admin.ok("GET", f"{base}/schema/0"))["data"] == avro
    assert [
        s["version"] for s in (await admin.ok("GET", f"{base}/schemas"))["getSchemaResponses"]
    ] == [0]
    await admin.ok(
        "PUT", "/admin/v2/namespaces/public/default/schemaCompatibilityStrategy", data='"BACKWARD"'
    )
    breaking = '{"type":"record","name":"R","fields":[{"name":"b","type":"string"}]}'
    await admin.fails("POST", f"{base}/schema", 409, "", json={"type": "AVRO", "schema": breaking})
    await admin.fails("POST", f"{base}/schema", 400, "Invalid schema type", json={"type": "WHAT"})
    deleted = await admin.ok("DELETE", f"{base}/schema")
    assert deleted == {"version": 1}
    await admin.fails("GET", f"{base}/schema", 404, "Schema not found")


async def test_schema_post_takes_null_properties(admin: Admin) -> None:
    # What the Go admin client sends for a schema without properties.
    base = "/admin/v2/schemas/public/default/t"
    posted = await admin.ok(
        "POST", f"{base}/schema", json={"type": "STRING", "schema": "", "properties": None}
    )
    assert posted == {"version": {"version": 0}}
    assert (await admin.ok("GET", f"{base}/schema"))["properties"] == {}


async def test_schema_version_and_compatibility_of_a_payload(admin: Admin) -> None:
    # The Go admin client's GetVersionByPayload and TestCompatibilityWithPostSchemaPayload.
    base = "/admin/v2/schemas/public/default/t"
    v1 = {"type": "AVRO", "schema": '{"type":"record","name":"R","fields":[]}'}
    v2 = {
        "type": "AVRO",
        "schema": '{"type":"record","name":"R","fields":[{"name":"b","type":"string"}]}',
    }
    assert await admin.ok("POST", f"{base}/version", json=v1) == {"version": -1}
    await admin.ok("POST", f"{base}/schema", json=v1)
    assert await admin.ok("POST", f"{base}/version", json=v1) == {"version": 0}
    assert await admin.ok("POST", f"{base}/version", json=v2) == {"version": -1}
    assert await admin.call("POST", f"{base}/compatibility", json=v1) == (
        202,
        {"compatibility": True, "schemaCompatibilityStrategy": "FULL"},
    )
    # A field without a default cannot be read by the old schema's readers.
    assert await admin.ok("POST", f"{base}/compatibility", json=v2) == {
        "compatibility": False,
        "schemaCompatibilityStrategy": "FULL",
    }
    await admin.fails("POST", f"{base}/version", 400, "Invalid schema type", json={"type": "X"})


async def test_metrics_use_pulsars_names(admin: Admin, wire: Wire, fake_clock: FakeClock) -> None:
    await wire.produce(TOPIC, 2)
    await wire.consumer(TOPIC, "s")
    await admin.ok("GET", "/metrics")
    await wire.produce(TOPIC, 4)
    await fake_clock.advance(2.0)
    text = await admin.ok("GET", "/metrics")
    lines = text.splitlines()
    labels = 'cluster="standalone",namespace="public/default",topic="persistent://public/default/t"'
    for expected in (
        'pulsar_topics_count{cluster="standalone",namespace="public/default"} 1',
        f"pulsar_producers_count{{{labels}}} 2",
        f"pulsar_consumers_count{{{labels}}} 1",
        f"pulsar_msg_backlog{{{labels}}} 6",
        f"pulsar_rate_in{{{labels}}} 2.0",
        f"pulsar_rate_out{{{labels}}} 0.0",
        f'pulsar_subscription_back_log{{{labels},subscription="s"}} 6',
        f'pulsar_subscription_msg_rate_out{{{labels},subscription="s"}} 0.0',
        f'pulsar_subscription_consumers_count{{{labels},subscription="s"}} 1',
    ):
        assert expected in lines, expected
    assert any(line.startswith("pulsar_throughput_in{") for line in lines)
    assert any(line.startswith("pulsar_throughput_out{") for line in lines)
    # A scraper reads the whole page: every family and sample parses, values spelled strictly.
    families = parse_exposition(text)
    assert {s.value for s in families["pulsar_rate_in"].samples} == {2.0}
    assert families["pulsar_in_messages"].type == "counter"
