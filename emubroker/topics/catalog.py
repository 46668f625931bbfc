"""Which topics this broker knows: loaded, stored, partitioned (the topic service's catalog).

A name is in the catalog in one or more of four ways:

* **loaded**: a topic object serves it now (``get_topic`` made it; ``unload`` drops it);
* **state**: a persistent topic's :class:`~emubroker.topics.topic_state.TopicState` (managed ledger,
  durable cursors, counters, topic epoch) is open. It outlives the topic object, so a reloaded
  topic resumes where the old one stopped (spec §9); only deleting the topic drops it;
* **stored**: a persistent topic a previous run left in the metadata store, not opened yet: it
  exists (listed, deletable) before its first use opens it;
* **partitioned**: a partitioned topic's partition count; its partitions exist with it.

The catalog is plain data and the questions asked of it; the jobs that change it are the topic
loader (``loading``), the partitioned-topic metadata (``partitioned``) and the topic operations
(``operations``).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from emubroker.metadata.paths import MANAGED_LEDGERS_ROOT, PARTITIONED_TOPICS_ROOT
from emubroker.metadata.walk import walk, walk_topics
from emubroker.naming import TopicDomain
from emubroker.topics.stats import ServiceStats, TopicLoad
from protocol.commands import TopicsMode
from protocol.errors import TopicNotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable

    from emubroker.metadata.store import MetadataStore
    from emubroker.naming import NamespaceName, TopicName
    from emubroker.topics.handles import TopicHandle
    from emubroker.topics.topic import Topic
    from emubroker.topics.topic_state import TopicState

__all__ = ["TopicCatalog"]


class TopicCatalog:
    """The topics of one broker (see the module docstring).

    Args:
        namespaces: Whether a namespace exists.

    Attributes:
        loaded: Topic objects serving now.
        states: Open stored states of persistent topics.
        stored: Persistent topics found in the store and not opened yet.
        partitioned: Partition counts of the partitioned topics.
    """

    def __init__(self, namespaces: Callable[[NamespaceName], bool]) -> None:
        self._namespaces = namespaces
        self.loaded: dict[TopicName, TopicHandle] = {}
        self.states: dict[TopicName, TopicState] = {}
        self.stored: set[TopicName] = set()
        self.partitioned: dict[TopicName, int] = {}

    async def load_stored(self, store: MetadataStore) -> None:
        """Learn the persistent topics a previous run left in the store (their ledger lists).

        Raises:
            MetadataStoreError: The store failed.
        """
        self.stored.update(name for name, _ in await walk_topics(store, MANAGED_LEDGERS_ROOT))

    def check_namespace(self, name: TopicName) -> None:
        """Raise ``TopicNotFoundError`` for a topic of an unknown namespace."""
        if not self._namespaces(name.namespace):
            raise TopicNotFoundError(f"Namespace {name.namespace} of topic {name} does not exist")

    def has_topic(self, name: TopicName) -> bool:
        """Whether a non-partitioned topic (or partition) of this name is loaded or opened."""
        return name in self.loaded or name in self.states

    def exists(self, name: TopicName) -> bool:
        """Whether a topic exists: stored or loaded, partitioned, or a partition of one."""
        if self.has_topic(name) or name in self.partitioned or name in self.stored:
            return True
        parent = name.partitioned_topic_name
        return parent is not name and name.partition_index < self.partitioned.get(parent, 0)

    def topics_of_namespace(self, ns: NamespaceName, mode: TopicsMode) -> list[str]:
        """Complete names of a namespace's topics for GET_TOPICS_OF_NAMESPACE (§5.3).

        Every partition of a partitioned topic is listed (not the parent); non-partitioned
        topics are listed when stored (persistent) or loaded (non-persistent).

        Raises:
            TopicNotFoundError: Unknown namespace.
        """
        if not self._namespaces(ns):
            raise TopicNotFoundError(f"Namespace {ns} does not exist")
        wanted = {
            TopicsMode.PERSISTENT: {TopicDomain.PERSISTENT},
            TopicsMode.NON_PERSISTENT: {TopicDomain.NON_PERSISTENT},
        }.get(mode, {TopicDomain.PERSISTENT, TopicDomain.NON_PERSISTENT})
        names: set[str] = set()
        for name in itertools.chain(self.states, self.loaded, self.stored):
            if name.namespace == ns and name.domain in wanted:
                names.add(str(name))
        for parent, partitions in self.partitioned.items():
            if parent.namespace == ns and parent.domain in wanted:
                names.update(str(parent.partition(i)) for i in range(partitions))
        return sorted(names)

    async def namespace_has_topics(
        self, ns: NamespaceName, *, ledgers: MetadataStore | None, partitioned: MetadataStore | None
    ) -> bool:
        """Whether a namespace has a topic, as Pulsar's namespace deletion asks.

        Pulsar reads the metadata store, which every broker of a cluster writes: the
        namespace's managed ledgers and partitioned-topic metadata. ``stored`` is not read:
        it is this broker's snapshot of the store, and another broker may have deleted a topic
        since (after its bundle moved there). The topics open here count too: non-persistent
        topics live only on their owner, and without a durable backend the open states are the
        only record. A non-persistent topic counts only while it is active, with a producer or
        a subscription (Pulsar's ``NonPersistentTopic.isActive``, which its
        ``getListOfNonPersistentTopics`` asks): one left idle does not keep the namespace.

        Args:
            ns: The namespace.
            ledgers: Where managed ledgers are stored; None: nowhere (not durable).
            partitioned: Where partitioned-topic metadata is stored; None: only in ``partitioned``.

        Raises:
            MetadataStoreError: The store failed.
        """
        if any(name.namespace == ns for name in self.states):
            return True
        if any(name.namespace == ns and _counts(topic) for name, topic in self.loaded.items()):
            return True
        if partitioned is None:
            if any(name.namespace == ns for name in self.partitioned):
                return True
        elif await _has_topic_nodes(partitioned, PARTITIONED_TOPICS_ROOT, ns):
            return True
        return ledgers is not None and await _has_topic_nodes(ledgers, MANAGED_LEDGERS_ROOT, ns)

    def persistent_topics(self) -> list[Topic]:
        """The loaded persistent topics."""
        return [p for t in self.loaded.values() if (p := t.as_persistent()) is not None]

    def loads(self) -> list[TopicLoad]:
        """Every loaded topic's counters and attachments, in the order of ``statistics``."""
        return [self.loaded[name].load() for name in sorted(self.loaded, key=str)]

    def statistics(self) -> ServiceStats:
        """A snapshot of every loaded topic, for ``/metrics``."""
        topics = tuple(self.loaded[name].stats() for name in sorted(self.loaded, key=str))
        return ServiceStats(
            topics_count=len(topics),
            producers=sum(t.producers for t in topics),
            consumers=sum(t.consumers for t in topics),
            subscriptions=sum(len(t.subscriptions) for t in topics),
            topics=topics,
        )


def _counts(topic: TopicHandle) -> bool:
    """Whether a loaded topic keeps its namespace from deletion (``namespace_has_topics``)."""
    if topic.as_persistent() is not None:
        return True
    return topic.producer_count > 0 or bool(topic.subscriptions())


async def _has_topic_nodes(store: MetadataStore, root: str, ns: NamespaceName) -> bool:
    # ``<root>/<tenant>/<ns>/<domain>/<topic>`` nodes holding a value (the walk skips the
    # intermediate nodes a deleted topic may leave).
    return bool(await walk(store, f"{root}/{ns}", 2))
