"""Count-limit REST paths: namespace and topic policies, Pulsar's status codes, live effect."""

from __future__ import annotations

import pytest

from emubroker.app import Broker
from protocol import commands as c
from protocol.errors import ServerError
from tests.emubroker.admin.conftest import Admin, Wire

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

NS = "/admin/v2/namespaces/public/default"
TOPIC = "persistent://public/default/limited"
TOPIC_PATH = "/admin/v2/persistent/public/default/limited"

NAMESPACE_LIMITS = [
    ("maxProducersPerTopic", "max_producers_per_topic"),
    ("maxConsumersPerTopic", "max_consumers_per_topic"),
    ("maxConsumersPerSubscription", "max_consumers_per_subscription"),
    ("maxSubscriptionsPerTopic", "max_subscriptions_per_topic"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize(("segment", "field"), NAMESPACE_LIMITS)
async def test_namespace_limits_are_set_read_and_removed(
    admin: Admin, segment: str, field: str
) -> None:
    path = f"{NS}/{segment}"
    assert await admin.get(path) == (200, None)  # Pulsar's null: 200 without a body
    await admin.ok("POST", path, json=3)
    assert await admin.get(path) == (200, 3)
    assert (await admin.ok("GET", NS))[field] == 3
    await admin.ok("POST", path, json=0)
    assert await admin.get(path) == (200, 0)
    await admin.ok("DELETE", path)
    assert await admin.get(path) == (200, None)
    assert field not in await admin.ok("GET", NS)


@pytest.mark.parametrize(("segment", "field"), NAMESPACE_LIMITS)
async def test_namespace_limit_errors_are_pulsars(admin: Admin, segment: str, field: str) -> None:
    del field
    path = f"{NS}/{segment}"
    await admin.fails("POST", path, 412, f"{segment} must be 0 or more", json=-1)
    for body in ("x", 1.5, 2**31):
        got, _ = await admin.call("POST", path, json=body)
        assert got == 400, body
    assert await admin.get(path) == (200, None)  # nothing changed
    await admin.fails("POST", f"/admin/v2/namespaces/public/nope/{segment}", 404, "", json=1)
    await admin.fails("GET", f"/admin/v2/namespaces/public/nope/{segment}", 404, "")


async def producer_answer(wire: Wire, topic: str) -> c.Command:
    client = await wire.client()
    await client.send(c.Producer(topic=topic, producer_id=1, request_id=7))
    return await client.receive_command()


async def test_a_namespace_limit_applies_to_the_next_producer(admin: Admin, wire: Wire) -> None:
    await admin.ok("POST", f"{NS}/maxProducersPerTopic", json=1)
    await wire.produce(TOPIC, 1)  # its producer stays attached
    answer = await producer_answer(wire, TOPIC)
    assert answer == c.Error(
        request_id=7,
        error=ServerError.ProducerBusy,
        message=f"Topic '{TOPIC}' reached max producers limit",
    )
    await admin.ok("DELETE", f"{NS}/maxProducersPerTopic")
    assert isinstance(await producer_answer(wire, TOPIC), c.ProducerSuccess)


async def test_topic_limits_win_over_the_namespace(admin: Admin, wire: Wire) -> None:
    await admin.fails("POST", f"{TOPIC_PATH}/maxProducers", 404, "Topic not found", json=1)
    await wire.produce(TOPIC, 1)
    await admin.ok("POST", f"{NS}/maxProducersPerTopic", json=1)
    await admin.ok("POST", f"{TOPIC_PATH}/maxProducers", json=2)
    assert await admin.get(f"{TOPIC_PATH}/maxProducers") == (200, 2)
    assert isinstance(await producer_answer(wire, TOPIC), c.ProducerSuccess)
    answer = await producer_answer(wire, TOPIC)
    assert isinstance(answer, c.Error)
    assert answer.error == ServerError.ProducerBusy
    await admin.ok("DELETE", f"{TOPIC_PATH}/maxProducers")
    assert await admin.get(f"{TOPIC_PATH}/maxProducers") == (200, None)
    # applied=true: the namespace's value, else the broker's (maxConsumersPerTopic=0).
    assert await admin.get(f"{TOPIC_PATH}/maxProducers?applied=true") == (200, 1)
    assert await admin.get(f"{TOPIC_PATH}/maxConsumers?applied=true") == (200, 0)


async def test_topic_limit_paths_answer_pulsars_errors(admin: Admin, wire: Wire) -> None:
    await wire.produce(TOPIC, 1)
    for segment, reason in (
        ("maxProducers", "maxProducers must be 0 or more"),
        ("maxConsumers", "maxConsumers must be 0 or more"),
        ("maxConsumersPerSubscription", "Invalid value for maxConsumersPerSubscription"),
        ("maxSubscriptionsPerTopic", "maxSubscriptionsPerTopic must be 0 or more"),
    ):
        path = f"{TOPIC_PATH}/{segment}"
        await admin.fails("POST", path, 412, reason, json=-1)
        got, _ = await admin.call("POST", path, json="many")
        assert got == 400
        await admin.ok("POST", path, json=4)
        assert await admin.get(path) == (200, 4)


async def test_an_unset_topic_limit_answers_as_pulsar_does(admin: Admin, wire: Wire) -> None:
    # Pulsar 4.0.7: the per-subscription and subscriptions-per-topic resources return void
    # (204), maxProducers and maxConsumers an empty 200; both without a body.
    await wire.produce(TOPIC, 1)
    for segment, status in (
        ("maxProducers", 200),
        ("maxConsumers", 200),
        ("maxConsumersPerSubscription", 204),
        ("maxSubscriptionsPerTopic", 204),
    ):
        assert await admin.get(f"{TOPIC_PATH}/{segment}") == (status, None), segment
        await admin.ok("POST", f"{TOPIC_PATH}/{segment}", json=4)
        await admin.ok("DELETE", f"{TOPIC_PATH}/{segment}")
        assert await admin.get(f"{TOPIC_PATH}/{segment}") == (status, None), segment


async def test_a_topic_subscription_limit_refuses_new_subscriptions(
    admin: Admin, broker: Broker, wire: Wire
) -> None:
    await wire.produce(TOPIC, 1)
    await admin.ok("POST", f"{TOPIC_PATH}/maxSubscriptionsPerTopic", json=1)
    await wire.consumer(TOPIC, "first")
    client = await wire.client()
    await client.send(
        c.Subscribe(
            topic=TOPIC,
            subscription="second",
            sub_type=c.SubType.SHARED,
            consumer_id=1,
            request_id=3,
        )
    )
    assert await client.receive_command() == c.Error(
        request_id=3,
        error=ServerError.NotAllowedError,
        message=f"Exceed the maximum number of subscriptions of the topic: {TOPIC}",
    )
    stored = await broker.metadata.get("/admin/topic-policies/public/default/persistent/limited")
    assert stored is not None
    assert b'"maxSubscriptionsPerTopic":1' in stored.value


async def test_the_subscription_limit_refuses_subscriptions_created_over_rest(
    admin: Admin,
) -> None:
    # Pulsar's createSubscription checks the limit too; its NotAllowedException answers 409.
    await admin.ok("PUT", TOPIC_PATH)
    await admin.ok("POST", f"{NS}/maxSubscriptionsPerTopic", json=1)
    await admin.ok("PUT", f"{TOPIC_PATH}/subscription/first")
    await admin.fails(
        "PUT",
        f"{TOPIC_PATH}/subscription/second",
        409,
        f"Exceed the maximum number of subscriptions of the topic: {TOPIC}",
    )
    await admin.fails(
        "PUT", f"{TOPIC_PATH}/subscription/first", 409, "Subscription already exists for topic"
    )
    await admin.ok("DELETE", f"{NS}/maxSubscriptionsPerTopic")
    await admin.ok("PUT", f"{TOPIC_PATH}/subscription/second")


async def subscribe_answer(
    wire: Wire, topic: str, subscription: str, *, durable: bool
) -> c.Command:
    client = await wire.client()
    await client.send(
        c.Subscribe(
            topic=topic,
            subscription=subscription,
            sub_type=c.SubType.SHARED,
            consumer_id=1,
            request_id=9,
            durable=durable,
        )
    )
    return await client.receive_command()


async def test_auto_subscription_creation_broker_namespace_and_topic_levels(
    admin: Admin, wire: Wire
) -> None:
    await wire.consumer(TOPIC, "existing")
    await admin.ok("POST", "/admin/v2/brokers/configuration/allowAutoSubscriptionCreation/false")
    refused = await subscribe_answer(wire, TOPIC, "new", durable=True)
    assert refused == c.Error(
        request_id=9,
        error=ServerError.SubscriptionNotFound,
        message="Subscription does not exist",
    )
    # An existing subscription and a reader are not affected.
    assert await subscribe_answer(wire, TOPIC, "existing", durable=True) == c.Success(request_id=9)
    assert await subscribe_answer(wire, TOPIC, "reader", durable=False) == c.Success(request_id=9)
    # The namespace's override wins over the broker, the topic's over the namespace.
    override = {"allowAutoSubscriptionCreation": True}
    await admin.ok("POST", f"{NS}/autoSubscriptionCreation", json=override)
    assert await subscribe_answer(wire, TOPIC, "new", durable=True) == c.Success(request_id=9)
    override = {"allowAutoSubscriptionCreation": False}
    await admin.ok("POST", f"{TOPIC_PATH}/autoSubscriptionCreation", json=override)
    refused = await subscribe_answer(wire, TOPIC, "newer", durable=True)
    assert isinstance(refused, c.Error)
    assert refused.error == ServerError.SubscriptionNotFound
    await admin.ok("DELETE", f"{TOPIC_PATH}/autoSubscriptionCreation")
    assert await subscribe_answer(wire, TOPIC, "newer", durable=True) == c.Success(request_id=9)
