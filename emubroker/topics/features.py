"""Per-namespace switches the topic layer honours: deduplication and the schema policy.

Pulsar resolves each setting through a hierarchy (topic policy, then namespace ``Policies``, then
``broker.conf``); here only the compatibility strategy has its topic level (the topic policy
``schemaCompatibilityStrategy``), the other settings are the namespace's when its policies set
them, else the broker's. The namespace ``Policies`` are read from the metadata store node
``/admin/policies/<tenant>/<namespace>`` (Pulsar's JSON, written by the admin API) each time a
producer or consumer attaches, so a policy change applies to the next attachment without any
cache to invalidate. Only the fields below are decoded; the rest of the document is ignored.

* ``deduplicationEnabled`` (Boolean, null = unset) over ``brokerDeduplicationEnabled``.
* ``schema_compatibility_strategy`` (``UNDEFINED`` = unset; the legacy
  ``schema_auto_update_compatibility_strategy`` fills in, as in Pulsar's
  ``AbstractTopic.updateSchemaCompatibilityStrategyNamespaceValue``) over
  ``schemaCompatibilityStrategy`` (``FULL`` by default); ``UNDEFINED`` everywhere means
  ``ALWAYS_COMPATIBLE``.
* ``is_allow_auto_update_schema`` (Boolean, null = unset) over ``isAllowAutoUpdateSchemaEnabled``.
* ``schema_validation_enforced`` or ``isSchemaValidationEnforced``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import msgspec

from emubroker.metadata.paths import namespace_path
from emubroker.schemas.compat import CompatibilityStrategy

if TYPE_CHECKING:
    from collections.abc import Callable

    from emubroker.config import BrokerConfig
    from emubroker.metadata import MetadataStore
    from emubroker.naming import NamespaceName, TopicName

__all__ = ["SchemaPolicy", "TopicFeatures"]

log = logging.getLogger(__name__)


class _NamespaceSwitches(msgspec.Struct):
    # The fields of Pulsar's Policies JSON read here (names exactly as Pulsar's).
    deduplicationEnabled: bool | None = None
    schema_compatibility_strategy: str | None = None
    schema_auto_update_compatibility_strategy: str | None = None
    is_allow_auto_update_schema: bool | None = None
    schema_validation_enforced: bool | None = None


_decode = msgspec.json.Decoder(_NamespaceSwitches).decode


class SchemaPolicy(msgspec.Struct, frozen=True):
    """How a topic treats schemas.

    Attributes:
        strategy: The compatibility strategy (never ``UNDEFINED``).
        allow_update: Producers may register new versions.
        validation_enforced: Clients without a schema are refused on a topic that has one.
    """

    strategy: CompatibilityStrategy
    allow_update: bool
    validation_enforced: bool


class TopicFeatures:
    """Reads the namespace switches (see the module docstring).

    Args:
        config: The broker's fallbacks.
        store: Where namespace policies live; without one, the broker's values apply.
        topic_strategy: A topic's own ``schemaCompatibilityStrategy`` policy, None while unset.
    """

    def __init__(
        self,
        config: BrokerConfig,
        store: MetadataStore | None = None,
        topic_strategy: Callable[[TopicName], str | None] | None = None,
    ) -> None:
        self._store = store
        self._topic_strategy = topic_strategy
        self._dedup = config.brokerDeduplicationEnabled
        strategy = CompatibilityStrategy(config.schemaCompatibilityStrategy)
        if strategy is CompatibilityStrategy.UNDEFINED:
            strategy = CompatibilityStrategy.ALWAYS_COMPATIBLE
        self._strategy = strategy
        self._allow_update = config.isAllowAutoUpdateSchemaEnabled
        self._enforced = config.isSchemaValidationEnforced

    async def _switches(self, namespace: NamespaceName) -> _NamespaceSwitches:
        if self._store is None:
            return _NamespaceSwitches()
        found = await self._store.get(namespace_path(namespace))
        if found is None:
            return _NamespaceSwitches()
        try:
            return _decode(found.value)
        except msgspec.DecodeError as exc:
            log.warning(
                "namespace %s: unreadable policies (%s); using broker defaults", namespace, exc
            )
            return _NamespaceSwitches()

    async def dedup_enabled(self, topic: TopicName) -> bool:
        """Whether deduplication applies to a topic."""
        switches = await self._switches(topic.namespace)
        if switches.deduplicationEnabled is None:
            return self._dedup
        return switches.deduplicationEnabled

    async def schema_policy(self, topic: TopicName) -> SchemaPolicy:
        """The schema rules of a topic."""
        switches = await self._switches(topic.namespace)
        own = self._topic_strategy(topic) if self._topic_strategy is not None else None
        strategy = _strategy(own or "UNDEFINED")
        if strategy is None:
            strategy = _strategy(switches.schema_compatibility_strategy or "UNDEFINED")
        if strategy is None and switches.schema_auto_update_compatibility_strategy:
            strategy = _strategy(switches.schema_auto_update_compatibility_strategy)
        allow = switches.is_allow_auto_update_schema
        return SchemaPolicy(
            strategy=strategy or self._strategy,
            allow_update=self._allow_update if allow is None else allow,
            validation_enforced=bool(switches.schema_validation_enforced) or self._enforced,
        )


def _strategy(name: str) -> CompatibilityStrategy | None:
    try:
        strategy = CompatibilityStrategy.parse(name)
    except ValueError:
        log.warning("unknown schema compatibility strategy %r in namespace policies", name)
        return None
    return None if strategy is CompatibilityStrategy.UNDEFINED else strategy
