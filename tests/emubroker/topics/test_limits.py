"""Count limits: producers, consumers, consumers per subscription, subscriptions (``limits``)."""

from __future__ import annotations

import pytest

from emubroker.naming import NamespaceName, TopicName
from emubroker.policies import Policies, TopicPolicies
from emubroker.topics import Topic, TopicSettings
from emubroker.topics.limits import (
    CountLimits,
    LimitOverrides,
    LimitResolver,
    resolve_limits,
)
from emubroker.topics.throttling import topic_limit_overrides
from protocol.commands import AckType, SubType
from protocol.errors import (
    ConsumerBusyError,
    NotAllowedError,
    ProducerBusyError,
    SubscriptionNotFoundError,
)
from tests.emubroker.topics.helpers import (
    FakeConsumerSink,
    add_producer,
    mid,
    open_service,
    publish,
    settle,
    subscribe,
    topic_name,
)

pytestmark = pytest.mark.anyio

DEFAULT = NamespaceName("public", "default")


# ---- resolution -----------------------------------------------------------------------------


def test_each_limit_comes_from_the_first_level_that_sets_it() -> None:
    broker = CountLimits(max_producers=5, max_consumers=6, max_subscriptions=7)
    namespace = LimitOverrides(max_producers=3, max_consumers=0)
    topic = LimitOverrides(max_producers=1, max_consumers_per_subscription=2)
    assert resolve_limits(broker) == broker
    assert resolve_limits(broker, namespace, topic) == CountLimits(
        max_producers=1,  # topic over namespace over broker
        max_consumers=0,  # a namespace 0 lifts the broker's limit
        max_consumers_per_subscription=2,
        max_subscriptions=7,  # set nowhere else: the broker's
    )


def test_negative_policy_values_count_as_unset() -> None:
    broker = CountLimits(max_producers=4)
    assert resolve_limits(broker, LimitOverrides(max_producers=-1)) == broker
    assert resolve_limits(
        broker, LimitOverrides(max_producers=2), LimitOverrides(max_producers=-3)
    ) == CountLimits(max_producers=2)


class _TopicLevel:
    def __init__(self, overrides: LimitOverrides) -> None:
        self.overrides = overrides

    def limit_overrides(self, topic: TopicName) -> LimitOverrides | None:
        return self.overrides


def test_resolver_reads_namespace_and_topic_policies_at_each_call() -> None:
    policies = {DEFAULT: Policies(max_consumers_per_topic=3)}
    topic_level = _TopicLevel(LimitOverrides())
    resolver = LimitResolver(policies.get, topic_level)
    settings = TopicSettings(max_consumers_per_topic=9, max_producers_per_topic=8)
    name = topic_name()
    assert resolver.limits(name, settings) == CountLimits(max_producers=8, max_consumers=3)
    topic_level.overrides = LimitOverrides(max_consumers=1)
    policies[DEFAULT] = Policies(max_producers_per_topic=2)
    assert resolver.limits(name, settings) == CountLimits(max_producers=2, max_consumers=1)
    assert LimitResolver().limits(name, settings) == CountLimits(8, 9)


def test_topic_policies_carry_pulsars_field_names_and_apply_to_partitions() -> None:
    policies = TopicPolicies(maxProducerPerTopic=1, maxSubscriptionsPerTopic=0)
    assert topic_limit_overrides(policies) == LimitOverrides(max_producers=1, max_subscriptions=0)
    assert not policies.empty
    assert TopicPolicies(maxConsumerPerTopic=None).empty


# ---- producers --------------------------------------------------------------------------------


async def test_producers_over_the_limit_are_busy_until_one_leaves() -> None:
    async with open_service(max_producers_per_topic=2) as service:
        topic = await service.get_topic(topic_name("p"))
        first = await add_producer(topic, 1)
        await add_producer(topic, 2)
        with pytest.raises(
            ProducerBusyError, match=r"^Topic 'persistent://public/default/p' reached max producers"
        ):
            await add_producer(topic, 3)
        await topic.remove_producer(first)
        await add_producer(topic, 3)


async def test_namespace_policy_wins_over_the_broker_and_changes_apply_to_new_producers() -> None:
    policies = {DEFAULT: Policies(max_producers_per_topic=1)}
    async with open_service(namespace_policies=policies.get, max_producers_per_topic=5) as service:
        topic = await service.get_topic(topic_name("ns"))
        await add_producer(topic, 1)
        with pytest.raises(ProducerBusyError):
            await add_producer(topic, 2)
        policies[DEFAULT] = Policies(max_producers_per_topic=0)  # 0: no limit, broker's ignored
        for producer_id in range(2, 8):
            await add_producer(topic, producer_id)


