"""A topic's properties over REST (``PUT/GET/DELETE .../{topic}/properties``), as Pulsar answers.

The answers were read off Pulsar 4.0.7 standalone (conformance/ scenario ``topic_properties``):
a non-partitioned topic keeps them in its managed ledger, a partitioned one in its metadata,
never in its partitions.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.emubroker.admin.conftest import Admin

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

NS = "/admin/v2/persistent/public/default"
T = f"{NS}/t"
P = f"{NS}/p"
TOPIC = "persistent://public/default/t"
METADATA = "application/vnd.partitioned-topic-metadata+json"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


async def _create_partitioned(admin: Admin, path: str, body: str) -> tuple[int, Any]:
    response = await admin.client.put(
        f"{path}/partitions", data=body, headers={"Content-Type": METADATA}
    )
    return response.status, await response.text()


async def test_properties_given_at_creation_are_kept_then_merged_and_removed(
    admin: Admin,
) -> None:
    assert await admin.call("PUT", T, json={"key1": "value1"}) == (204, None)
    assert await admin.ok("GET", f"{T}/properties") == {"key1": "value1"}
    new = {"key1": "value1-updated", "key2": "value2"}
    assert await admin.call("PUT", f"{T}/properties", json=new) == (204, None)
    assert await admin.ok("GET", f"{T}/properties") == new
    assert await admin.call("PUT", f"{T}/properties", json={"key3": "value3"}) == (204, None)
    assert await admin.ok("GET", f"{T}/properties") == {**new, "key3": "value3"}
    assert await admin.call("DELETE", f"{T}/properties?key=key1") == (204, None)
    assert await admin.ok("GET", f"{T}/properties") == {"key2": "value2", "key3": "value3"}
    # A key that is not set, no key, an empty map: nothing changes.
    assert await admin.call("DELETE", f"{T}/properties?key=nope") == (204, None)
    assert await admin.call("DELETE", f"{T}/properties") == (204, None)
    assert await admin.call("PUT", f"{T}/properties", json={}) == (204, None)
    assert await admin.call("PUT", f"{T}/properties") == (204, None)
    assert await admin.ok("GET", f"{T}/properties") == {"key2": "value2", "key3": "value3"}


async def test_a_topic_created_without_properties_has_an_empty_map(admin: Admin) -> None:
    assert await admin.call("PUT", T) == (204, None)
    assert await admin.call("GET", f"{T}/properties") == (200, {})


async def test_a_topic_made_by_a_client_has_properties_too(admin: Admin) -> None:
    # A partition of a partitioned topic exists from the topic's creation on, stored or not.
    assert await admin.call("PUT", f"{P}/partitions", data="2") == (204, None)
    assert await admin.call("GET", f"{P}-partition-1/properties") == (200, {})
    assert await admin.call("PUT", f"{P}-partition-1/properties", json={"a": "1"}) == (204, None)
    assert await admin.ok("GET", f"{P}-partition-1/properties") == {"a": "1"}
    await admin.fails("GET", f"{P}-partition-2/properties", 404, "not found")


async def test_a_partitioned_topic_keeps_its_own_properties_in_its_metadata(admin: Admin) -> None:
    assert await _create_partitioned(
        admin, P, '{"partitions": 2, "properties": {"key1": "value1"}}'
    ) == (204, "")
    assert await admin.ok("GET", f"{P}/properties") == {"key1": "value1"}
    assert await admin.ok("GET", f"{P}/partitions") == {
        "partitions": 2,
        "deleted": False,
        "properties": {"key1": "value1"},
    }
    # Never copied to the partitions, which have their own.
    assert await admin.ok("GET", f"{P}-partition-0/properties") == {}
    assert await admin.call("PUT", f"{P}/properties", json={"key2": "v2"}) == (204, None)
    assert await admin.call("DELETE", f"{P}/properties?key=key1") == (204, None)
    assert await admin.call("DELETE", f"{P}/properties?key=nope") == (204, None)
    assert await admin.ok("GET", f"{P}/properties") == {"key2": "v2"}
    assert await admin.ok("GET", f"{P}-partition-0/properties") == {}
    # Growing the topic keeps them.
    assert await admin.call("POST", f"{P}/partitions", data="3") == (204, None)
    assert await admin.ok("GET", f"{P}/partitions") == {
        "partitions": 3,
        "deleted": False,
        "properties": {"key2": "v2"},
    }


async def test_a_partitioned_topic_created_without_properties_answers_an_empty_body(
    admin: Admin,
) -> None:
    # The Go admin client's Create sends "properties": null: Pulsar keeps a null map.
    assert await _create_partitioned(admin, P, '{"partitions": 2, "properties": null}') == (
        204,
        "",
    )
    assert await admin.call("PUT", f"{NS}/q/partitions", data="2") == (204, None)
    for path in (P, f"{NS}/q"):
        assert await admin.call("GET", f"{path}/properties") == (200, None)
        assert await admin.ok("GET", f"{path}/partitions") == {"partitions": 2, "deleted": False}
        assert await admin.call("DELETE", f"{path}/properties?key=k") == (204, None)
        assert await admin.call("GET", f"{path}/properties") == (200, None)
    assert await admin.call("PUT", f"{P}/properties", json={"k": "v"}) == (204, None)
    assert await admin.ok("GET", f"{P}/properties") == {"k": "v"}


async def test_numbers_and_booleans_are_kept_as_their_json_text(admin: Admin) -> None:
    assert await admin.call("PUT", T, data='{"i": 7}') == (204, None)
    body = '{"n": 1, "f": 1.50, "t": true, "s": "x\\u00e9"}'
    assert await admin.call("PUT", f"{T}/properties", data=body) == (204, None)
    assert await admin.ok("GET", f"{T}/properties") == {
        "i": "7",
        "n": "1",
        "f": "1.50",
        "t": "true",
        "s": "xé",
    }
    assert await _create_partitioned(admin, P, '{"partitions": 1, "properties": {"b": false}}') == (
        204,
        "",
    )
    assert await admin.ok("GET", f"{P}/properties") == {"b": "false"}


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("[1]", "Invalid topic properties"),
        ("nope", "Malformed JSON in topic properties"),
        ('{"o": {"a": 1}}', "the value of 'o' must be a string, not an object"),
        ('{"l": [1]}', "the value of 'l' must be a string, not an array"),
    ],
)
async def test_a_bad_properties_body_is_a_400(admin: Admin, body: str, reason: str) -> None:
    assert await admin.call("PUT", T) == (204, None)
    await admin.fails("PUT", f"{T}/properties", 400, reason, data=body)
    await admin.fails("PUT", f"{NS}/other", 400, reason, data=body)
    status, text = await _create_partitioned(admin, P, f'{{"partitions": 1, "properties": {body}}}')
    assert status == 400, text
    assert await admin.ok("GET", f"{T}/properties") == {}
    assert await admin.ok("GET", NS) == [TOPIC]  # nothing else was created


async def test_a_null_value_removes_a_partitioned_topics_key_and_is_refused_elsewhere(
    admin: Admin,
) -> None:
    # Pulsar's stored PartitionedTopicMetadata leaves null entries out; a managed ledger cannot
    # keep one (Pulsar: a 500 at creation, no answer to a PUT).
    body = '{"partitions": 1, "properties": {"a": "1", "b": "2", "z": null}}'
    assert await _create_partitioned(admin, P, body) == (204, "")
    assert await admin.ok("GET", f"{P}/properties") == {"a": "1", "b": "2"}
    assert await admin.call("PUT", f"{P}/properties", data='{"a": null, "c": "3"}') == (204, None)
    assert await admin.ok("GET", f"{P}/properties") == {"b": "2", "c": "3"}
    assert await admin.call("PUT", f"{NS}/q/partitions", data="1") == (204, None)
    assert await admin.call("GET", f"{NS}/q/properties") == (200, None)
    assert await admin.call("PUT", f"{NS}/q/properties", data='{"a": null}') == (204, None)
    assert await admin.call("GET", f"{NS}/q/properties") == (200, {})
    reason = "the value of 'z' must be a string, not null"
    await admin.fails("PUT", T, 400, reason, data='{"z": null}')
    assert await admin.call("PUT", T) == (204, None)
    await admin.fails("PUT", f"{T}/properties", 400, reason, data='{"a": "1", "z": null}')
    assert await admin.ok("GET", f"{T}/properties") == {}


async def test_the_metadata_media_type_takes_a_bare_count_too(admin: Admin) -> None:
    assert await _create_partitioned(admin, P, "3") == (204, "")
    assert await admin.ok("GET", f"{P}/partitions") == {"partitions": 3, "deleted": False}


async def test_a_missing_topic_is_a_404(admin: Admin) -> None:
    for path in (f"{T}/properties", "/admin/v2/persistent/public/nope/t/properties"):
        await admin.fails("GET", path, 404, "not found")
        await admin.fails("PUT", path, 404, "not found", json={"a": "1"})
        await admin.fails("DELETE", f"{path}?key=a", 404, "not found")
    await admin.fails("GET", f"{T}/properties", 404, f"Topic {TOPIC} not found")
    # As Pulsar: an empty map is answered before anything is checked.
    assert await admin.call("PUT", f"{T}/properties", json={}) == (204, None)
    assert await admin.ok("GET", NS) == []  # and nothing was created


async def test_non_persistent_topics_have_no_properties_routes(admin: Admin) -> None:
    np = "/admin/v2/non-persistent/public/default"
    assert await admin.call("PUT", f"{np}/n", json={"a": "1"}) == (204, None)
    assert await _create_partitioned(
        admin, f"{np}/np", '{"partitions": 2, "properties": {"a": "1"}}'
    ) == (
        204,
        "",
    )
    for name in ("n", "np", "missing"):
        path = f"{np}/{name}/properties"
        reason = "Need to provide a persistent topic name"
        await admin.fails("GET", path, 406, reason)
        await admin.fails("PUT", path, 406, reason, json={"b": "2"})
        await admin.fails("DELETE", f"{path}?key=a", 406, reason)
    # A non-persistent partitioned topic's metadata keeps them all the same.
    assert await admin.ok("GET", f"{np}/np/partitions") == {
        "partitions": 2,
        "deleted": False,
        "properties": {"a": "1"},
    }
