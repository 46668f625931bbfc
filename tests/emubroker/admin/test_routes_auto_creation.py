"""The namespace's ``autoTopicCreation`` override on the REST paths that may create a topic.

``GET /lookup/v2/topic/...`` (``TopicLookupBase``), ``GET .../partitions?checkAllowAutoCreation``
(``internalGetPartitionedMetadataAsync``) and ``PUT .../subscription/{sub}`` on a missing topic
(``internalCreateSubscription``) decide by the override when it is set, by the broker's keys
once it is removed (differential scenario ``auto_topic_creation_override_rest``).
"""

from __future__ import annotations

import pytest

from tests.emubroker.admin.conftest import Admin

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

POLICY = "/admin/v2/namespaces/public/default/autoTopicCreation"
T = "/admin/v2/persistent/public/default"
LOOKUP = "/lookup/v2/topic/persistent/public/default"
OFF = {"allowAutoTopicCreation": False}
PARTITIONED_2 = {
    "allowAutoTopicCreation": True,
    "topicType": "partitioned",
    "defaultNumPartitions": 2,
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


async def test_an_override_refusing_creation_applies_to_the_rest_paths(admin: Admin) -> None:
    await admin.ok("POST", POLICY, json=OFF)  # the broker allows (Pulsar's default)
    await admin.fails("GET", f"{LOOKUP}/missing", 404, "Topic not found")
    # Pulsar cannot tell whether a non-persistent topic exists: it is always looked up.
    await admin.ok("GET", "/lookup/v2/topic/non-persistent/public/default/missing")
    await admin.fails(
        "GET", f"{T}/missing/partitions?checkAllowAutoCreation=true", 404, "not found"
    )
    await admin.fails(
        "PUT",
        f"{T}/missing/subscription/s",
        412,
        "Topic does not exist and cannot be auto-created",
    )
    # Topics that exist are looked up as before.
    await admin.ok("PUT", f"{T}/made")
    await admin.ok("GET", f"{LOOKUP}/made")
    # Removed: the broker's key decides again.
    await admin.ok("DELETE", POLICY)
    await admin.ok("GET", f"{LOOKUP}/missing")
    assert await admin.ok("GET", f"{T}/missing/partitions?checkAllowAutoCreation=true") == {
        "partitions": 0,
        "deleted": False,
    }


async def test_an_override_allowing_partitioned_creation_beats_the_broker_keys(
    admin: Admin,
) -> None:
    await admin.ok("POST", "/admin/v2/brokers/configuration/allowAutoTopicCreation/false")
    await admin.fails("GET", f"{LOOKUP}/p", 404, "Topic not found")
    await admin.ok("POST", POLICY, json=PARTITIONED_2)
    await admin.ok("GET", f"{LOOKUP}/p")
    url = f"{T}/p/partitions?checkAllowAutoCreation=true"
    assert await admin.ok("GET", url) == {"partitions": 2, "deleted": False}
    # A subscription on a missing topic creates it as the override says, on every partition.
    await admin.ok("PUT", f"{T}/q/subscription/s")
    assert await admin.ok("GET", f"{T}/q/partitions") == {"partitions": 2, "deleted": False}
    for partition in range(2):
        assert await admin.ok("GET", f"{T}/q-partition-{partition}/subscriptions") == ["s"]
    await admin.ok("DELETE", POLICY)
    await admin.fails("PUT", f"{T}/r/subscription/s", 412, "cannot be auto-created")
