"""What the admin API and the load manager do to whole topics: unload, delete, expire now.

Rules:

1. Unloading closes a topic's producers and consumers with CLOSE_* and drops the topic object;
   a partitioned topic's name unloads every partition. Stored entries, durable subscriptions and
   acknowledgements stay; unacked deliveries come back after the clients resubscribe (§9,
   §14.5), with redelivery counts started over as Pulsar's are.
2. Deleting a topic drops its entries, subscriptions and counters, refused while producers or
   consumers are attached unless forced (then they are disconnected). A partitioned topic is
   deleted with every partition, all checked before any is deleted.
3. Closing the topics of a bundle that leaves this broker (unload, or ownership lost) closes
   their producers and consumers with CLOSE_*, waits for the appends in flight, flushes the
   cursors when the hand-over is graceful (never for a lost bundle: another broker may own the
   topics already) and forgets every state kept about them (entries' infos, cursors, counters,
   deduplication), so the next owner, or this broker if the bundle comes back, reads the stored
   state afresh. Stored topics stay known as stored. Without a durable backend (memory) the
   states stay: they hold the only copy of the entries, which no other broker could read.
4. A message-expiry check can be run at once for every loaded persistent topic, or for one
   namespace's (its policies changed; ``expiry`` rule 5).
"""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING

from emubroker.naming import TopicDomain
from protocol.errors import NotAllowedError, TopicNotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable

    from emubroker.naming import NamespaceName, TopicName
    from emubroker.topics.catalog import TopicCatalog
    from emubroker.topics.expiry import MessageExpiry
    from emubroker.topics.loading import TopicLoader
    from emubroker.topics.partitioned import PartitionedTopics
    from emubroker.topics.sinks import HeldCloses

__all__ = ["TopicOperations"]


class TopicOperations:
    """Operations on whole topics (see the module docstring).

    Args:
        catalog: The broker's topics.
        loader: Opens stored state (a topic stored by an earlier run is opened to be deleted).
        partitioned: The partitioned-topic metadata.
        expiry: The message TTL check.
    """

    def __init__(
        self,
        catalog: TopicCatalog,
        loader: TopicLoader,
        partitioned: PartitionedTopics,
        expiry: MessageExpiry,
    ) -> None:
        self._catalog = catalog
        self._loader = loader
        self._partitioned = partitioned
        self._expiry = expiry

    def _targets(self, name: TopicName) -> list[TopicName]:
        partitions = self._catalog.partitioned.get(name)
        return [name.partition(i) for i in range(partitions)] if partitions else [name]

    async def unload(self, name: TopicName) -> None:
        """Close a topic's producers and consumers and drop the topic object (rule 1).

        The stored state stays; its managed ledger goes on in a fresh ledger, as the reopened
        one does in Pulsar (the first send after an unload is entry 0 of a new ledger).
        """
        for target in self._targets(name):
            topic = self._catalog.loaded.pop(target, None)
            if topic is not None:
                await topic.close(notify=True)
                state = self._catalog.states.get(target)
                if state is not None:
                    await state.ledger.reopen()

    async def delete_topic(self, name: TopicName, *, force: bool = False) -> None:
        """Delete a non-partitioned topic or a partition (rule 2).

        Raises:
            TopicNotFoundError: It does not exist.
            NotAllowedError: Producers or consumers are attached and ``force`` is false.
        """
        catalog = self._catalog
        if (
            name not in catalog.states
            and name.domain is TopicDomain.PERSISTENT
            and self._loader.stored_metadata is not None
        ):
            # Stored by an earlier run, or by another broker before the bundle came here: the
            # store, not this broker's snapshot of it (``catalog.stored``), says it exists.
            # Not stored either: the 404 below, unless a topic object serves it.
            with suppress(TopicNotFoundError):
                await self._loader.open_state(name, create=False)
        topic = catalog.loaded.get(name)
        if topic is None and name not in catalog.states:
            raise TopicNotFoundError(f"Topic {name} not found")
        if topic is not None:
            if not force and (topic.producer_count or topic.consumer_count):
                raise NotAllowedError("Topic has active producers/subscriptions")
            del catalog.loaded[name]
            await topic.close(notify=True)
        catalog.stored.discard(name)
        state = catalog.states.pop(name, None)
        if state is not None:
            await state.ledger.delete()
        if self._loader.flusher is not None:
            self._loader.flusher.forget(name)

    async def delete_partitioned_topic(self, name: TopicName, *, force: bool = False) -> None:
        """Delete a partitioned topic and every partition (rule 2).

        Raises:
            TopicNotFoundError: Not a partitioned topic.
            NotAllowedError: A partition has producers or consumers and ``force`` is false.
        """
        catalog = self._catalog
        if name not in catalog.partitioned:
            raise TopicNotFoundError(f"Partitioned Topic {name} not found")
        targets = self._targets(name)
        if not force:
            for target in targets:
                topic = catalog.loaded.get(target)
                if topic is not None and (topic.producer_count or topic.consumer_count):
                    raise NotAllowedError("Topic has active producers/subscriptions")
        for target in targets:
            # A partition never used is stored nowhere: nothing to delete.
            with suppress(TopicNotFoundError):
                await self.delete_topic(target, force=True)
        await self._partitioned.forget(name)

    async def close_topics(
        self,
        selected: Callable[[TopicName], bool],
        *,
        graceful: bool,
        held: HeldCloses | None = None,
    ) -> int:
        """Close and forget the selected topics (rule 3); returns how many were loaded.

        With ``held`` (a transfer), their clients are told later, by whoever holds it.
        """
        catalog = self._catalog
        closed = 0
        for name in [name for name in catalog.loaded if selected(name)]:
            topic = catalog.loaded.pop(name)
            if held is not None:
                held.topics.append(name)
            await topic.close(notify=True if held is None else held)
            closed += 1
        flusher = self._loader.flusher
        if self._loader.stored_metadata is None:
            # Not durable: the state holds the only copy of the entries, and no other broker
            # could read them; it stays for this broker's next load (rule 3).
            return closed
        for name in [name for name in catalog.states if selected(name)]:
            state = catalog.states[name]
            await state.ledger.close()
            if graceful and flusher is not None:
                await flusher.flush_all(((name, state),))  # failures are logged
            self._loader.forget(name)
        return closed

    def check_message_expiry(
        self, namespace: NamespaceName | None = None, *, now_ms: int | None = None
    ) -> None:
        """Expire old messages of the loaded persistent topics now (rule 4).

        Args:
            namespace: Only this namespace's topics (its policies changed), else every topic.
            now_ms: The wall time to judge ages by (tests); the clock's by default.
        """
        topics = self._catalog.persistent_topics()
        if namespace is not None:
            topics = [t for t in topics if t.name.namespace == namespace]
        self._expiry.check_all(topics, now_ms=now_ms)
