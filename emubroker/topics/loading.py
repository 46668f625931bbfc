"""Loading topics: creation rules, opening stored state, building the topic objects.

Rules:

1. A topic of an unknown namespace does not exist (``TopicNotFoundError``). A partitioned
   topic's own name is not a topic: producers and consumers attach to its partitions
   (``NotAllowedError``).
2. A missing topic is created when the caller allows it and either asks explicitly (the admin
   API) or auto-creation allows it (``auto_creation``: the namespace's override, else
   ``allowAutoTopicCreation``); a partition of a partitioned topic always may be, and only
   below its partition count.
3. A persistent topic's stored state is opened once per name, however many callers ask at
   once: recovered from the storage backend when the backend is durable and a metadata store is
   given (the ledger list, fenced, and the durable cursors: ``cursor_flush``), else created.
   The state stays in the catalog after the topic object goes (unload).
4. Non-persistent topics have no state: each load is a new topic with a new fixed ledger id.
5. A load that was opening a topic's stored state while the topic's bundle started leaving this
   broker (``hand_overs`` moved) registers nothing and fails with ``ServiceNotReadyError``: the
   state it opened may already be stale, and must not outlive the bundle's hand-over (with a
   durable backend; a memory one's state is the only copy and stays, ``operations`` rule 3).
"""

from __future__ import annotations

import itertools
from functools import partial
from typing import TYPE_CHECKING

import anyio

from emubroker.metadata.paths import managed_ledger_path
from emubroker.naming import TopicDomain
from emubroker.topics.cursor_flush import CursorFlusher
from emubroker.topics.managed_ledger import CacheBudget, LedgerPolicy, ManagedLedger
from emubroker.topics.nonpersistent import NonPersistentTopic
from emubroker.topics.topic import Topic
from emubroker.topics.topic_state import TopicState
from protocol.errors import NotAllowedError, ServiceNotReadyError, TopicNotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import TaskGroup

    from emubroker.metadata.store import MetadataStore
    from emubroker.naming import TopicName
    from emubroker.storage import LedgerBackend
    from emubroker.topics.backlog_quota import BacklogQuotas
    from emubroker.topics.catalog import TopicCatalog
    from emubroker.topics.features import TopicFeatures
    from emubroker.topics.handles import TopicHandle
    from emubroker.topics.limits import LimitResolver
    from emubroker.topics.namespace_limits import NamespaceRoom
    from emubroker.topics.settings import TopicSettings
    from emubroker.topics.throttling import DispatchThrottling
    from protocol.clock import Clock

__all__ = ["TopicLoader"]


