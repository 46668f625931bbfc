"""Dispatch throttling wired into the broker: who owns which limiter, and where rates come from.

Spec/pulsar-behaviour.md §1. :class:`DispatchThrottling` is built once per broker by the
composition root and handed to the topic service; it owns

* the **broker** limiter: one object for the whole broker, always present (a no-op while both
  broker rates are off), shared by every subscription's chain;
* one **topic** limiter per loaded topic, shared by all its subscriptions, created only while the
  topic's effective rate is enabled (Pulsar creates topic and subscription limiters lazily);
* one **subscription** limiter per subscription, likewise;
* the topic policies (``dispatchRate``, ``subscriptionDispatchRate``, and PIP-152 per-subscription
  ``subscriptionPolicies[sub].dispatchRate``), through a
  :class:`~emubroker.policies.topics.TopicPolicyView` (they and their storage are defined in
  :mod:`emubroker.policies.topics`); a partitioned topic's policies apply to each partition.

Each dispatcher gets a :class:`~emubroker.topics.subscription_throttle.SubscriptionThrottle`
(its own module): its ``ThrottleChain`` over the shared limiters (consulted broker -> topic ->
subscription, §1.2) plus what the dispatcher needs around it: the precise-mode average, the trace
hook and the throttle-event counters.

Effective rates are resolved with ``quotas.resolve_*`` (topic policy > namespace policy > broker
config) whenever an input changes: dynamic config (:meth:`DispatchThrottling.reconfigure`), a
namespace's policies (:meth:`~DispatchThrottling.namespace_changed`) or a topic's
(:meth:`~DispatchThrottling.set_topic_policies`). A changed rate is applied with ``update_rate``
on the live limiter, so it takes effect at the dispatcher's next read, without reconnecting; an
unchanged one is left alone (a token bucket would otherwise be refilled by an unrelated policy
write).

Departures, documented: ``dispatchRateLimiterFactoryClassName`` is read at start only (it is not
dynamic in Pulsar either); the namespace defaults Pulsar copies from ``broker.conf`` into a new
namespace's policies are not copied, the broker value applies through the fallback instead.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import msgspec

from emubroker.naming import TopicName
from emubroker.policies.topics import TopicPolicies, TopicPolicyView
from emubroker.ratelimit.limiter import (
    DispatchRateLimiter,
    LastUpdatedAvgPublishRate,
    LimiterLevel,
    create_dispatch_rate_limiter,
)
from emubroker.ratelimit.quotas import (
    DispatchPolicies,
    DispatchRate,
    DispatchThrottlingConfig,
    resolve_broker_rate,
    resolve_subscription_rate,
    resolve_topic_rate,
)
from emubroker.ratelimit.readsize import MESSAGE_RATE_BACKOFF, ThrottleChain
from emubroker.topics.limits import LimitOverrides, auto_subscription_override
from emubroker.topics.subscription_throttle import SubscriptionThrottle

if TYPE_CHECKING:
    from collections.abc import Callable

    from emubroker.metadata import MetadataStore
    from emubroker.naming import NamespaceName
    from emubroker.policies import Policies
    from emubroker.topics.subscription_throttle import TraceSink
    from protocol.clock import Clock

__all__ = [
    "CURSOR_BACKLOGGED_THRESHOLD",
    "DispatchThrottling",
    "topic_limit_overrides",
]

log = logging.getLogger(__name__)

CURSOR_BACKLOGGED_THRESHOLD = 1000
"""``managedLedgerCursorBackloggedThreshold``: a cursor further behind than this many entries is
not "active" (it reads backlog); only matters with ``dispatchThrottlingOnNonBacklogConsumer
Enabled=false``, which throttles backlog readers only."""


def topic_limit_overrides(policies: TopicPolicies) -> LimitOverrides:
    """The count limits a topic's policies set (``limits.TopicLimitPolicies``)."""
    return LimitOverrides(
        max_producers=policies.maxProducerPerTopic,
        max_consumers=policies.maxConsumerPerTopic,
        max_consumers_per_subscription=policies.maxConsumersPerSubscription,
        max_subscriptions=policies.maxSubscriptionsPerTopic,
        allow_auto_subscription_creation=auto_subscription_override(
            policies.autoSubscriptionCreationOverride
        ),
    )


class _TopicThrottle:
    __slots__ = ("limiter", "name", "publish_rate", "subs")

    def __init__(self, name: TopicName) -> None:
        self.name = name
        self.limiter: DispatchRateLimiter | None = None
        self.publish_rate = LastUpdatedAvgPublishRate()
        self.subs: dict[str, SubscriptionThrottle] = {}


