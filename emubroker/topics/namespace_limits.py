"""Pulsar's ``maxTopicsPerNamespace``: how many persistent topics a namespace may hold.

As ``BrokerService.checkMaxTopicsPerNamespace`` does: the namespace policy
``max_topics_per_namespace`` if set, else the broker key (0: no limit). Creating a persistent
topic (a producer's or consumer's auto-creation, or the admin API) is refused with
``NotAllowedError`` "Exceed maximum number of topics in namespace." when the namespace's
persistent topics (each partition counts one) plus the new ones would exceed it; a partitioned
topic adds all its partitions at once. System topics (``BrokerService.isSystemTopic``, the same
test as auto-creation's: ``emubroker.system_names``) neither count nor are refused, and
non-persistent topics are not checked (Pulsar checks only when it creates a managed ledger).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from emubroker.naming import TopicDomain
from emubroker.system_names import is_system_topic
from protocol.errors import NotAllowedError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from emubroker.naming import NamespaceName, TopicName
    from emubroker.policies import Policies
    from emubroker.topics.catalog import TopicCatalog
    from emubroker.topics.settings import TopicSettings

__all__ = [
    "NamespaceRoom",
    "TooManyTopicsError",
    "check_topics_per_namespace",
    "max_topics",
]

TOO_MANY_TOPICS: Final = "Exceed maximum number of topics in namespace."
"""Pulsar's message, on the wire (``NotAllowedError``) and over REST (412)."""


class TooManyTopicsError(NotAllowedError):
    """The namespace is at ``maxTopicsPerNamespace`` (``NotAllowedError`` on the wire)."""


def max_topics(broker_limit: int, policies: Policies | None) -> int:
    """The limit in force: the namespace policy if set, else ``maxTopicsPerNamespace``."""
    if policies is not None and policies.max_topics_per_namespace is not None:
        return policies.max_topics_per_namespace
    return broker_limit


def check_topics_per_namespace(
    limit: int, name: TopicName, adding: int, existing: Iterable[TopicName]
) -> None:
    """Refuse ``adding`` new persistent topics for ``name``'s namespace past ``limit``.

    Args:
        limit: The limit in force (0 or less: none).
        name: The topic to create (a partitioned topic's name for all its partitions).
        adding: Topics it adds (its partitions).
        existing: Every persistent topic the broker knows (any namespace; partitions one each).

    Raises:
        TooManyTopicsError: The namespace would hold more than ``limit`` topics.
    """
    if limit <= 0 or is_system_topic(name) or name.domain is not TopicDomain.PERSISTENT:
        return
    namespace: NamespaceName = name.namespace
    count = sum(
        1
        for topic in existing
        if topic.namespace == namespace
        and topic.domain is TopicDomain.PERSISTENT
        and not is_system_topic(topic)
    )
    if count + adding > limit:
        raise TooManyTopicsError(TOO_MANY_TOPICS)


class NamespaceRoom:
    """Whether a namespace has room for new persistent topics, from the broker's catalog.

    Args:
        catalog: The topics the broker knows (opened, stored, partitioned).
        settings: The current topic settings (``maxTopicsPerNamespace``, dynamic).
        namespace_policies: A namespace's policies (``max_topics_per_namespace``); None: only
            the broker key applies.
    """

    def __init__(
        self,
        catalog: TopicCatalog,
        *,
        settings: Callable[[], TopicSettings],
        namespace_policies: Callable[[NamespaceName], Policies | None] | None,
    ) -> None:
        self._catalog = catalog
        self._settings = settings
        self._policies = namespace_policies

    def check(self, name: TopicName, adding: int) -> None:
        """Refuse ``adding`` more topics in ``name``'s namespace past the limit in force.

        Raises:
            TooManyTopicsError: No room.
        """
        policies = self._policies
        limit = max_topics(
            self._settings().max_topics_per_namespace,
            policies(name.namespace) if policies is not None else None,
        )
        if limit <= 0:
            return
        catalog = self._catalog
        # Pulsar creates a partitioned topic's partitions with it; ours come on first use, so
        # a declared partition counts (and has its room) from the topic's creation on.
        existing = set(catalog.states) | catalog.stored
        for parent, partitions in catalog.partitioned.items():
            if parent.namespace == name.namespace:
                existing.update(parent.partition(i) for i in range(partitions))
        check_topics_per_namespace(limit, name, adding, existing)

    def check_new(self, name: TopicName) -> None:
        """Refuse to create ``name`` unless it exists already or has its room (a partition).

        Raises:
            TooManyTopicsError: No room.
        """
        catalog = self._catalog
        if name in catalog.stored or name in catalog.states:
            return
        parent = name.partitioned_topic_name
        if parent is not name and name.partition_index < catalog.partitioned.get(parent, 0):
            return
        self.check(name, 1)
