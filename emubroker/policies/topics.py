"""Topic policies: Pulsar's ``TopicPolicies`` JSON, and the broker's view of every topic's.

Pulsar keeps topic policies in the ``__change_events`` system topic; we keep them in the metadata
store at ``paths.topic_policies_path(topic)`` (docs/broker-behaviour.md). A partitioned topic's
policies apply to each of its partitions, so they are keyed by the partitioned topic's name.
:class:`TopicPolicyView` holds every topic's policies in memory (the dispatcher and the count
limits read them synchronously), persists the admin API's writes, and tells its owner which
namespace changed so that live limiters follow at once.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

import msgspec

from emubroker.metadata.paths import TOPIC_POLICIES_ROOT, topic_policies_path
from emubroker.metadata.walk import walk_topics
from emubroker.ratelimit.quotas import DispatchRate

if TYPE_CHECKING:
    from collections.abc import Callable

    from emubroker.metadata import MetadataStore
    from emubroker.naming import NamespaceName, TopicName

__all__ = ["SubscriptionPolicies", "TopicPolicies", "TopicPolicyView"]

log = logging.getLogger(__name__)


class SubscriptionPolicies(msgspec.Struct, frozen=True, omit_defaults=True):
    """Pulsar's ``SubscriptionPolicies`` (PIP-152), the part we act on."""

    dispatchRate: DispatchRate | None = None


class TopicPolicies(msgspec.Struct, frozen=True, omit_defaults=True):
    """Pulsar's ``TopicPolicies``, the parts served over REST, in its JSON shape."""

    dispatchRate: DispatchRate | None = None
    subscriptionDispatchRate: DispatchRate | None = None
    subscriptionPolicies: dict[str, SubscriptionPolicies] = msgspec.field(default_factory=dict)
    # Count limits (``topics.limits``); Pulsar's names, "Producer"/"Consumer" singular as in its
    # JSON.
    maxProducerPerTopic: int | None = None
    maxConsumerPerTopic: int | None = None
    maxConsumersPerSubscription: int | None = None
    maxSubscriptionsPerTopic: int | None = None
    # Stored and served (``admin.routes_topic_policies``; docs/broker-behaviour.md says which
    # the broker acts on). The values are Pulsar's JSON objects as the admin API decoded them.
    messageTTLInSeconds: int | None = None
    retentionPolicies: dict[str, Any] | None = None
    subscribeRate: dict[str, Any] | None = None
    maxMessageSize: int | None = None
    schemaValidationEnforced: bool | None = None
    deduplicationSnapshotIntervalSeconds: int | None = None
    replicatorDispatchRate: dict[str, Any] | None = None
    offloadPolicies: dict[str, Any] | None = None
    autoSubscriptionCreationOverride: dict[str, Any] | None = None
    replicationClusters: list[str] | None = None
    maxUnackedMessagesOnConsumer: int | None = None
    maxUnackedMessagesOnSubscription: int | None = None
    persistence: dict[str, Any] | None = None
    delayedDeliveryEnabled: bool | None = None
    delayedDeliveryTickTimeMillis: int | None = None
    delayedDeliveryMaxDelayInMillis: int | None = None
    publishRate: dict[str, Any] | None = None
    # Acted on: the schema checks read it before the namespace's (``topics.features``).
    schemaCompatibilityStrategy: str | None = None
    # Backlog quotas by type (``policies.backlog_quota``), under Pulsar's spelling.
    backLogQuotaMap: dict[str, Any] = msgspec.field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """Nothing is set (the stored node can go)."""
        kept = {k: p for k, p in self.subscriptionPolicies.items() if p.dispatchRate is not None}
        return msgspec.structs.replace(self, subscriptionPolicies=kept) == _NONE


_NONE: Final = TopicPolicies()

_decode_topic_policies = msgspec.json.Decoder(TopicPolicies).decode


class TopicPolicyView:
    """Every topic's policies, kept in memory and (with a store) persisted.

    Args:
        store: Where topic policies are persisted; None: memory only.
        on_change: Called with the namespace whose topic's policies changed, or None after
            :meth:`load` (anything may have changed).
    """

    def __init__(
        self,
        store: MetadataStore | None = None,
        on_change: Callable[[NamespaceName | None], None] | None = None,
    ) -> None:
        self._store = store
        self._on_change = on_change
        self._policies: dict[TopicName, TopicPolicies] = {}

    def get(self, topic: TopicName) -> TopicPolicies | None:
        """A topic's policies (a partition answers with its partitioned topic's)."""
        return self._policies.get(topic.partitioned_topic_name)

    def set(self, topic: TopicName, policies: TopicPolicies | None) -> None:
        """Record a topic's policies (None or empty: none) without persisting them."""
        key = topic.partitioned_topic_name
        if policies is None or policies.empty:
            self._policies.pop(key, None)
        else:
            self._policies[key] = policies
        if self._on_change is not None:
            self._on_change(topic.namespace)

    async def store(self, topic: TopicName, policies: TopicPolicies) -> None:
        """Persist a topic's policies (the admin API's write), then record them."""
        key = topic.partitioned_topic_name
        if self._store is not None:
            path = topic_policies_path(key)
            if policies.empty:
                if await self._store.exists(path):
                    await self._store.delete(path)
            else:
                await self._store.put(path, msgspec.json.encode(policies))
        self.set(key, policies)

    async def load(self) -> None:
        """Read every stored topic policy (at start; :meth:`store` keeps the view current)."""
        if self._store is None:
            return
        for name, raw in await walk_topics(self._store, TOPIC_POLICIES_ROOT):
            try:
                self._policies[name] = _decode_topic_policies(raw)
            except msgspec.DecodeError as exc:
                log.warning("unreadable topic policies of %s: %s", name, exc)
        if self._on_change is not None:
            self._on_change(None)