def _rate_of(mapping: dict[str, Any], cluster: str) -> DispatchRate | None:
    # Namespace maps are keyed by cluster and stored as raw JSON objects in Policies.
    value = mapping.get(cluster)
    if value is None or isinstance(value, DispatchRate):
        return value
    try:
        return msgspec.convert(value, DispatchRate, strict=False)
    except msgspec.ValidationError as exc:
        log.warning("unreadable DispatchRate %r in namespace policies: %s", value, exc)
        return None


class DispatchThrottling:
    """The broker's limiters and their policy inputs (see the module docstring).

    Args:
        config: The broker's throttling settings (``quotas.throttling_config_from(config)``).
        clock: The broker's clock.
        cluster: ``clusterName``, the key of the namespace policy maps.
        namespace_policies: A namespace's current ``Policies`` (the namespace registry).
        trace: Where trace rows go; None: no trace.
        backoff: Delay before re-planning a throttled read (Pulsar: 1.0 s exactly).
        store: Where topic policies are persisted (``paths.topic_policies_path``); None: memory.
    """

    def __init__(
        self,
        config: DispatchThrottlingConfig,
        *,
        clock: Clock,
        cluster: str = "standalone",
        namespace_policies: Callable[[NamespaceName], Policies | None] | None = None,
        trace: TraceSink | None = None,
        backoff: float = MESSAGE_RATE_BACKOFF,
        store: MetadataStore | None = None,
    ) -> None:
        self._store = store
        self._config = config
        self._factory = config.dispatchRateLimiterFactoryClassName
        self._clock = clock
        self._cluster = cluster
        self._namespace_policies = namespace_policies
        self._trace = trace
        self._backoff = backoff
        self.broker_limiter = create_dispatch_rate_limiter(
            self._factory, LimiterLevel.BROKER, resolve_broker_rate(config), clock.now()
        )
        self._topics: dict[TopicName, _TopicThrottle] = {}
        self._topic_policies = TopicPolicyView(store, self._refresh)

    @property
    def config(self) -> DispatchThrottlingConfig:
        """The settings in force."""
        return self._config

    # ---- dispatchers --------------------------------------------------------------------------

    def open(self, topic: TopicName, subscription: str) -> SubscriptionThrottle:
        """The throttle of a subscription's dispatcher (shares the broker and topic limiters)."""
        entry = self._topics.get(topic)
        if entry is None:
            entry = self._topics[topic] = _TopicThrottle(topic)
            entry.limiter = self._level(
                entry.limiter,
                LimiterLevel.TOPIC,
                resolve_topic_rate(self._config, self.policies_of(topic, None)),
                entry.publish_rate,
            )
        sub_limiter = self._level(
            None,
            LimiterLevel.SUBSCRIPTION,
            resolve_subscription_rate(self._config, self.policies_of(topic, subscription)),
            entry.publish_rate,
        )
        throttle = SubscriptionThrottle(
            self,
            str(topic),
            subscription,
            self._chain(entry.limiter, sub_limiter),
            clock=self._clock,
            trace=self._trace,
        )
        entry.subs[subscription] = throttle
        return throttle

    def release(self, throttle: SubscriptionThrottle) -> None:
        """Forget a subscription's throttle; the topic's goes with its last one."""
        for name, entry in list(self._topics.items()):
            if entry.subs.get(throttle.subscription) is throttle:
                del entry.subs[throttle.subscription]
                if not entry.subs:
                    del self._topics[name]
                return

    def subscription_throttle(self, topic: TopicName, subscription: str) -> SubscriptionThrottle:
        """The open throttle of a subscription.

        Raises:
            KeyError: None is open.
        """
        return self._topics[topic].subs[subscription]

    def topic_limiter(self, topic: TopicName) -> DispatchRateLimiter | None:
        """The topic level's limiter of a loaded topic, if its rate is enabled."""
        entry = self._topics.get(topic)
        return None if entry is None else entry.limiter

    def publish_rate(self, topic: TopicName) -> LastUpdatedAvgPublishRate | None:
        """The smoothed publish rates relative limits read (update them per stats interval)."""
        entry = self._topics.get(topic)
        return None if entry is None else entry.publish_rate

    def _chain(
        self, topic: DispatchRateLimiter | None, subscription: DispatchRateLimiter | None
    ) -> ThrottleChain:
        return ThrottleChain(
            self._config,
            broker=self.broker_limiter,
            topic=topic,
            subscription=subscription,
            backoff=self._backoff,
        )

    # ---- policy inputs ------------------------------------------------------------------------

    def reconfigure(self, config: DispatchThrottlingConfig) -> None:
        """Apply a dynamic-config change live (rates and flags; not the factory class)."""
        old, self._config = self._config, config
        if config.dispatchRateLimiterFactoryClassName != self._factory:
            log.warning("dispatchRateLimiterFactoryClassName changes apply after a restart")
        rebuild = msgspec.structs.replace(old, **_rates(config)) != msgspec.structs.replace(
            config, **_rates(config)
        )
        self._refresh(None, rebuild=rebuild)

    def namespace_changed(self, namespace: NamespaceName, policies: Policies | None) -> None:
        """A namespace's policies changed (the registry's callback)."""
        del policies  # read back through namespace_policies, like every other input
        self._refresh(namespace)

    def topic_policies(self, topic: TopicName) -> TopicPolicies | None:
        """A topic's policies (a partition answers with its partitioned topic's)."""
        return self._topic_policies.get(topic)

    def limit_overrides(self, topic: TopicName) -> LimitOverrides | None:
        """The count limits a topic's policies set (``limits.TopicLimitPolicies``)."""
        policies = self._topic_policies.get(topic)
        return None if policies is None else topic_limit_overrides(policies)

    def set_topic_policies(self, topic: TopicName, policies: TopicPolicies | None) -> None:
        """Record a topic's policies (after the admin API stored them) and apply them."""
        self._topic_policies.set(topic, policies)

    async def store_topic_policies(self, topic: TopicName, policies: TopicPolicies) -> None:
        """Persist a topic's policies (the admin API's write), then apply them."""
        await self._topic_policies.store(topic, policies)

    async def load_topic_policies(self) -> None:
        """Read every stored topic policy (at start; the admin API keeps the view current)."""
        await self._topic_policies.load()

    def policies_of(self, topic: TopicName, subscription: str | None) -> DispatchPolicies:
        """The policy inputs of a topic (subscription None) or one of its subscriptions."""
        tp = self._topic_policies.get(topic)
        ns = None if self._namespace_policies is None else self._namespace_policies(topic.namespace)
        cluster = self._cluster
        per_sub = None
        if tp is not None and subscription is not None:
            found = tp.subscriptionPolicies.get(subscription)
            per_sub = None if found is None else found.dispatchRate
        return DispatchPolicies(
            topic_local=None if tp is None else tp.dispatchRate,
            namespace_topic=None if ns is None else _rate_of(ns.topicDispatchRate, cluster),
            namespace_cluster=None if ns is None else _rate_of(ns.clusterDispatchRate, cluster),
            per_subscription=per_sub,
            subscription_local=None if tp is None else tp.subscriptionDispatchRate,
            namespace_subscription=None
            if ns is None
            else _rate_of(ns.subscriptionDispatchRate, cluster),
        )

    def _level(
        self,
        limiter: DispatchRateLimiter | None,
        level: LimiterLevel,
        rate: DispatchRate | None,
        publish_rate: LastUpdatedAvgPublishRate,
    ) -> DispatchRateLimiter | None:
        now = self._clock.now()
        if rate is None:
            return None  # Pulsar closes the limiter when its rate is disabled
        if limiter is None:
            return create_dispatch_rate_limiter(
                self._factory, level, rate, now, publish_rate=publish_rate
            )
        if limiter.dispatch_rate != rate:
            limiter.update_rate(rate, now)
        return limiter

    def _refresh(self, namespace: NamespaceName | None, *, rebuild: bool = False) -> None:
        config = self._config
        broker_rate = resolve_broker_rate(config)
        if self.broker_limiter.dispatch_rate != broker_rate:
            self.broker_limiter.update_rate(broker_rate, self._clock.now())
        for name, entry in self._topics.items():
            if namespace is not None and name.namespace != namespace:
                for throttle in entry.subs.values():
                    throttle.refresh()  # the broker limiter may have changed
                continue
            entry.limiter = self._level(
                entry.limiter,
                LimiterLevel.TOPIC,
                resolve_topic_rate(config, self.policies_of(name, None)),
                entry.publish_rate,
            )
            for sub, throttle in entry.subs.items():
                throttle.limiter = self._level(
                    throttle.limiter,
                    LimiterLevel.SUBSCRIPTION,
                    resolve_subscription_rate(config, self.policies_of(name, sub)),
                    entry.publish_rate,
                )
                if rebuild:
                    throttle.replace_chain(self._chain(entry.limiter, throttle.limiter))
                else:
                    chain = throttle.chain
                    chain.set_limiter(LimiterLevel.TOPIC, entry.limiter)
                    chain.set_limiter(LimiterLevel.SUBSCRIPTION, throttle.limiter)
                throttle.refresh()


def _rates(config: DispatchThrottlingConfig) -> dict[str, Any]:
    # The keys whose changes reach limiters through update_rate; anything else rebuilds chains.
    return {
        name: getattr(config, name)
        for name in (
            "dispatchThrottlingRateInMsg",
            "dispatchThrottlingRateInByte",
            "dispatchThrottlingRatePerTopicInMsg",
            "dispatchThrottlingRatePerTopicInByte",
            "dispatchThrottlingRatePerSubscriptionInMsg",
            "dispatchThrottlingRatePerSubscriptionInByte",
            "dispatchThrottlingRateRelativeToPublishRate",
        )
    }
