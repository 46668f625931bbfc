"""A producer's initial subscription (``CommandProducer.initial_subscription_name``).

The dead-letter producers of the clients name one: the broker creates it (durable, at the
earliest position) before the producer, on a persistent topic, only where a SUBSCRIBE could
create a subscription (topic policy, namespace ``autoSubscriptionCreationOverride``, broker
``allowAutoSubscriptionCreation``); where it may not, the producer is refused with
``NotAllowedError``, as ``ServerCnx.handleProducer`` does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from emubroker.app import Broker
from emubroker.naming import TopicName
from protocol.clock import FakeClock
from protocol.errors import ServerError
from tests.emubroker.test_handlers import Connections
from tests.emubroker.test_handlers_behaviour import (
    create_producer,
    open_test_broker,
    producer_error,
    set_policies,
)

pytestmark = pytest.mark.anyio

TOPIC = "persistent://public/default/behaviour"
REFUSED = (
    "Could not create the initial subscription due to the auto subscription creation is not"
    " allowed."
)


@pytest.fixture
async def broker(fake_clock: FakeClock, request: pytest.FixtureRequest) -> AsyncIterator[Broker]:
    overrides: dict[str, Any] = getattr(request, "param", {})
    async with await open_test_broker(fake_clock, **overrides) as running:
        yield running


@pytest.fixture
async def conns(broker: Broker) -> AsyncIterator[Connections]:
    connections = Connections(broker)
    try:
        yield connections
    finally:
        await connections.aclose()


def subscriptions(broker: Broker, topic: str = TOPIC) -> list[str]:
    loaded = broker.topics.loaded_topic(TopicName.parse(topic))
    return [] if loaded is None else loaded.subscriptions()


async def test_the_initial_subscription_is_created_with_the_producer(
    broker: Broker, conns: Connections
) -> None:
    client = await conns.open()
    await create_producer(client, producer_id=1, initial_subscription_name="triage")
    assert subscriptions(broker) == ["triage"]


@pytest.mark.parametrize("broker", [{"allowAutoSubscriptionCreation": False}], indirect=True)
async def test_broker_key_off_refuses_the_producer(broker: Broker, conns: Connections) -> None:
    client = await conns.open()
    refused = await producer_error(client, producer_id=1, initial_subscription_name="triage")
    assert (refused.error, refused.message) == (ServerError.NotAllowedError, REFUSED)
    assert subscriptions(broker) == []
    loaded = broker.topics.loaded_topic(TopicName.parse(TOPIC))
    assert loaded is not None
    assert loaded.producer_count == 0
    # Without an initial subscription the same producer is welcome.
    await create_producer(client, producer_id=2)


async def test_namespace_override_off_refuses_the_producer(
    broker: Broker, conns: Connections
) -> None:
    await set_policies(
        broker, autoSubscriptionCreationOverride={"allowAutoSubscriptionCreation": False}
    )
    client = await conns.open()
    refused = await producer_error(client, producer_id=1, initial_subscription_name="triage")
    assert (refused.error, refused.message) == (ServerError.NotAllowedError, REFUSED)
    assert subscriptions(broker) == []


@pytest.mark.parametrize("broker", [{"allowAutoSubscriptionCreation": False}], indirect=True)
async def test_namespace_override_on_allows_it_over_the_broker_key(
    broker: Broker, conns: Connections
) -> None:
    await set_policies(
        broker, autoSubscriptionCreationOverride={"allowAutoSubscriptionCreation": True}
    )
    client = await conns.open()
    await create_producer(client, producer_id=1, initial_subscription_name="triage")
    assert subscriptions(broker) == ["triage"]


@pytest.mark.parametrize("broker", [{"allowAutoSubscriptionCreation": False}], indirect=True)
async def test_an_existing_initial_subscription_needs_no_creation(
    broker: Broker, conns: Connections
) -> None:
    client = await conns.open()
    await set_policies(
        broker, autoSubscriptionCreationOverride={"allowAutoSubscriptionCreation": True}
    )
    await create_producer(client, producer_id=1, initial_subscription_name="triage")
    await set_policies(broker, autoSubscriptionCreationOverride=None)
    await create_producer(client, producer_id=2, initial_subscription_name="triage")
    assert subscriptions(broker) == ["triage"]


@pytest.mark.parametrize("broker", [{"allowAutoSubscriptionCreation": False}], indirect=True)
async def test_a_non_persistent_topic_has_no_initial_subscription(
    broker: Broker, conns: Connections
) -> None:
    # Pulsar creates it only on a persistent topic: elsewhere it is neither made nor checked.
    topic = "non-persistent://public/default/behaviour"
    client = await conns.open()
    await create_producer(client, topic=topic, producer_id=1, initial_subscription_name="triage")
    assert subscriptions(broker, topic) == []