async def test_each_partition_counts_its_own_producers() -> None:
    async with open_service(max_producers_per_topic=1) as service:
        base = topic_name("parts")
        await service.create_partitioned_topic(base, 2)
        for partition in range(2):
            await add_producer(await service.get_topic(base.partition(partition)), 1)


# ---- consumers --------------------------------------------------------------------------------


async def test_topic_consumer_limit_counts_every_subscription_and_readers() -> None:
    async with open_service(max_consumers_per_topic=2) as service:
        topic = await service.get_topic(topic_name("c"))
        await subscribe(topic, FakeConsumerSink(), subscription="a", consumer_id=1)
        reader = await subscribe(
            topic, FakeConsumerSink(), subscription="r", consumer_id=2, durable=False
        )
        with pytest.raises(ConsumerBusyError, match=r"^Topic reached max consumers limit$"):
            await subscribe(topic, FakeConsumerSink(), subscription="b", consumer_id=3)
        await reader.close()
        await subscribe(topic, FakeConsumerSink(), subscription="b", consumer_id=3)
        assert topic.consumer_count == 2


@pytest.mark.parametrize("sub_type", [SubType.SHARED, SubType.KEY_SHARED, SubType.FAILOVER])
async def test_subscription_consumer_limit(sub_type: SubType) -> None:
    async with open_service(max_consumers_per_subscription=2) as service:
        topic = await service.get_topic(topic_name("s"))
        for consumer_id in (1, 2):
            await subscribe(topic, FakeConsumerSink(), sub_type=sub_type, consumer_id=consumer_id)
        with pytest.raises(ConsumerBusyError, match=r"^Subscription reached max consumers limit$"):
            await subscribe(topic, FakeConsumerSink(), sub_type=sub_type, consumer_id=3)
        # Another subscription of the topic has its own count.
        await subscribe(
            topic, FakeConsumerSink(), subscription="other", sub_type=sub_type, consumer_id=4
        )


async def test_type_checks_come_before_the_subscription_limit() -> None:
    async with open_service(max_consumers_per_subscription=1) as service:
        topic = await service.get_topic(topic_name("x"))
        await subscribe(topic, FakeConsumerSink(), sub_type=SubType.EXCLUSIVE)
        with pytest.raises(ConsumerBusyError) as caught:
            await subscribe(topic, FakeConsumerSink(), sub_type=SubType.EXCLUSIVE, consumer_id=2)
        assert "max consumers" not in str(caught.value)


# ---- subscriptions ----------------------------------------------------------------------------


async def test_new_subscriptions_over_the_limit_are_not_allowed() -> None:
    async with open_service(max_subscriptions_per_topic=2) as service:
        topic = await service.get_topic(topic_name("subs"))
        assert isinstance(topic, Topic)
        idle = await subscribe(topic, FakeConsumerSink(), subscription="a", consumer_id=1)
        await idle.close()  # a durable subscription without consumers still counts
        await subscribe(
            topic, FakeConsumerSink(), subscription="b", sub_type=SubType.SHARED, consumer_id=2
        )
        message = "^Exceed the maximum number of subscriptions of the topic: persistent://"
        with pytest.raises(NotAllowedError, match=message):
            await subscribe(topic, FakeConsumerSink(), subscription="c", consumer_id=3)
        with pytest.raises(NotAllowedError, match=message):  # a reader's too
            await subscribe(
                topic, FakeConsumerSink(), subscription="r", consumer_id=4, durable=False
            )
        # Existing subscriptions are not affected.
        await subscribe(topic, FakeConsumerSink(), subscription="a", consumer_id=5)
        await subscribe(
            topic, FakeConsumerSink(), subscription="b", sub_type=SubType.SHARED, consumer_id=6
        )
        assert topic.subscriptions() == ["a", "b"]


async def test_missing_subscriptions_are_not_found_while_auto_creation_is_off() -> None:
    # allowAutoSubscriptionCreation=false: a durable consumer may only join a subscription that
    # exists; readers still make theirs. The key is dynamic and reaches loaded topics at once.
    async with open_service(allow_auto_subscription_creation=False) as service:
        topic = await service.get_topic(topic_name("nosub"))
        assert isinstance(topic, Topic)
        with pytest.raises(SubscriptionNotFoundError, match=r"^Subscription does not exist$"):
            await subscribe(topic, FakeConsumerSink(), subscription="a", consumer_id=1)
        await subscribe(topic, FakeConsumerSink(), subscription="r", consumer_id=2, durable=False)
        service.reconfigure(TopicSettings(allow_auto_subscription_creation=True))
        shared = SubType.SHARED
        await subscribe(topic, FakeConsumerSink(), subscription="a", consumer_id=3, sub_type=shared)
        service.reconfigure(TopicSettings(allow_auto_subscription_creation=False))
        # It exists now.
        await subscribe(topic, FakeConsumerSink(), subscription="a", consumer_id=4, sub_type=shared)
        assert topic.subscriptions() == ["a", "r"]


