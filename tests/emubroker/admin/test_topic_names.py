"""Odd topic names over REST: what the binary protocol accepts, the admin API accepts too."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from emubroker.app import Broker
from emubroker.naming import TopicName
from tests.emubroker.admin.conftest import Admin, Wire

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ODD = "a\x00b %"  # a NUL byte, a space and a percent sign: valid in Pulsar's TopicName
TOPIC = f"persistent://public/default/{ODD}"
PATH = f"/admin/v2/persistent/public/default/{quote(ODD, safe='')}"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


async def test_an_odd_name_works_for_topics_policies_and_schemas(
    admin: Admin, broker: Broker, wire: Wire
) -> None:
    assert await admin.call("PUT", f"{PATH}/partitions", data="2") == (204, None)
    assert await admin.ok("GET", f"{PATH}/partitions") == {"partitions": 2, "deleted": False}
    assert await admin.ok("GET", "/admin/v2/persistent/public/default/partitioned") == [TOPIC]
    await admin.ok("POST", f"{PATH}/dispatchRate", json={"dispatchThrottlingRateInMsg": 9})
    got = await admin.ok("GET", f"{PATH}/dispatchRate")
    assert got["dispatchThrottlingRateInMsg"] == 9
    schema_path = f"/admin/v2/schemas/public/default/{quote(ODD, safe='')}/schema"
    await admin.ok("POST", schema_path, json={"type": "STRING", "schema": ""})
    assert (await admin.ok("GET", schema_path))["type"] == "STRING"
    await wire.produce(f"{TOPIC}-partition-1", 3)
    stats = await admin.ok("GET", f"{PATH}/partitioned-stats")
    assert stats["msgInCounter"] == 3
    # Everything was stored under the encoded name, so a broker reading the store finds it.
    throttling = broker.topics.throttling
    assert throttling is not None
    name = TopicName.parse(TOPIC)
    throttling.set_topic_policies(name, None)  # forget the view, keep what is stored
    await throttling.load_topic_policies()
    policies = throttling.topic_policies(name)
    assert policies is not None
    assert policies.dispatchRate is not None


async def test_an_invalid_name_is_refused_as_not_valid(admin: Admin) -> None:
    # Blank (Java's isBlank). A local name "." or ".." cannot even be addressed in a URL.
    await admin.fails(
        "PUT",
        "/admin/v2/persistent/public/default/%20%09/partitions",
        412,
        "Topic name is not valid",
        data="2",
    )
