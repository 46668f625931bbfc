"""The topic registry of one broker: loading, auto-creation, partitions, unloading.

Lifecycle (structured concurrency, STYLE.md §1.14): the service owns the task group in which
every subscription's dispatcher runs. Run it with ``async with TopicService(...) as topics:`` or
start it in a task group with ``await tg.start(topics.run)``; ``aclose()`` closes every topic and
cancels the dispatchers.

What outlives a loaded topic object: its :class:`~emubroker.topics.topic.TopicState` (managed
ledger over the ledger store, durable cursors, counters, topic epoch) stays here, so ``unload``
drops only the object and the next ``get_topic`` rebuilds it from the state (spec §9). Partitioned
topic metadata lives here too, and is written through to the metadata store when one is given,
under Pulsar's path ``/admin/partitioned-topics/<tenant>/<ns>/<domain>/<topic>``.
"""

from __future__ import annotations

import itertools
import logging
from functools import partial
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import unquote

import anyio
import msgspec

from emubroker.naming import InvalidNameError, TopicDomain, TopicName
from emubroker.storage import BookieClient, MemoryBookie, NowaitBookie
from emubroker.topics.cursor_flush import CursorFlusher
from emubroker.topics.expiry import MessageExpiry
from emubroker.topics.limits import LimitResolver
from emubroker.topics.managed_ledger import CacheBudget, LedgerPolicy, ManagedLedger
from emubroker.topics.ml_meta import ROOT as ML_ROOT
from emubroker.topics.ml_meta import managed_ledger_path
from emubroker.topics.namespace_limits import check_topics_per_namespace, max_topics
from emubroker.topics.nonpersistent import NonPersistentTopic
from emubroker.topics.stats import ServiceStats
from emubroker.topics.topic import Topic, TopicState
from protocol.commands import TopicsMode
from protocol.errors import NotAllowedError, ServiceNotReadyError, TopicNotFoundError
from storage_stub.ledger import LedgerStore

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

    from anyio.abc import TaskGroup, TaskStatus

    from emubroker.metadata.store import MetadataStore
    from emubroker.naming import NamespaceName
    from emubroker.policies import Policies
    from emubroker.topics.features import TopicFeatures
    from emubroker.topics.settings import TopicSettings
    from emubroker.topics.throttling import DispatchThrottling
    from protocol.clock import Clock

__all__ = ["AnyTopic", "TopicService"]

AnyTopic = Topic | NonPersistentTopic

log = logging.getLogger(__name__)

_PARTITIONED_PATH = "/admin/partitioned-topics"


class _PartitionedTopicMetadata(msgspec.Struct):
    # Pulsar's PartitionedTopicMetadata JSON as stored by its admin API.
    partitions: int
    deleted: bool = False


