"""Producer, consumer and subscription count limits as the official client sees them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pulsar
import pytest

from emubroker.testing import RunningBroker, run_broker_in_thread
from tests.integration.conftest import make_client
from tests.support.rest import rest_call

pytestmark = pytest.mark.integration

NS = "/admin/v2/namespaces/public/default"


@pytest.fixture(scope="module")
def limited() -> Iterator[RunningBroker]:
    """A broker whose broker.conf limits producers and consumers per topic."""
    with run_broker_in_thread(
        maxProducersPerTopic=1, maxConsumersPerTopic=2, maxUnackedMessagesPerConsumer=2
    ) as running:
        yield running


@pytest.fixture
def plain() -> Iterator[RunningBroker]:
    with run_broker_in_thread() as running:
        yield running


def new_topic() -> str:
    return f"persistent://public/default/lim-{uuid.uuid4().hex[:10]}"


def rest(broker: RunningBroker, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    return rest_call(broker.admin_url, method, path, body)


def test_broker_config_limits_producers(limited: RunningBroker) -> None:
    client = make_client(limited.service_url)
    try:
        topic = new_topic()
        first = client.create_producer(topic)
        with pytest.raises(pulsar.ProducerBusy):
            client.create_producer(topic)
        first.close()
        client.create_producer(topic).close()  # room again
    finally:
        client.close()


def test_broker_config_limits_consumers_readers_included(limited: RunningBroker) -> None:
    client = make_client(limited.service_url)
    try:
        topic = new_topic()
        client.subscribe(topic, "a")
        client.create_reader(topic, pulsar.MessageId.earliest)
        with pytest.raises(pulsar.ConsumerBusy):
            client.subscribe(topic, "b")
    finally:
        client.close()


def test_namespace_policies_set_over_rest_apply_to_new_clients(plain: RunningBroker) -> None:
    client = make_client(plain.service_url)
    try:
        topic = new_topic()
        assert rest(plain, "GET", f"{NS}/maxConsumersPerSubscription") == (200, None)  # unset
        assert rest(plain, "POST", f"{NS}/maxConsumersPerSubscription", 1)[0] == 204
        assert rest(plain, "POST", f"{NS}/maxProducersPerTopic", 1)[0] == 204
        client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
        with pytest.raises(pulsar.ConsumerBusy):
            client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
        client.create_producer(topic)
        with pytest.raises(pulsar.ProducerBusy):
            client.create_producer(topic)
        assert rest(plain, "POST", f"{NS}/maxSubscriptionsPerTopic", 1)[0] == 204
        with pytest.raises(pulsar.NotAllowedError):
            client.subscribe(topic, "other")
        assert rest(plain, "DELETE", f"{NS}/maxProducersPerTopic")[0] == 204
        client.create_producer(topic)
    finally:
        client.close()


def test_stats_show_a_consumer_blocked_by_the_unacked_limit(limited: RunningBroker) -> None:
    client = make_client(limited.service_url)
    try:
        topic = new_topic()
        consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(3):
            producer.send(b"%d" % i)
        held = [consumer.receive(timeout_millis=5000) for _ in range(2)]
        path = "/admin/v2/" + topic.replace("://", "/") + "/stats"

        def blocked() -> bool:
            stats = rest(limited, "GET", path)[1]
            return bool(stats["subscriptions"]["s"]["consumers"][0]["blockedConsumerOnUnackedMsgs"])

        # The broker counts a message unacked before it sends it, so once the client holds
        # two the consumer is blocked; the third goes out only after the acks made room, so
        # once it has arrived the consumer is no longer blocked. No waiting needed either way.
        assert blocked()
        for message in held:
            consumer.acknowledge(message)
        consumer.receive(timeout_millis=5000)
        assert not blocked()
    finally:
        client.close()
