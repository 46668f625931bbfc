"""Backlog quota REST paths: namespace and topic quotas, and a refused producer over the wire."""

from __future__ import annotations

import pytest

from protocol import commands as c
from protocol.errors import ServerError
from tests.emubroker.admin.conftest import Admin, Wire

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

NS = "/admin/v2/namespaces/public/default"
TOPIC = "persistent://public/default/quota"
TOPIC_PATH = "/admin/v2/persistent/public/default/quota"
HOLD = {"limit": 1, "limitSize": 1, "limitTime": 0, "policy": "producer_request_hold"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_namespace_quotas_are_set_by_type_read_in_the_map_and_removed(admin: Admin) -> None:
    assert await admin.get(f"{NS}/backlogQuotaMap") == (200, {})
    # The Go client's tests post the size as a string, under the deprecated name.
    await admin.ok("POST", f"{NS}/backlogQuota", json={"limit": "1", "policy": HOLD["policy"]})
    age = {"limitTime": 30, "policy": "consumer_backlog_eviction"}
    await admin.ok("POST", f"{NS}/backlogQuota?backlogQuotaType=message_age", json=age)
    assert await admin.get(f"{NS}/backlogQuotaMap") == (
        200,
        {"destination_storage": HOLD, "message_age": {"limit": 0, "limitSize": 0, **age}},
    )
    await admin.ok("DELETE", f"{NS}/backlogQuota?backlogQuotaType=message_age")
    assert await admin.get(f"{NS}/backlogQuotaMap") == (200, {"destination_storage": HOLD})
    await admin.fails(
        "POST", f"{NS}/backlogQuota", 400, "Invalid backlog quota", json={"policy": 1}
    )
    await admin.fails(
        "POST", f"{NS}/backlogQuota?backlogQuotaType=x", 400, "Invalid backlogQuotaType", json=HOLD
    )
    await admin.fails("POST", "/admin/v2/namespaces/public/nope/backlogQuota", 404, "", json=HOLD)


async def test_a_producer_over_the_quota_is_refused_until_it_is_removed(
    admin: Admin, wire: Wire
) -> None:
    consumer = await wire.client()
    await consumer.send(
        c.Subscribe(
            topic=TOPIC, subscription="s", sub_type=c.SubType.EXCLUSIVE, consumer_id=1, request_id=1
        )
    )
    assert isinstance(await consumer.receive_command(), c.Success)
    await wire.produce(TOPIC, 1)  # one entry of backlog, never read
    await admin.ok("POST", f"{TOPIC_PATH}/backlogQuota", json=HOLD)
    assert await admin.get(f"{TOPIC_PATH}/backlogQuotaMap") == (
        200,
        {"destination_storage": HOLD},
    )
    applied = await admin.ok("GET", f"{TOPIC_PATH}/backlogQuotaMap?applied=true")
    assert applied["message_age"]["limitTime"] == -1  # the broker's default
    stats = await admin.ok("GET", f"{TOPIC_PATH}/stats")
    assert (stats["backlogQuotaLimitSize"], stats["backlogQuotaLimitTime"]) == (1, -1)
    client = await wire.client()
    await client.send(c.Producer(topic=TOPIC, producer_id=1, request_id=7))
    assert await client.receive_command() == c.Error(
        request_id=7,
        error=ServerError.ProducerBlockedQuotaExceededError,
        message="Cannot create producer on topic with backlog quota exceeded",
    )
    await admin.ok("DELETE", f"{TOPIC_PATH}/backlogQuota")
    await client.send(c.Producer(topic=TOPIC, producer_id=2, request_id=8))
    assert isinstance(await client.receive_command(), c.ProducerSuccess)
