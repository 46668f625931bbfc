"""Dispatch-rate REST paths: namespace and topic policies, status codes, live effect, metrics."""

from __future__ import annotations

import pytest

from emubroker.app import Broker
from emubroker.naming import TopicName
from emubroker.ratelimit.limiter import LimiterLevel
from tests.emubroker.admin.conftest import Admin, Wire
from tests.support.prometheus import parse_exposition

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

NS = "/admin/v2/namespaces/public/default"
TOPIC = "persistent://public/default/rated"
TOPIC_PATH = "/admin/v2/persistent/public/default/rated"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_namespace_rates_are_stored_per_cluster_and_removed(
    admin: Admin, broker: Broker
) -> None:
    # Unset: Pulsar's null, 200 without a body (as Pulsar 4.0.7 standalone answers).
    assert await admin.get(f"{NS}/dispatchRate") == (200, None)
    rate = {"dispatchThrottlingRateInMsg": 7, "dispatchThrottlingRateInByte": -1}
    await admin.ok("POST", f"{NS}/dispatchRate", json=rate)
    status, body = await admin.get(f"{NS}/dispatchRate")
    assert status == 200
    assert body["dispatchThrottlingRateInMsg"] == 7
    assert body["ratePeriodInSecond"] == 1
    policies = await admin.ok("GET", NS)
    assert policies["topicDispatchRate"]["standalone"]["dispatchThrottlingRateInMsg"] == 7
    assert policies["clusterDispatchRate"]["standalone"]["dispatchThrottlingRateInMsg"] == 7
    await admin.ok("DELETE", f"{NS}/dispatchRate")
    assert await admin.get(f"{NS}/dispatchRate") == (200, None)
    policies = await admin.ok("GET", NS)
    assert "standalone" not in policies.get("clusterDispatchRate", {})
    await admin.ok(
        "POST", f"{NS}/subscriptionDispatchRate", json={"dispatchThrottlingRateInMsg": 3}
    )
    assert (await admin.get(f"{NS}/subscriptionDispatchRate"))[1][
        "dispatchThrottlingRateInMsg"
    ] == 3


async def test_bad_bodies_get_pulsars_status_codes(admin: Admin) -> None:
    for body, status in (
        ({"dispatchThrottlingRateInMsg": -2}, 412),
        ({"dispatchThrottlingRateInByte": -7}, 412),
        ({"ratePeriodInSecond": 0}, 412),
        ({"dispatchThrottlingRateInMsg": 2**31}, 400),
        ({"dispatchThrottlingRateInMsg": "x"}, 400),
    ):
        got, _ = await admin.call("POST", f"{NS}/dispatchRate", json=body)
        assert got == status, body
    got, _ = await admin.call("POST", f"{NS}/dispatchRate", data=b"{not json")
    assert got == 400
    got, _ = await admin.call("POST", "/admin/v2/namespaces/public/missing/dispatchRate", json={})
    assert got == 404
    got, _ = await admin.call("POST", f"{TOPIC_PATH}/dispatchRate", json={})
    assert got == 404  # topic policies need the topic


async def test_topic_policies_apply_live_and_show_in_metrics(
    admin: Admin, broker: Broker, wire: Wire
) -> None:
    await wire.produce(TOPIC, 3)
    await wire.consumer(TOPIC, "sub")
    name = TopicName.parse(TOPIC)
    throttling = broker.topics.throttling
    assert throttling is not None
    await admin.ok("POST", f"{TOPIC_PATH}/dispatchRate", json={"dispatchThrottlingRateInMsg": 9})
    limiter = throttling.topic_limiter(name)
    assert limiter is not None
    assert limiter.rate_on_msg() == 9
    await admin.ok(
        "POST", f"{TOPIC_PATH}/sub/dispatchRate", json={"dispatchThrottlingRateInMsg": 4}
    )
    chain = throttling.subscription_throttle(name, "sub").chain
    sub_limiter = chain.limiter(LimiterLevel.SUBSCRIPTION)
    assert sub_limiter is not None
    assert sub_limiter.rate_on_msg() == 4
    assert (await admin.get(f"{TOPIC_PATH}/sub/dispatchRate"))[1][
        "dispatchThrottlingRateInMsg"
    ] == 4
    assert await admin.get(f"{TOPIC_PATH}/subscriptionDispatchRate") == (200, None)
    await admin.ok("DELETE", f"{TOPIC_PATH}/dispatchRate")
    assert throttling.topic_limiter(name) is None
    assert await admin.get(f"{TOPIC_PATH}/dispatchRate") == (200, None)
    stored = await broker.metadata.get("/admin/topic-policies/public/default/persistent/rated")
    assert stored is not None
    assert b'"sub"' in stored.value
    metrics = (await admin.call("GET", "/metrics"))[1]
    assert "pulsar_subscription_dispatch_throttled_msg_events{" in metrics
    assert 'reason="subscription"' in metrics
    events = parse_exposition(metrics)["pulsar_subscription_dispatch_throttled_msg_events"]
    assert {s.labels["reason"] for s in events.samples} == {"broker", "topic", "subscription"}
    stats = await admin.ok("GET", f"{TOPIC_PATH}/stats")
    assert stats["subscriptions"]["sub"]["dispatchThrottledMsgEventsBySubscriptionLimit"] == 0


async def test_broker_rate_follows_dynamic_config(admin: Admin, broker: Broker) -> None:
    throttling = broker.topics.throttling
    assert throttling is not None
    assert not throttling.broker_limiter.enabled
    await admin.ok("POST", "/admin/v2/brokers/configuration/dispatchThrottlingRateInMsg/25")
    assert throttling.broker_limiter.rate_on_msg() == 25
    await admin.ok("DELETE", "/admin/v2/brokers/configuration/dispatchThrottlingRateInMsg")
    assert not throttling.broker_limiter.enabled
