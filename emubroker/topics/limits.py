"""Pulsar's count limits of a topic: producers, consumers and subscriptions.

Each limit is resolved as Pulsar's ``HierarchyTopicPolicies`` resolve it: the topic policy if
set, else the namespace policy if set, else the broker key; a negative stored value counts as
unset (``AbstractTopic.normalizeValue``) and 0 means no limit at any level, so a namespace value
of 0 lifts a broker limit. The levels, as ``TopicPolicies`` field / namespace ``Policies``
field / ``broker.conf`` key:

* ``maxProducerPerTopic`` / ``max_producers_per_topic`` / ``maxProducersPerTopic``;
* ``maxConsumerPerTopic`` / ``max_consumers_per_topic`` / ``maxConsumersPerTopic``;
* ``maxConsumersPerSubscription`` / ``max_consumers_per_subscription`` /
  ``maxConsumersPerSubscription``;
* ``maxSubscriptionsPerTopic`` / ``max_subscriptions_per_topic`` / ``maxSubscriptionsPerTopic``.

What is counted, per topic object (so per partition of a partitioned topic), as Pulsar counts:

1. Producers: the attached producers (``AbstractTopic.isProducersExceeded`` counts
   ``userCreatedProducerCount``). A new producer is refused when the count has reached the
   limit, whatever its access mode, before any other check (``ServerCnx.handleProducer``),
   with ``ProducerBusy`` "Topic '<topic>' reached max producers limit".
2. Consumers of the topic: every consumer of every subscription, readers included
   (``getNumberOfConsumers``); ``ConsumerBusy`` "Topic reached max consumers limit", checked
   before any other subscribe check (``ServerCnx.handleSubscribe``) and again as the consumer
   joins (``addConsumerToSubscription``).
3. Consumers of a subscription: Shared and Key_Shared (the multiple-consumers dispatchers) and
   Failover (``AbstractDispatcherSingleActiveConsumer`` checks Failover only; Exclusive cannot
   have two anyway); checked after the type checks; ``ConsumerBusy`` "Subscription reached max
   consumers limit".
4. Subscriptions: only when a *new* subscription would be created on a persistent topic,
   durable or not (a reader's counts), against every subscription the topic has, with or
   without consumers (``PersistentTopic.checkMaxSubscriptionsPerTopicExceed``); ``NotAllowed``
   "Exceed the maximum number of subscriptions of the topic: <topic>". Non-persistent topics
   have no such check in Pulsar.

A consumer or producer re-sent on the same connection with an id that already exists is
answered before any of this (the handlers), as Pulsar's ``ServerCnx`` does.

The same hierarchy decides whether a SUBSCRIBE may create a missing subscription
(``BrokerService.isAllowAutoSubscriptionCreationAsync``): the topic policy
``autoSubscriptionCreationOverride``, else the namespace's, else ``allowAutoSubscriptionCreation``
(dynamic). When it is off, a durable consumer of a persistent topic naming a subscription the
topic does not have is refused with ``SubscriptionNotFound`` "Subscription does not exist",
right after the topic's consumer count (``ServerCnx.handleSubscribe``); readers (non-durable)
and non-persistent topics are not concerned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from protocol.errors import (
    ConsumerBusyError,
    NotAllowedError,
    ProducerBusyError,
    SubscriptionNotFoundError,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from emubroker.naming import NamespaceName, TopicName
    from emubroker.policies import Policies
    from emubroker.topics.settings import TopicSettings
    from emubroker.topics.subtypes import SubTypeRules

__all__ = [
    "CountLimits",
    "LimitOverrides",
    "LimitResolver",
    "TopicLimitPolicies",
    "auto_subscription_override",
    "broker_limits",
    "check_new_subscription",
    "check_producers",
    "check_subscription_consumers",
    "check_subscriptions",
    "check_topic_consumers",
    "namespace_overrides",
    "resolve_limits",
]


class CountLimits(msgspec.Struct, frozen=True):
    """The limits in force on one topic; 0 means no limit.

    Attributes:
        max_producers: Producers of the topic.
        max_consumers: Consumers of the topic, over all its subscriptions.
        max_consumers_per_subscription: Consumers of one subscription.
        max_subscriptions: Subscriptions of a persistent topic.
        allow_auto_subscription_creation: A SUBSCRIBE may create a missing subscription.
    """

    max_producers: int = 0
    max_consumers: int = 0
    max_consumers_per_subscription: int = 0
    max_subscriptions: int = 0
    allow_auto_subscription_creation: bool = True


class LimitOverrides(msgspec.Struct, frozen=True):
    """What one policy level (topic or namespace) sets; None: unset, the next level decides."""

    max_producers: int | None = None
    max_consumers: int | None = None
    max_consumers_per_subscription: int | None = None
    max_subscriptions: int | None = None
    allow_auto_subscription_creation: bool | None = None


class TopicLimitPolicies(Protocol):
    """Where a topic's topic-level limit policies are read (None: the topic has none)."""

    def limit_overrides(self, topic: TopicName) -> LimitOverrides | None:
        """The limits the topic's own policies set (a partition: its partitioned topic's)."""
        ...


def broker_limits(settings: TopicSettings) -> CountLimits:
    """The broker-level limits (``broker.conf``)."""
    return CountLimits(
        max_producers=settings.max_producers_per_topic,
        max_consumers=settings.max_consumers_per_topic,
        max_consumers_per_subscription=settings.max_consumers_per_subscription,
        max_subscriptions=settings.max_subscriptions_per_topic,
        allow_auto_subscription_creation=settings.allow_auto_subscription_creation,
    )


