"""The topics of one broker, behind one door: :class:`TopicService` and its lifecycle.

The service puts together five jobs, each in its own module:

* the **catalog** (``catalog``): which topics exist, loaded, stored or partitioned;
* **loading** (``loading``): creation rules, opening stored state, building topic objects;
* **partitioned metadata** (``partitioned``): partition counts, PARTITIONED_METADATA;
* the **publish-rate loop** (``publish_rates``), when dispatch throttling is on;
* **operations** on whole topics (``operations``): unload, delete, expire now.

Lifecycle (structured concurrency, STYLE.md §1.14): the service owns the task group in which
every subscription's dispatcher and its own loops run (the cursor flusher, message expiry, the
publish rates). Open it with ``async with TopicService(...).running() as topics:``, an
``@asynccontextmanager`` around the task group, or start it in a task group with
``await tg.start(service.run)``; ``aclose()`` closes every topic, persists the cursors a last
time and cancels the tasks.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Self

import anyio

from emubroker.topics.auto_creation import AutoCreationRules
from emubroker.topics.backlog_quota import BacklogQuotas
from emubroker.topics.catalog import TopicCatalog
from emubroker.topics.expiry import MessageExpiry
from emubroker.topics.limits import LimitResolver
from emubroker.topics.loading import TopicLoader
from emubroker.topics.namespace_limits import NamespaceRoom
from emubroker.topics.operations import TopicOperations
from emubroker.topics.partitioned import PartitionedTopics
from emubroker.topics.publish_rates import PublishRates

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Mapping

    from anyio.abc import TaskStatus

    from emubroker.metadata.store import MetadataStore
    from emubroker.naming import NamespaceName, TopicDomain, TopicName
    from emubroker.policies import Policies
    from emubroker.storage import LedgerBackend
    from emubroker.topics.features import TopicFeatures
    from emubroker.topics.handles import TopicHandle
    from emubroker.topics.settings import TopicSettings
    from emubroker.topics.sinks import HeldCloses
    from emubroker.topics.stats import ServiceStats, TopicLoad
    from emubroker.topics.throttling import DispatchThrottling
    from protocol.clock import Clock
    from protocol.commands import TopicsMode

__all__ = ["TopicService"]

FINAL_FLUSH_TIMEOUT = 10.0
"""Seconds a graceful stop may spend persisting the last acknowledgements (``cursor_flush``)."""


class TopicService:
    """Every topic of this broker (see the module docstring).

    Args:
        config: Topic settings built from the broker config.
        clock: Time for delayed delivery and the service's loops.
        ledgers: Where persistent topics keep their entries (``emubroker.storage``). When it is
            durable and ``metadata`` is given, ledger lists and durable cursors are persisted
            there and stored topics are recovered on load.
        namespaces: Whether a namespace exists; unknown namespaces make every topic call fail
            with ``TopicNotFoundError``.
        metadata: If given, partitioned-topic metadata is written there too.
        features: Namespace switches for persistent topics (deduplication); None: all off.
        throttling: Dispatch throttling of persistent subscriptions (``throttling``); None: off.
            Its topic policies also set count limits (``limits``).
        namespace_policies: A namespace's policies, for the count limits (``limits``) and
            auto-creation (``auto_creation``); None: only the broker's settings apply. Its
            ``message_ttl_in_seconds`` is the message TTL (``expiry``).
        hand_overs: How many times a topic's bundle started leaving this broker
            (``loading`` rule 5); None: bundles never leave.
    """

    def __init__(
        self,
        *,
        config: TopicSettings,
        clock: Clock,
        ledgers: LedgerBackend,
        namespaces: Callable[[NamespaceName], bool],
        metadata: MetadataStore | None = None,
        features: TopicFeatures | None = None,
        throttling: DispatchThrottling | None = None,
        namespace_policies: Callable[[NamespaceName], Policies | None] | None = None,
        hand_overs: Callable[[TopicName], int] | None = None,
    ) -> None:
        self._settings = config
        self.throttling = throttling
        self.expiry = MessageExpiry(
            clock=clock,
            settings=self._current_settings,
            namespace_ttl=_namespace_ttl(namespace_policies),
        )
        self.quotas = BacklogQuotas(
            clock=clock,
            settings=self._current_settings,
            namespace_policies=namespace_policies,
            topic_policies=None if throttling is None else throttling.topic_policies,
        )
        self._catalog = TopicCatalog(namespaces)
        room = NamespaceRoom(
            self._catalog, settings=self._current_settings, namespace_policies=namespace_policies
        )
        self._partitioned = PartitionedTopics(
            self._catalog,
            auto_creation=AutoCreationRules(self._current_settings, namespace_policies),
            room=room,
            metadata=metadata,
        )
        self._loader = TopicLoader(
            self._catalog,
            settings=self._current_settings,
            clock=clock,
            ledgers=ledgers,
            metadata=metadata,
            features=features,
            throttling=throttling,
            limits=LimitResolver(namespace_policies, throttling, self._current_settings),
            retains=_retains(namespace_policies),
            room=room,
            may_create=self._partitioned.may_create,
            hand_overs=hand_overs,
            quotas=self.quotas,
        )
        self._operations = TopicOperations(
            self._catalog, self._loader, self._partitioned, self.expiry
        )
        self._publish_rates = (
            None
            if throttling is None
            else PublishRates(
                self._catalog, throttling, settings=self._current_settings, clock=clock
            )
        )
        self._started = False
        self._closed = False
        self._cancel: anyio.CancelScope | None = None
        self._stopped: anyio.Event | None = None  # what ``run`` waits for

    def _current_settings(self) -> TopicSettings:
        return self._settings

    # ---- lifecycle ----------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Self]:
        """Run the service's task group for the duration of the block, then close it.

        Raises:
            RuntimeError: The service was started before.
            MetadataStoreError: The catalog could not be read from the store.
        """
        if self._started:
            raise RuntimeError("a TopicService can be started only once")
        self._started = True
        async with anyio.create_task_group() as tg:
            self._cancel = tg.cancel_scope
            self._loader.attach(tg)
            try:
                # Watched before it is read, so that no change in between is missed.
                await tg.start(self._partitioned.watch)
                await self._partitioned.load()
                if self._loader.stored_metadata is not None:
                    await self._catalog.load_stored(self._loader.stored_metadata)
                if self._publish_rates is not None:
                    tg.start_soon(self._publish_rates.run)
                flusher = self._loader.flusher
                if flusher is not None:
                    tg.start_soon(flusher.run, self._catalog.states)
                tg.start_soon(self.expiry.run, self._catalog.persistent_topics)
                tg.start_soon(self.quotas.run, self._catalog.persistent_topics)
                yield self
            finally:
                await self.aclose()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until ``aclose()``; for ``await task_group.start(service.run)``."""
        stopped = self._stopped = anyio.Event()
        async with self.running():
            task_status.started()
            await stopped.wait()

    async def aclose(self) -> None:
        """Close every topic (without CLOSE_* frames: the connections go too) and stop."""
        if self._closed:
            return
        self._closed = True
        self._loader.close()
        loaded = self._catalog.loaded
        for topic in list(loaded.values()):
            await topic.close(notify=False)
        loaded.clear()
        flusher = self._loader.flusher
        if flusher is not None:
            # A graceful stop keeps the last acknowledgements (``cursor_flush``).
            with anyio.CancelScope(shield=True), anyio.move_on_after(FINAL_FLUSH_TIMEOUT):
                await flusher.flush_all(self._catalog.states.items())
        if self._cancel is not None:
            self._cancel.cancel()
        if self._stopped is not None:
            self._stopped.set()

    def reconfigure(self, settings: TopicSettings) -> None:
        """Use new settings (dynamic configuration).

        Creation rules change at once; loaded topic objects keep theirs until reloaded.
        """
        self._settings = settings

    # ---- topics (``loading``, ``catalog``) ----------------------------------------------------

    async def get_topic(
        self, name: TopicName, *, create: bool = True, explicit: bool = False
    ) -> TopicHandle:
        """Return the loaded topic, loading or auto-creating it as needed (``loading``).

        Args:
            name: A non-partitioned topic or one partition.
            create: Whether a missing topic may be auto-created.
            explicit: Create it whatever ``allowAutoTopicCreation`` says (the admin API).

        Raises:
            TopicNotFoundError: Unknown namespace, or missing topic and no creation allowed.
            NotAllowedError: The name is a partitioned topic itself (use its partitions).
            ServiceNotReadyError: The service is shutting down.
        """
        return await self._loader.get_topic(name, create=create, explicit=explicit)

    def loaded_topic(self, name: TopicName) -> TopicHandle | None:
        """The topic if it is loaded, without loading it."""
        return self._catalog.loaded.get(name)

    def topic_exists(self, name: TopicName) -> bool:
        """Whether a topic exists: stored or loaded, partitioned, or a partition of one."""
        return self._catalog.exists(name)

    def topics_of_namespace(self, ns: NamespaceName, mode: TopicsMode) -> list[str]:
        """Complete names of a namespace's topics for GET_TOPICS_OF_NAMESPACE (§5.3).

        Raises:
            TopicNotFoundError: Unknown namespace.
        """
        return self._catalog.topics_of_namespace(ns, mode)

    async def namespace_has_topics(self, ns: NamespaceName) -> bool:
        """Whether a namespace has a topic anywhere in the cluster (its deletion's check).

        Raises:
            MetadataStoreError: The store failed.
        """
        return await self._catalog.namespace_has_topics(
            ns, ledgers=self._loader.stored_metadata, partitioned=self._partitioned.metadata_store
        )

    def statistics(self) -> ServiceStats:
        """A snapshot of every loaded topic, for ``/metrics``."""
        return self._catalog.statistics()

    def loads(self) -> list[TopicLoad]:
        """Every loaded topic's counters and attachments, for the load report."""
        return self._catalog.loads()

    # ---- partitioned topics (``partitioned``) -------------------------------------------------

    async def partitioned_metadata(self, name: TopicName, *, auto_create: bool = True) -> int:
        """Partitions of a topic for PARTITIONED_METADATA (§5.1; ``partitioned`` rule 4).

        ``auto_create=False`` is PIP-344's ``metadata_auto_creation_enabled=false``. A missing
        topic that may be created (:meth:`may_auto_create`) is created partitioned when
        auto-creation's type says so, else answers 0.

        Raises:
            TopicNotFoundError: Unknown namespace; or a missing topic that may not be created.
            TooManyTopicsError: A partitioned topic to create finds no room in its namespace.
        """
        return await self._partitioned.metadata(name, auto_create=auto_create)

    def may_auto_create(self, name: TopicName) -> bool:
        """Whether a missing topic may be created at its first use (``auto_creation``).

        The namespace's ``autoTopicCreationOverride`` if set, else ``allowAutoTopicCreation``; a
        partition of a partitioned topic below its count only.
        """
        return self._partitioned.may_create(name)

    def known_partitioned_metadata(self, name: TopicName) -> int | None:
        """:meth:`partitioned_metadata` when it needs no wait: a partition, a partitioned topic."""
        return self._partitioned.known_metadata(name)

    def partitions_of(self, name: TopicName) -> int:
        """Partitions of a partitioned topic, 0 for any other name (never creates anything)."""
        return self._partitioned.partitions_of(name)

    def partitioned_topics(self, ns: NamespaceName, domain: TopicDomain) -> list[str]:
        """Names of a namespace's partitioned topics in one domain, sorted."""
        return self._partitioned.names(ns, domain)

    async def create_partitioned_topic(
        self, name: TopicName, partitions: int, properties: Mapping[str, str | None] | None = None
    ) -> None:
        """Create a partitioned topic with its own ``properties`` (if given).

        Its partitions are created on first use.

        Raises:
            TopicNotFoundError: Unknown namespace.
            NotAllowedError: Bad partition count, a partition name, or the topic exists.
            TooManyTopicsError: The namespace has no room for its partitions.
        """
        await self._partitioned.create(name, partitions, properties)

    async def update_partitioned_topic(self, name: TopicName, partitions: int) -> None:
        """Grow a partitioned topic to ``partitions`` (same count: no-op).

        Raises:
            TopicNotFoundError: Not a partitioned topic.
            NotAllowedError: Fewer partitions than it has.
            TooManyTopicsError: The namespace has no room for the new partitions.
        """
        await self._partitioned.update(name, partitions)

    def partitioned_properties(self, name: TopicName) -> dict[str, str] | None:
        """A partitioned topic's properties; None when none were given (``partitioned`` rule 5)."""
        return self._partitioned.properties_of(name)

    async def update_partitioned_properties(
        self, name: TopicName, properties: Mapping[str, str | None]
    ) -> None:
        """Add to a partitioned topic's properties; a None value removes its key.

        Raises:
            TopicNotFoundError: Not a partitioned topic.
        """
        await self._partitioned.update_properties(name, properties)

    async def remove_partitioned_property(self, name: TopicName, key: str) -> None:
        """Remove a key of a partitioned topic's properties (``TopicNotFoundError`` as above)."""
        await self._partitioned.remove_property(name, key)

    # ---- operations on whole topics (``operations``) ------------------------------------------

    async def unload(self, name: TopicName) -> None:
        """Close a topic's producers and consumers with CLOSE_* and drop the topic object."""
        await self._operations.unload(name)

    async def close_topics(
        self,
        selected: Callable[[TopicName], bool],
        *,
        graceful: bool,
        held: HeldCloses | None = None,
    ) -> int:
        """Close and forget every topic ``selected`` picks (``operations`` rule 3).

        Its bundle leaves this broker. Returns how many were loaded.

        Args:
            selected: Which topics (those of one bundle).
            graceful: Flush their cursors first (an unload); False when the bundle was lost.
            held: Hold their clients' CLOSE_* back (a transfer; ``sinks.HeldCloses``).
        """
        return await self._operations.close_topics(selected, graceful=graceful, held=held)

    async def delete_topic(self, name: TopicName, *, force: bool = False) -> None:
        """Delete a non-partitioned topic or a partition: entries, subscriptions, counters.

        Raises:
            TopicNotFoundError: It does not exist.
            NotAllowedError: Producers or consumers are attached and ``force`` is false.
        """
        await self._operations.delete_topic(name, force=force)

    async def delete_partitioned_topic(self, name: TopicName, *, force: bool = False) -> None:
        """Delete a partitioned topic and every partition.

        Raises:
            TopicNotFoundError: Not a partitioned topic.
            NotAllowedError: A partition has producers or consumers and ``force`` is false.
        """
        await self._operations.delete_partitioned_topic(name, force=force)

    def check_message_expiry(
        self, namespace: NamespaceName | None = None, *, now_ms: int | None = None
    ) -> None:
        """Expire old messages of the loaded persistent topics now (``expiry`` rule 5)."""
        self._operations.check_message_expiry(namespace, now_ms=now_ms)


def _namespace_ttl(
    policies: Callable[[NamespaceName], Policies | None] | None,
) -> Callable[[NamespaceName], int | None]:
    def ttl(namespace: NamespaceName) -> int | None:
        found = None if policies is None else policies(namespace)
        return None if found is None else found.message_ttl_in_seconds

    return ttl


def _retains(
    policies: Callable[[NamespaceName], Policies | None] | None,
) -> Callable[[TopicName], bool]:
    """Whether a topic's namespace sets a retention policy.

    As Pulsar reads ``RetentionPolicies``: a time or size other than 0 (-1: infinite).
    """

    def retains(topic: TopicName) -> bool:
        found = None if policies is None else policies(topic.namespace)
        retention = None if found is None else found.retention_policies
        if not isinstance(retention, dict):
            return False
        return bool(retention.get("retentionTimeInMinutes") or retention.get("retentionSizeInMB"))

    return retains
