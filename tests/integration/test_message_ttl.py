"""Message TTL and ``expireMessages`` with the official client and the REST API."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pulsar
import pytest

from emubroker.app import Broker
from emubroker.testing import RunningBroker, run_broker_in_thread
from tests.integration.conftest import make_client
from tests.support.rest import rest_call

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker() -> Iterator[RunningBroker]:
    with run_broker_in_thread() as running:
        yield running


def rest(broker: RunningBroker, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    return rest_call(broker.admin_url, method, path, body)


def new_namespace(broker: RunningBroker) -> str:
    namespace = f"public/ttl-{uuid.uuid4().hex[:8]}"
    assert rest(broker, "PUT", f"/admin/v2/namespaces/{namespace}")[0] == 204
    return namespace


def produce(client: pulsar.Client, topic: str, payloads: list[bytes]) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for payload in payloads:
        producer.send(payload)
    producer.close()


def sub_stats(broker: RunningBroker, topic: str, sub: str) -> dict[str, Any]:
    status, doc = rest(broker, "GET", "/admin/v2/" + topic.replace("://", "/") + "/stats")
    assert status == 200
    return doc["subscriptions"][sub]  # type: ignore[no-any-return]


async def _check_expiry(broker: Broker, now_ms: int) -> None:
    broker.topics.check_message_expiry(now_ms=now_ms)


def receive_all(consumer: pulsar.Consumer) -> list[bytes]:
    out: list[bytes] = []
    while True:
        try:
            out.append(consumer.receive(timeout_millis=300).data())
        except pulsar.Timeout:
            return out


def test_namespace_message_ttl_round_trip_and_validation(broker: RunningBroker) -> None:
    path = f"/admin/v2/namespaces/{new_namespace(broker)}/messageTTL"
    # Never set: Pulsar answers 200 with an empty body (its null), as the differential run shows.
    assert rest(broker, "GET", path) == (200, None)
    assert rest(broker, "POST", path, 120)[0] == 204
    assert rest(broker, "GET", path) == (200, 120)
    status, doc = rest(broker, "POST", path, -1)
    assert status == 412
    assert doc == {"reason": "Invalid value for message TTL, message TTL must >= 0"}
    assert rest(broker, "GET", path) == (200, 120)
    assert rest(broker, "DELETE", path)[0] == 204
    assert rest(broker, "GET", path) == (200, None)
    assert rest(broker, "GET", "/admin/v2/namespaces/public/nope-ttl/messageTTL")[0] == 404


def test_consumer_subscribing_after_expiry_receives_only_unexpired(broker: RunningBroker) -> None:
    namespace = new_namespace(broker)
    topic = f"persistent://{namespace}/t-{uuid.uuid4().hex[:8]}"
    client = make_client(broker.service_url)
    try:
        client.subscribe(topic, "sub").close()  # a durable subscription at the start
        produce(client, topic, [b"old-0", b"old-1", b"old-2"])
        cut = int(time.time() * 1000)
        while int(time.time() * 1000) <= cut:  # the next publish times are after ``cut``
            pass
        produce(client, topic, [b"new-0", b"new-1"])
        path = f"/admin/v2/namespaces/{namespace}/messageTTL"
        assert rest(broker, "POST", path, 60)[0] == 204
        # The periodic check, run as if 60 s after ``cut``: everything published by then expired.
        broker.call(_check_expiry, broker.broker, cut + 60_000 + 1)
        stats = sub_stats(broker, topic, "sub")
        assert stats["msgBacklog"] == 2
        assert stats["totalMsgExpired"] == 3
        assert stats["lastExpireTimestamp"] > 0
        consumer = client.subscribe(topic, "sub")
        assert receive_all(consumer) == [b"new-0", b"new-1"]
        consumer.close()
    finally:
        client.close()


def test_expire_messages_over_rest_clears_older_backlog(broker: RunningBroker) -> None:
    topic = f"persistent://public/default/exp-{uuid.uuid4().hex[:8]}"
    base = "/admin/v2/" + topic.replace("://", "/")
    client = make_client(broker.service_url)
    try:
        client.subscribe(topic, "sub").close()
        produce(client, topic, [b"a", b"b", b"c", b"d"])
        assert sub_stats(broker, topic, "sub")["msgBacklog"] == 4
        # An hour: nothing is that old, nothing moves.
        assert rest(broker, "POST", f"{base}/subscription/sub/expireMessages/3600")[0] == 204
        assert sub_stats(broker, topic, "sub")["msgBacklog"] == 4
        assert rest(broker, "POST", f"{base}/subscription/sub/expireMessages/0")[0] == 204
        stats = sub_stats(broker, topic, "sub")
        assert stats["msgBacklog"] == 0
        assert stats["totalMsgExpired"] == 4
        # Nothing left: Pulsar does not issue the expiry (409).
        status, doc = rest(broker, "POST", f"{base}/subscription/sub/expireMessages/0")
        assert status == 409
        assert doc["reason"].startswith("Expire message by timestamp not issued on topic")
        status, doc = rest(broker, "POST", f"{base}/subscription/nope/expireMessages/0")
        assert status == 404
        assert doc == {"reason": f"Subscription nope not found for topic {topic}"}
        assert rest(broker, "POST", f"{base}-missing/subscription/sub/expireMessages/0")[0] == 404
        consumer = client.subscribe(topic, "sub")
        assert receive_all(consumer) == []
        consumer.close()
    finally:
        client.close()


def test_expire_messages_for_all_subscriptions_of_a_partitioned_topic(
    broker: RunningBroker,
) -> None:
    topic = f"persistent://public/default/pexp-{uuid.uuid4().hex[:8]}"
    base = "/admin/v2/" + topic.replace("://", "/")
    assert rest(broker, "PUT", f"{base}/partitions", 2)[0] == 204
    client = make_client(broker.service_url)
    try:
        for name in ("s1", "s2"):
            client.subscribe(topic, name).close()
        producer = client.create_producer(
            topic,
            batching_enabled=False,
            message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
        )
        for i in range(6):  # 3 to each partition: an empty one would answer 409
            producer.send(b"%d" % i)
        producer.close()
        assert rest(broker, "POST", f"{base}/all_subscription/expireMessages/0")[0] == 204
        status, doc = rest(broker, "GET", f"{base}/partitioned-stats")
        assert status == 200
        for name in ("s1", "s2"):
            assert doc["subscriptions"][name]["msgBacklog"] == 0
            assert doc["subscriptions"][name]["totalMsgExpired"] == 6
    finally:
        client.close()