def auto_subscription_override(override: object) -> bool | None:
    """What an ``autoSubscriptionCreationOverride`` policy says; None when it is unset.

    Pulsar's JSON for it is ``{"allowAutoSubscriptionCreation": bool}``.
    """
    if isinstance(override, dict):
        value = override.get("allowAutoSubscriptionCreation")
        return value if isinstance(value, bool) else None
    return None


def namespace_overrides(policies: Policies) -> LimitOverrides:
    """The limits a namespace's ``Policies`` set."""
    return LimitOverrides(
        max_producers=policies.max_producers_per_topic,
        max_consumers=policies.max_consumers_per_topic,
        max_consumers_per_subscription=policies.max_consumers_per_subscription,
        max_subscriptions=policies.max_subscriptions_per_topic,
        allow_auto_subscription_creation=auto_subscription_override(
            policies.autoSubscriptionCreationOverride
        ),
    )


def _level(value: int | None) -> int | None:
    # AbstractTopic.normalizeValue: a negative value is treated as unset.
    return None if value is None or value < 0 else value


def resolve_limits(
    broker: CountLimits,
    namespace: LimitOverrides | None = None,
    topic: LimitOverrides | None = None,
) -> CountLimits:
    """Each limit from the first level that sets it: topic, namespace, then broker."""
    resolved: dict[str, Any] = {}  # the permission (a bool) resolves as the counts do
    for field in CountLimits.__struct_fields__:
        value: int = getattr(broker, field)
        for level in (namespace, topic):  # later levels win
            if level is not None and (found := _level(getattr(level, field))) is not None:
                value = found
        resolved[field] = value
    return CountLimits(**resolved)


class LimitResolver:
    """The limits of a topic now, from live namespace and topic policies.

    Policies are read at every check (the namespace registry and the topic policies are kept
    current by watches and the admin API), so a change applies to the next producer or consumer
    without reloading the topic, as in Pulsar.

    Args:
        namespace_policies: A namespace's policies (answering None: unknown namespace); None:
            no namespace policies, the broker's values apply.
        topic_policies: Where topic-level policies are read; None: there are none.
        live_settings: The broker's settings now (dynamic configuration:
            ``allowAutoSubscriptionCreation`` applies to loaded topics at once); None: the
            settings each call passes.
    """

    def __init__(
        self,
        namespace_policies: Callable[[NamespaceName], Policies | None] | None = None,
        topic_policies: TopicLimitPolicies | None = None,
        live_settings: Callable[[], TopicSettings] | None = None,
    ) -> None:
        self._namespace_policies = namespace_policies
        self._topic_policies = topic_policies
        self._live_settings = live_settings

    def limits(self, topic: TopicName, settings: TopicSettings) -> CountLimits:
        """The limits in force on ``topic`` (``settings``, or the live ones, give the broker's)."""
        if self._live_settings is not None:
            settings = self._live_settings()
        lookup = self._namespace_policies
        policies = None if lookup is None else lookup(topic.namespace)
        source = self._topic_policies
        broker = broker_limits(settings)
        if self._live_settings is not None:
            live = self._live_settings().allow_auto_subscription_creation
            broker = msgspec.structs.replace(broker, allow_auto_subscription_creation=live)
        return resolve_limits(
            broker,
            None if policies is None else namespace_overrides(policies),
            None if source is None else source.limit_overrides(topic),
        )


def check_producers(limits: CountLimits, topic: TopicName, producers: int) -> None:
    """Refuse one more producer once ``producers`` reached the limit.

    Raises:
        ProducerBusyError: The limit is reached (``ServerCnx.handleProducer``'s text).
    """
    if 0 < limits.max_producers <= producers:
        raise ProducerBusyError(f"Topic '{topic}' reached max producers limit")


def check_topic_consumers(limits: CountLimits, consumers: int) -> None:
    """Refuse one more consumer of the topic once ``consumers`` reached the limit.

    Raises:
        ConsumerBusyError: The limit is reached.
    """
    if 0 < limits.max_consumers <= consumers:
        raise ConsumerBusyError("Topic reached max consumers limit")


def check_subscription_consumers(limit: int, rules: SubTypeRules, consumers: int) -> None:
    """Refuse one more consumer of a subscription holding ``consumers``.

    Args:
        limit: ``max_consumers_per_subscription`` (0: none).
        rules: The subscription type's rules (``limits_consumers``: not Exclusive, as in Pulsar).
        consumers: Its attached consumers.

    Raises:
        ConsumerBusyError: The limit is reached.
    """
    if rules.limits_consumers and 0 < limit <= consumers:
        raise ConsumerBusyError("Subscription reached max consumers limit")


def check_new_subscription(limits: CountLimits, durable: bool) -> None:
    """Refuse to create a missing subscription for a durable consumer when creation is off.

    Raises:
        SubscriptionNotFoundError: Auto-creation of subscriptions is off.
    """
    if durable and not limits.allow_auto_subscription_creation:
        raise SubscriptionNotFoundError("Subscription does not exist")


def check_subscriptions(limits: CountLimits, topic: TopicName, subscriptions: int) -> None:
    """Refuse a new subscription once the topic has ``subscriptions`` at the limit.

    Raises:
        NotAllowedError: The limit is reached.
    """
    if 0 < limits.max_subscriptions <= subscriptions:
        raise NotAllowedError(f"Exceed the maximum number of subscriptions of the topic: {topic}")