async def test_auto_subscription_creation_policies_win_topic_over_namespace_over_broker() -> None:
    on = {"allowAutoSubscriptionCreation": True}
    off = {"allowAutoSubscriptionCreation": False}
    policies = {DEFAULT: Policies(autoSubscriptionCreationOverride=off)}
    async with open_service(namespace_policies=policies.get) as service:
        topic = await service.get_topic(topic_name("nosub-ns"))
        with pytest.raises(SubscriptionNotFoundError):
            await subscribe(topic, FakeConsumerSink(), subscription="a", consumer_id=1)
    resolver = LimitResolver(policies.get, _TopicLevel(topic_limit_overrides(TopicPolicies())))
    settings = TopicSettings(allow_auto_subscription_creation=True)
    name = topic_name()
    assert not resolver.limits(name, settings).allow_auto_subscription_creation
    topic_level = _TopicLevel(
        topic_limit_overrides(TopicPolicies(autoSubscriptionCreationOverride=on))
    )
    assert (
        LimitResolver(policies.get, topic_level)
        .limits(name, settings)
        .allow_auto_subscription_creation
    )
    policies[DEFAULT] = Policies()
    off_broker = TopicSettings(allow_auto_subscription_creation=False)
    assert not LimitResolver(policies.get).limits(name, off_broker).allow_auto_subscription_creation


# ---- non-persistent topics --------------------------------------------------------------------


async def test_non_persistent_topics_limit_producers_and_consumers_not_subscriptions() -> None:
    async with open_service(
        max_producers_per_topic=1,
        max_consumers_per_topic=3,
        max_consumers_per_subscription=1,
        max_subscriptions_per_topic=1,
    ) as service:
        topic = await service.get_topic(topic_name("np", "non-persistent"))
        await add_producer(topic, 1)
        with pytest.raises(ProducerBusyError, match="reached max producers limit"):
            await add_producer(topic, 2)
        await subscribe(topic, FakeConsumerSink(), subscription="a", sub_type=SubType.SHARED)
        with pytest.raises(ConsumerBusyError, match=r"^Subscription reached max consumers"):
            await subscribe(
                topic, FakeConsumerSink(), subscription="a", sub_type=SubType.SHARED, consumer_id=2
            )
        # Pulsar's NonPersistentTopic has no subscription-count check.
        await subscribe(topic, FakeConsumerSink(), subscription="b", consumer_id=3)
        await subscribe(topic, FakeConsumerSink(), subscription="c", consumer_id=4)
        with pytest.raises(ConsumerBusyError, match=r"^Topic reached max consumers limit$"):
            await subscribe(topic, FakeConsumerSink(), subscription="d", consumer_id=5)


# ---- blockedConsumerOnUnackedMsgs -------------------------------------------------------------


async def test_consumer_stats_say_when_the_unacked_limit_blocks_a_consumer() -> None:
    async with open_service(max_unacked_messages_per_consumer=2) as service:
        topic = await service.get_topic(topic_name("blocked"))
        assert isinstance(topic, Topic)
        producer = await add_producer(topic)
        shared = await subscribe(topic, FakeConsumerSink(), sub_type=SubType.SHARED)
        exclusive = await subscribe(topic, FakeConsumerSink(), subscription="ex", consumer_id=2)
        for consumer in (shared, exclusive):
            consumer.flow(10)
        for i in range(3):
            await publish(topic, producer, b"%d" % i)
        await settle()

        def blocked() -> dict[str, bool]:
            return {
                s.name: s.consumer_stats[0].blocked_on_unacked for s in topic.stats().subscriptions
            }

        assert shared.unacked == 2
        assert blocked() == {"ex": False, "sub": True}  # Exclusive never tracks unacked
        ledger = topic.last_message_id()[0]
        shared.ack(AckType.INDIVIDUAL, [mid(ledger, 0)])
        await settle()
        assert shared.unacked == 2  # the third message went out once there was room
        shared.ack(AckType.INDIVIDUAL, [mid(ledger, 1)])
        await settle()
        assert blocked() == {"ex": False, "sub": False}