class TopicLoader:
    """Loads and creates the topics of one broker (see the module docstring).

    Args:
        catalog: Where loaded topics and opened states are kept.
        settings: The current topic settings.
        clock: Time for the topics and the cursor flusher.
        ledgers: Where persistent topics keep their entries.
        metadata: The metadata store; ledger lists and cursors are kept there when ``ledgers``
            is durable.
        features: Namespace switches for persistent topics (deduplication).
        throttling: Dispatch throttling of persistent subscriptions.
        limits: Where count limits come from.
        retains: Whether a topic's namespace sets a retention policy (no trimming).
        room: ``maxTopicsPerNamespace``, checked before a persistent topic is created.
        may_create: Whether a missing topic may be created at its first use (rule 2:
            ``PartitionedTopics.may_create``).
        quotas: Backlog quotas of persistent topics (``backlog_quota``); None: none.
        hand_overs: How many times a topic's bundle started leaving this broker (rule 5); None:
            bundles never leave.
    """

    def __init__(
        self,
        catalog: TopicCatalog,
        *,
        settings: Callable[[], TopicSettings],
        clock: Clock,
        ledgers: LedgerBackend,
        metadata: MetadataStore | None,
        features: TopicFeatures | None,
        throttling: DispatchThrottling | None,
        limits: LimitResolver,
        retains: Callable[[TopicName], bool],
        room: NamespaceRoom,
        may_create: Callable[[TopicName], bool],
        hand_overs: Callable[[TopicName], int] | None = None,
        quotas: BacklogQuotas | None = None,
    ) -> None:
        self._catalog = catalog
        self._quotas = quotas
        self._room = room
        self._may_create = may_create
        self._hand_overs = hand_overs
        self._settings = settings
        self._clock = clock
        self._backend = ledgers
        self._features = features
        self._throttling = throttling
        self._limits = limits
        self._retains = retains
        config = settings()
        # What the backend states decides persistence, never which operations it implements.
        # ``stored_metadata``: where ledger lists and cursors are persisted (None: nowhere);
        # ``flusher`` persists the durable cursors there (``cursor_flush``).
        durable = metadata is not None and ledgers.durable
        self.stored_metadata = metadata if durable else None
        self.flusher = (
            None
            if self.stored_metadata is None
            else CursorFlusher(
                self.stored_metadata,
                clock=clock,
                interval=config.cursor_flush_interval,
                retains=retains,
            )
        )
        self._cache = CacheBudget(config.managed_ledger_cache_size_mb * 1024 * 1024)
        self._loading: dict[TopicName, anyio.Event] = {}
        self._producer_seq = itertools.count()
        self._nonpersistent_ledger = itertools.count(1)
        self._tg: TaskGroup | None = None
        self._closed = False

    def attach(self, task_group: TaskGroup) -> None:
        """Run the topics' dispatchers in ``task_group`` (the service's) from now on."""
        self._tg = task_group

    def close(self) -> None:
        """Refuse to load anything more (the service is shutting down)."""
        self._closed = True

    def _task_group(self) -> TaskGroup:
        if self._closed:
            raise ServiceNotReadyError("the broker is shutting down")
        if self._tg is None:
            raise RuntimeError(
                "TopicService is not running: use 'async with service.running()' or "
                "'await task_group.start(service.run)'"
            )
        return self._tg

    def next_producer_name(self) -> str:
        """A name for a producer that brings none, unique on this broker."""
        # Pulsar's DistributedIdGenerator: "<cluster>-<broker unique id>-<sequence>".
        s = self._settings()
        return f"{s.cluster_name}-{s.broker_id}-{next(self._producer_seq)}"

    async def get_topic(
        self, name: TopicName, *, create: bool = True, explicit: bool = False
    ) -> TopicHandle:
        """The loaded topic, loading or creating it as needed (rules 1-4).

        Raises:
            TopicNotFoundError: Unknown namespace, or missing topic and no creation allowed.
            NotAllowedError: The name is a partitioned topic itself (use its partitions).
            ServiceNotReadyError: The service is shutting down.
        """
        catalog = self._catalog
        topic = catalog.loaded.get(name)
        if topic is not None:
            return topic
        catalog.check_namespace(name)
        tg = self._task_group()
        if name in catalog.partitioned:
            raise NotAllowedError(
                f"{name} is a partitioned topic; producers and consumers attach to its partitions"
            )
        settings = self._settings()
        if name.domain is TopicDomain.NON_PERSISTENT:
            if not (create and (explicit or self._may_create(name))):
                raise TopicNotFoundError(f"Topic {name} does not exist")
            topic = NonPersistentTopic(
                name,
                ledger_id=next(self._nonpersistent_ledger),
                settings=settings,
                producer_names=self.next_producer_name,
                clock=self._clock,
                limits=self._limits,
            )
        else:
            state = catalog.states.get(name)
            if state is None:
                before = self._hand_overs(name) if self._hand_overs is not None else 0
                state = await self.open_state(
                    name, create=create and (explicit or self._may_create(name))
                )
                handed_over = self._hand_overs is not None and self._hand_overs(name) != before
                if handed_over and self.stored_metadata is not None:
                    self.forget(name)  # rule 5
                    raise ServiceNotReadyError(f"the bundle of {name} is being handed over")
                topic = catalog.loaded.get(name)
                if topic is not None:
                    return topic  # loaded by a concurrent call while we waited
                tg = self._task_group()
            topic = Topic(
                name,
                state,
                settings=settings,
                clock=self._clock,
                task_group=tg,
                producer_names=self.next_producer_name,
                features=self._features,
                throttling=self._throttling,
                limits=self._limits,
                retains=self._retains,
                quotas=self._quotas,
            )
        catalog.loaded[name] = topic
        return topic

    def forget(self, name: TopicName) -> None:
        """Drop a persistent topic's opened state (it stays stored)."""
        if self._catalog.states.pop(name, None) is not None:
            self._catalog.stored.add(name)
        if self.flusher is not None:
            self.flusher.forget(name)

    async def open_state(self, name: TopicName, *, create: bool) -> TopicState:
        """Open (recover or create) a persistent topic's stored state, once per name (rule 3).

        Raises:
            TopicNotFoundError: It is not stored and ``create`` is false.
            TooManyTopicsError: It is new and its namespace is at ``maxTopicsPerNamespace``.
            StorageError, MetadataStoreError: Storage failed.
        """
        while (loading := self._loading.get(name)) is not None:
            await loading.wait()
        states = self._catalog.states
        state = states.get(name)
        if state is not None:
            return state
        if create:
            self._room.check_new(name)  # it may still turn out to exist in the backend
        s = self._settings()
        policy = LedgerPolicy(
            max_entries=max(1, s.managed_ledger_max_entries_per_ledger),
            max_size=s.managed_ledger_max_size_per_ledger_mbytes * 1024 * 1024,
            min_rollover=s.managed_ledger_min_ledger_rollover_time_minutes * 60.0,
            max_rollover=s.managed_ledger_max_ledger_rollover_time_minutes * 60.0,
        )
        self._loading[name] = event = anyio.Event()
        try:
            path = managed_ledger_path(name)
            ledger = await ManagedLedger.open(
                self._backend,
                policy=policy,
                clock=self._clock,
                metadata=self.stored_metadata,
                path=path,
                budget=self._cache,
                create=create,
            )
            if ledger is None:
                raise TopicNotFoundError(f"Topic {name} does not exist")
            state = TopicState(ledger)
            state.counters.created_ms = self._clock.wall_ms()
            flusher = self.flusher
            if flusher is not None:
                state.cursors.update(await flusher.load(name, path))
                state.persist_cursors = partial(flusher.flush_all, ((name, state),))
                flusher.watch(name, state)
            states[name] = state
            return state
        finally:
            del self._loading[name]
            event.set()