class TopicService:
    """Every topic of this broker (see the module docstring).

    Args:
        config: Topic settings built from the broker config.
        clock: Time for delayed delivery.
        ledgers: Where persistent topics keep their entries: an in-memory ``LedgerStore``
            (nothing persisted), or a bookie client (the stub); then, with ``metadata``, ledger
            lists and durable cursors are persisted and stored topics are recovered on load.
        namespaces: Whether a namespace exists; unknown namespaces make every topic call fail
            with ``TopicNotFoundError``.
        metadata: If given, partitioned-topic metadata is written there too.
        features: Namespace switches for persistent topics (deduplication); None: all off.
        throttling: Dispatch throttling of persistent subscriptions (``throttling``); None: off.
            Its topic policies also set count limits (``limits``).
        namespace_policies: A namespace's policies, for the count limits (``limits``); None:
            only the broker's limits apply. Its ``message_ttl_in_seconds`` is the message TTL
            (``expiry``).
    """

    def __init__(
        self,
        *,
        config: TopicSettings,
        clock: Clock,
        ledgers: LedgerStore | BookieClient,
        namespaces: Callable[[NamespaceName], bool],
        metadata: MetadataStore | None = None,
        features: TopicFeatures | None = None,
        throttling: DispatchThrottling | None = None,
        namespace_policies: Callable[[NamespaceName], Policies | None] | None = None,
    ) -> None:
        self.throttling = throttling
        self._namespace_policies = namespace_policies
        self._limits = LimitResolver(namespace_policies, throttling)
        self._retains = _retains(namespace_policies)
        self.expiry = MessageExpiry(
            clock=clock,
            settings=lambda: self._settings,
            namespace_ttl=_namespace_ttl(namespace_policies),
        )
        self._bookie: BookieClient = (
            MemoryBookie(ledgers) if isinstance(ledgers, LedgerStore) else ledgers
        )
        durable = metadata is not None and not isinstance(self._bookie, NowaitBookie)
        self._ml_metadata = metadata if durable else None
        self._flusher = (
            CursorFlusher(
                metadata,
                clock=clock,
                interval=config.cursor_flush_interval,
                retains=self._retains,
            )
            if metadata is not None and durable
            else None
        )
        self._cache = CacheBudget(config.managed_ledger_cache_size_mb * 1024 * 1024)
        self._loading: dict[TopicName, anyio.Event] = {}
        self._settings = config
        self._features = features
        self._clock = clock
        self._namespaces = namespaces
        self._metadata = metadata
        self._topics: dict[TopicName, AnyTopic] = {}
        self._states: dict[TopicName, TopicState] = {}
        self._partitioned: dict[TopicName, int] = {}
        # Persistent topics found in the metadata store at start-up and not loaded yet: they
        # exist (listed, deletable) before their first use opens them.
        self._stored: set[TopicName] = set()
        self._producer_seq = itertools.count()
        self._nonpersistent_ledger = itertools.count(1)
        self._tg: TaskGroup | None = None
        self._tg_cm: Any = None
        self._stopped: anyio.Event | None = None
        self._closed = False

    # ---- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._tg is not None or self._closed:
            raise RuntimeError("a TopicService can be started only once")
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg_cm = tg
        self._tg = tg
        await self._load_catalog()
        if self.throttling is not None:
            tg.start_soon(self._update_publish_rates)
        if self._flusher is not None:
            tg.start_soon(self._flusher.run, self._states.items)
        tg.start_soon(self.expiry.run, self._persistent_topics)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        tg, self._tg_cm = self._tg_cm, None
        if tg is None:
            return None
        result: bool | None = await tg.__aexit__(exc_type, exc, tb)
        return result

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until ``aclose()``; for ``await task_group.start(service.run)``."""
        self._stopped = anyio.Event()
        async with self:
            task_status.started()
            await self._stopped.wait()

    async def aclose(self) -> None:
        """Close every topic (without CLOSE_* frames: the connections go too) and stop."""
        if self._closed:
            return
        self._closed = True
        for topic in list(self._topics.values()):
            await topic.close(notify=False)
        self._topics.clear()
        if self._flusher is not None:
            # A graceful stop keeps the last acknowledgements (``cursor_flush``).
            with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                await self._flusher.flush_all(self._states.items())
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
        if self._stopped is not None:
            self._stopped.set()

    async def _load_catalog(self) -> None:
        """Learn the partitioned and the stored topics a previous run left in the store."""
        store = self._metadata
        if store is None:
            return
        for name, value in await _walk_topics(store, _PARTITIONED_PATH):
            meta = msgspec.json.decode(value, type=_PartitionedTopicMetadata)
            if not meta.deleted:
                self._partitioned[name] = meta.partitions
        if self._ml_metadata is not None:
            self._stored.update(n for n, _ in await _walk_topics(self._ml_metadata, ML_ROOT))

    async def _update_publish_rates(self) -> None:
        """Pulsar's periodic topic stats update, as far as dispatch limits need it.

        Every ``statsUpdateFrequencyInSecs`` each loaded topic's publish rates over the last
        interval are folded into the smoothed rates that relative-to-publish-rate limits read
        (spec §1.1). A topic seen for the first time starts from its current totals.
        """
        throttling = self.throttling
        assert throttling is not None
        last: dict[TopicName, tuple[int, int]] = {}
        while True:
            interval = self._settings.stats_update_frequency
            await self._clock.sleep(interval)
            seen: dict[TopicName, tuple[int, int]] = {}
            for name in list(self._topics):
                state = self._states.get(name)
                rates = throttling.publish_rate(name)
                if state is None or rates is None:
                    continue
                now = seen[name] = (state.counters.msg_in, state.counters.bytes_in)
                before = last.get(name, now)
                rates.update((now[0] - before[0]) / interval, (now[1] - before[1]) / interval)
            last = seen

    def _task_group(self) -> TaskGroup:
        if self._closed:
            raise ServiceNotReadyError("the broker is shutting down")
        if self._tg is None:
            raise RuntimeError(
                "TopicService is not running: use 'async with service' or "
                "'await task_group.start(service.run)'"
            )
        return self._tg

    # ---- topics -------------------------------------------------------------------------------

    def _check_namespace(self, name: TopicName) -> None:
        if not self._namespaces(name.namespace):
            raise TopicNotFoundError(f"Namespace {name.namespace} of topic {name} does not exist")

    def _may_create(self, name: TopicName) -> bool:
        parent = name.partitioned_topic_name
        partitions = self._partitioned.get(parent) if parent is not name else None
        if partitions is not None:
            # The partitions of a partitioned topic exist with it, and only those.
            return name.partition_index < partitions
        return self._settings.allow_auto_topic_creation

    async def get_topic(
        self, name: TopicName, *, create: bool = True, explicit: bool = False
    ) -> AnyTopic:
        """Return the loaded topic, loading or auto-creating it as needed.

        Args:
            name: A non-partitioned topic or one partition.
            create: Whether a missing topic may be auto-created.
            explicit: Create it whatever ``allowAutoTopicCreation`` says (the admin API).

        Returns:
            A :class:`Topic` or a :class:`NonPersistentTopic`.

        Raises:
            TopicNotFoundError: Unknown namespace, or missing topic and no creation allowed.
            NotAllowedError: The name is a partitioned topic itself (use its partitions).
            ServiceNotReadyError: The service is shutting down.
        """
        topic = self._topics.get(name)
        if topic is not None:
            return topic
        self._check_namespace(name)
        tg = self._task_group()
        if name in self._partitioned:
            raise NotAllowedError(
                f"{name} is a partitioned topic; producers and consumers attach to its partitions"
            )
        if name.domain is TopicDomain.NON_PERSISTENT:
            if not (create and (explicit or self._may_create(name))):
                raise TopicNotFoundError(f"Topic {name} does not exist")
            topic = NonPersistentTopic(
                name,
                ledger_id=next(self._nonpersistent_ledger),
                settings=self._settings,
                producer_names=self._next_producer_name,
                clock=self._clock,
                limits=self._limits,
            )
        else:
            state = self._states.get(name)
            if state is None:
                state = await self._open_state(
                    name, create=create and (explicit or self._may_create(name))
                )
                topic = self._topics.get(name)
                if topic is not None:
                    return topic  # loaded by a concurrent call while we waited
                tg = self._task_group()
            topic = Topic(
                name,
                state,
                settings=self._settings,
                clock=self._clock,
                task_group=tg,
                producer_names=self._next_producer_name,
                features=self._features,
                throttling=self.throttling,
                limits=self._limits,
                retains=self._retains,
            )
        self._topics[name] = topic
        return topic

    async def _open_state(self, name: TopicName, *, create: bool) -> TopicState:
        """Open (recover or create) a persistent topic's stored state, once per name."""
        while (loading := self._loading.get(name)) is not None:
            await loading.wait()
        state = self._states.get(name)
        if state is not None:
            return state
        s = self._settings
        policy = LedgerPolicy(
            max_entries=max(1, s.managed_ledger_max_entries_per_ledger),
            max_size=s.managed_ledger_max_size_per_ledger_mbytes * 1024 * 1024,
            min_rollover=s.managed_ledger_min_ledger_rollover_time_minutes * 60.0,
            max_rollover=s.managed_ledger_max_ledger_rollover_time_minutes * 60.0,
        )
        bookie = self._bookie
        if create and name not in self._stored and not self._declared_partition(name):
            self._check_room(name, 1)  # a new topic (it may still turn out to exist: bookie)
        if isinstance(bookie, NowaitBookie):
            if not create:
                raise TopicNotFoundError(f"Topic {name} does not exist")
            state = TopicState(
                ManagedLedger.create(bookie, policy=policy, ledger_id=bookie.create_ledger_nowait())
            )
            self._states[name] = state
            return state
        self._loading[name] = event = anyio.Event()
        try:
            path = managed_ledger_path(name)
            ledger = await ManagedLedger.open(
                bookie,
                policy=policy,
                clock=self._clock,
                metadata=self._ml_metadata,
                path=path,
                budget=self._cache,
                create=create,
            )
            if ledger is None:
                raise TopicNotFoundError(f"Topic {name} does not exist")
            state = TopicState(ledger)
            flusher = self._flusher
            if flusher is not None:
                state.cursors.update(await flusher.load(name, path))
                state.persist_cursors = partial(flusher.flush_all, ((name, state),))
            self._states[name] = state
            return state
        finally:
            del self._loading[name]
            event.set()

    def _check_room(self, name: TopicName, adding: int) -> None:
        """``maxTopicsPerNamespace`` (``namespace_limits``).

        Raises:
            TooManyTopicsError: The namespace has no room for ``adding`` more topics.
        """
        policies = self._namespace_policies
        limit = max_topics(
            self._settings.max_topics_per_namespace,
            policies(name.namespace) if policies is not None else None,
        )
        if limit > 0:
            # Pulsar creates a partitioned topic's partitions with it; ours come on first use,
            # so a declared partition counts (and has its room) from the topic's creation on.
            existing = set(self._states) | self._stored
            for parent, partitions in self._partitioned.items():
                if parent.namespace == name.namespace:
                    existing.update(parent.partition(i) for i in range(partitions))
            check_topics_per_namespace(limit, name, adding, existing)

    def _declared_partition(self, name: TopicName) -> bool:
        parent = name.partitioned_topic_name
        return parent is not name and name.partition_index < self._partitioned.get(parent, 0)

    def _persistent_topics(self) -> list[Topic]:
        return [t for t in self._topics.values() if isinstance(t, Topic)]

    def check_message_expiry(
        self, namespace: NamespaceName | None = None, *, now_ms: int | None = None
    ) -> None:
        """Expire old messages of the loaded persistent topics now (``expiry`` rule 5).

        Args:
            namespace: Only this namespace's topics (its policies changed), else every topic.
            now_ms: The wall time to judge ages by (tests); the clock's by default.
        """
        topics = self._persistent_topics()
        if namespace is not None:
            topics = [t for t in topics if t.name.namespace == namespace]
        self.expiry.check_all(topics, now_ms=now_ms)

    def loaded_topic(self, name: TopicName) -> AnyTopic | None:
        """The topic if it is loaded, without loading it."""
        return self._topics.get(name)

    def _next_producer_name(self) -> str:
        # Pulsar's DistributedIdGenerator: "<cluster>-<broker unique id>-<sequence>".
        s = self._settings
        return f"{s.cluster_name}-{s.broker_id}-{next(self._producer_seq)}"

    async def unload(self, name: TopicName) -> None:
        """Close a topic's producers and consumers with CLOSE_* and drop the topic object.

        A partitioned topic's name unloads all its partitions. Stored entries, durable
        subscriptions and acknowledgements stay; unacked deliveries come back after the clients
        resubscribe (§9, §14.5), with redelivery counts started over as Pulsar's are.
        """
        partitions = self._partitioned.get(name)
        targets = [name.partition(i) for i in range(partitions)] if partitions else [name]
        for target in targets:
            topic = self._topics.pop(target, None)
            if topic is not None:
                await topic.close(notify=True)

    # ---- partitioned topics -------------------------------------------------------------------

    async def partitioned_metadata(self, name: TopicName) -> int:
        """Partitions of a topic for PARTITIONED_METADATA (§5.1).

        Returns:
            N for a partitioned topic; 0 for anything else, partitions included. With
            ``allowAutoTopicCreationType=partitioned`` an unknown topic is created with
            ``defaultNumPartitions`` partitions first.

        Raises:
            TopicNotFoundError: Unknown namespace.
        """
        self._check_namespace(name)
        if name.partition_index >= 0:
            return 0
        partitions = self._partitioned.get(name)
        if partitions is not None:
            return partitions
        s = self._settings
        if (
            s.allow_auto_topic_creation
            and s.allow_auto_topic_creation_type == "partitioned"
            and name not in self._states
            and name not in self._topics
        ):
            await self.create_partitioned_topic(name, s.default_num_partitions)
            return s.default_num_partitions
        return 0

    async def create_partitioned_topic(self, name: TopicName, partitions: int) -> None:
        """Create a partitioned topic; its partitions are created on first use.

        Raises:
            TopicNotFoundError: Unknown namespace.
            NotAllowedError: Bad partition count, a partition name, or the topic exists.
            TooManyTopicsError: The namespace has no room for its partitions.
        """
        self._check_namespace(name)
        if partitions < 1:
            raise NotAllowedError(f"partitioned topic {name} needs at least 1 partition")
        if name.partition_index >= 0:
            raise NotAllowedError(f"{name} is a partition name, not a topic name")
        if name in self._partitioned or name in self._states or name in self._topics:
            raise NotAllowedError(f"Topic {name} already exists")
        self._check_room(name, partitions)
        self._partitioned[name] = partitions
        if self._metadata is not None:
            path = _partitioned_path(name)
            await self._metadata.put(
                path, msgspec.json.encode(_PartitionedTopicMetadata(partitions))
            )

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
        for name in itertools.chain(self._states, self._topics, self._stored):
            if name.namespace == ns and name.domain in wanted:
                names.add(str(name))
        for parent, partitions in self._partitioned.items():
            if parent.namespace == ns and parent.domain in wanted:
                names.update(str(parent.partition(i)) for i in range(partitions))
        return sorted(names)

    # ---- admin operations (REST API) ----------------------------------------------------------

    def reconfigure(self, settings: TopicSettings) -> None:
        """Use new settings (dynamic configuration).

        Creation rules change at once; loaded topic objects keep theirs until reloaded.
        """
        self._settings = settings

    def topic_exists(self, name: TopicName) -> bool:
        """Whether a topic exists: stored or loaded, partitioned, or a partition of one."""
        if name in self._topics or name in self._states or name in self._partitioned:
            return True
        if name in self._stored:
            return True
        parent = name.partitioned_topic_name
        return parent is not name and name.partition_index < self._partitioned.get(parent, 0)

    def partitions_of(self, name: TopicName) -> int:
        """Partitions of a partitioned topic, 0 for any other name (never creates anything)."""
        return self._partitioned.get(name, 0)

    def partitioned_topics(self, ns: NamespaceName, domain: TopicDomain) -> list[str]:
        """Names of a namespace's partitioned topics in one domain, sorted."""
        return sorted(str(t) for t in self._partitioned if t.namespace == ns and t.domain is domain)

    async def update_partitioned_topic(self, name: TopicName, partitions: int) -> None:
        """Grow a partitioned topic to ``partitions`` (same count: no-op).

        Raises:
            TopicNotFoundError: Not a partitioned topic.
            NotAllowedError: Fewer partitions than it has.
            TooManyTopicsError: The namespace has no room for the new partitions.
        """
        current = self._partitioned.get(name)
        if current is None:
            raise TopicNotFoundError(f"Topic {name} is not the partitioned topic.")
        if partitions < current:
            raise NotAllowedError(
                f"Desired partitions {partitions} can't be less than the current partitions "
                f"{current}."
            )
        self._check_room(name, partitions - current)
        self._partitioned[name] = partitions
        await self._write_partitions(name, partitions)

    async def delete_topic(self, name: TopicName, *, force: bool = False) -> None:
        """Delete a non-partitioned topic or a partition: entries, subscriptions, counters.

        Args:
            name: The topic.
            force: Disconnect attached producers and consumers instead of refusing.

        Raises:
            TopicNotFoundError: It does not exist.
            NotAllowedError: Producers or consumers are attached and ``force`` is false.
        """
        if name in self._stored and name not in self._states:
            await self._open_state(name, create=False)  # stored by an earlier run: open to delete
        topic = self._topics.get(name)
        if topic is None and name not in self._states:
            raise TopicNotFoundError(f"Topic {name} not found")
        if topic is not None:
            if not force and (topic.producer_count or topic.consumer_count):
                raise NotAllowedError("Topic has active producers/subscriptions")
            del self._topics[name]
            await topic.close(notify=True)
        self._stored.discard(name)
        state = self._states.pop(name, None)
        if state is not None:
            await state.ledger.delete()
        if self._flusher is not None:
            self._flusher.forget(name)

    async def delete_partitioned_topic(self, name: TopicName, *, force: bool = False) -> None:
        """Delete a partitioned topic and every partition (see :meth:`delete_topic`).

        Raises:
            TopicNotFoundError: Not a partitioned topic.
            NotAllowedError: A partition has producers or consumers and ``force`` is false.
        """
        partitions = self._partitioned.get(name)
        if partitions is None:
            raise TopicNotFoundError(f"Partitioned Topic {name} not found")
        targets = [name.partition(i) for i in range(partitions)]
        if not force:
            for target in targets:
                topic = self._topics.get(target)
                if topic is not None and (topic.producer_count or topic.consumer_count):
                    raise NotAllowedError("Topic has active producers/subscriptions")
        for target in targets:
            if target in self._topics or target in self._states:
                await self.delete_topic(target, force=True)
        del self._partitioned[name]
        await self._write_partitions(name, None)

    async def _write_partitions(self, name: TopicName, partitions: int | None) -> None:
        if self._metadata is None:
            return
        path = _partitioned_path(name)
        if partitions is not None:
            await self._metadata.put(
                path, msgspec.json.encode(_PartitionedTopicMetadata(partitions))
            )
        elif await self._metadata.exists(path):
            await self._metadata.delete(path)

    # ---- statistics ---------------------------------------------------------------------------

    def statistics(self) -> ServiceStats:
        """A snapshot of every loaded topic, for ``/metrics``."""
        topics = tuple(self._topics[name].stats() for name in sorted(self._topics, key=str))
        return ServiceStats(
            topics_count=len(topics),
            producers=sum(t.producers for t in topics),
            consumers=sum(t.consumers for t in topics),
            subscriptions=sum(len(t.subscriptions) for t in topics),
            topics=topics,
        )


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


def _partitioned_path(name: TopicName) -> str:
    """Pulsar's node of a partitioned topic's metadata (the local name URL-encoded)."""
    return f"{_PARTITIONED_PATH}/{name.namespace}/{name.domain.value}/{name.encoded_local_name}"


async def _walk_topics(store: MetadataStore, root: str) -> list[tuple[TopicName, bytes]]:
    """Every ``<root>/<tenant>/<ns>/<domain>/<encoded topic>`` node with a value, as topic names."""
    found: list[tuple[TopicName, bytes]] = []
    for tenant in await store.children(root):
        for ns in await store.children(f"{root}/{tenant}"):
            for domain in await store.children(f"{root}/{tenant}/{ns}"):
                base = f"{root}/{tenant}/{ns}/{domain}"
                for local in await store.children(base):
                    node = await store.get(f"{base}/{local}")
                    if node is None:
                        continue
                    topic = unquote(local)
                    try:
                        name = TopicName.parse(f"{domain}://{tenant}/{ns}/{topic}")
                    except InvalidNameError:
                        log.warning("ignoring unparsable topic node %s/%s", base, local)
                        continue
                    found.append((name, node.value))
    return found
