"""A persistent topic: producers, subscriptions, the admin operations on them.

The topic object is what a loaded topic looks like; its durable state
(:class:`~emubroker.topics.topic_state.TopicState`: the managed ledger, the durable cursors, the
counters, the topic epoch) belongs to the service and outlives unloads, so a reloaded topic
resumes exactly where the old one stopped (§9): durable subscriptions keep their
acknowledgements, and entries that were delivered but not acknowledged come back (an unload is
not a redelivery request: their redelivery counts start over, as on a reloaded Pulsar topic).
What producers write, storing it in the managed ledger, and trimming what was consumed, is the
base class's (:class:`~emubroker.topics.publishing.PublishingTopic`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emubroker.topics.cursor import Cursor
from emubroker.topics.dedup import DedupState
from emubroker.topics.expiry import is_expirable
from emubroker.topics.limits import (
    LimitResolver,
    check_new_subscription,
    check_subscriptions,
    check_topic_consumers,
)
from emubroker.topics.publishing import PublishingTopic
from emubroker.topics.stats import TopicStats
from emubroker.topics.subscription import Subscription
from emubroker.topics.subtypes import RULES
from protocol.commands import InitialPosition
from protocol.errors import NotAllowedError, ProducerBusyError, TopicTerminatedError
from protocol.ids import is_latest

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import TaskGroup

    from emubroker.naming import TopicName
    from emubroker.topics.backlog_quota import BacklogQuotas, OldestBacklog
    from emubroker.topics.compacted import CompactedView
    from emubroker.topics.consumer import Consumer
    from emubroker.topics.features import TopicFeatures
    from emubroker.topics.managed_ledger import ManagedLedger
    from emubroker.topics.producer import ProducerHandle
    from emubroker.topics.requests import SubscribeRequest
    from emubroker.topics.settings import TopicSettings
    from emubroker.topics.sinks import ConsumerSink, Notify
    from emubroker.topics.throttling import DispatchThrottling
    from emubroker.topics.topic_state import TopicState
    from protocol.clock import Clock
    from protocol.commands import MessageIdData

__all__ = ["Topic"]


class Topic(PublishingTopic):
    """A loaded persistent topic.

    Args:
        name: The topic (a partition or a non-partitioned topic).
        state: Its stored state.
        settings: Topic settings.
        clock: Time for delayed delivery.
        task_group: Where dispatcher tasks run (owned by the service).
        producer_names: Generates a unique name for producers that bring none.
        features: The namespace switches (deduplication); None: all off.
        throttling: The broker's dispatch throttling (``throttling``); None: never throttled.
        limits: Where its count limits come from (``limits``); None: the broker's only.
        retains: Whether a topic's namespace sets a retention policy (then consumed ledgers
            are kept, see :meth:`trim_consumed`); None: never.
        quotas: Backlog quotas (``backlog_quota``: producers are refused while one is
            exceeded); None: none.
    """

    def __init__(
        self,
        name: TopicName,
        state: TopicState,
        *,
        settings: TopicSettings,
        clock: Clock,
        task_group: TaskGroup,
        producer_names: Callable[[], str],
        features: TopicFeatures | None = None,
        throttling: DispatchThrottling | None = None,
        limits: LimitResolver | None = None,
        retains: Callable[[TopicName], bool] | None = None,
        quotas: BacklogQuotas | None = None,
    ) -> None:
        super().__init__(
            name, settings, state.counters, producer_names, limits, topic_epoch=state.topic_epoch
        )
        self._retains = retains
        self._quotas = quotas
        self.oldest_backlog: OldestBacklog | None = None  # as of the last quota check
        self._throttling = throttling
        self._state = state
        self._clock = clock
        self._tg = task_group
        self._partition = name.partition_index
        self._features = features
        self._compacted_subs: set[str] = set()  # subscriptions with read_compacted consumers
        for sub_name, cursor in state.cursors.items():
            self._open_subscription(sub_name, cursor, cursor.mark_delete + 1)

    @property
    def ledger(self) -> ManagedLedger:
        """The topic's entries."""
        return self._state.ledger

    def as_persistent(self) -> Topic:
        """This topic: its ledger and cursors are stored (``handles.TopicHandle``)."""
        return self

    # ---- producers (what they write: ``publishing``) -------------------------------------------

    async def _admitting(self) -> None:
        if self._state.ledger.terminated:
            # AbstractTopic.addProducer refuses a terminated topic's producers.
            raise TopicTerminatedError("Topic was already terminated")
        if self._quotas is not None:
            self._quotas.check_producer(self)  # ``backlog_quota`` rule 3
        # The namespace's deduplication switch is read as producers attach (``dedup``).
        if self._features is not None:
            enabled = await self._features.dedup_enabled(self.name)
            self._check_open()
            state = self._state
            state.dedup = DedupState.switch(state.dedup, enabled, state.ledger.infos)

    def _admitted(self, handle: ProducerHandle) -> None:
        dedup = self._state.dedup
        if dedup is not None:
            handle.last_sequence_id = dedup.last_sequence_id(handle.producer_name)  # §6.1

    # ---- subscriptions ------------------------------------------------------------------------

    async def subscribe(self, request: SubscribeRequest, sink: ConsumerSink) -> Consumer:
        """Attach a consumer, creating the subscription if needed (§7.1).

        A new durable subscription starts at ``request.initial_position``, a new reader at its
        ``start_message_id``; ``read_compacted`` shows the compacted view (``compacted``).

        Returns:
            The consumer handle; it has 0 permits until FLOW.

        Raises:
            ConsumerBusyError: Exclusive taken, type mismatch, or a consumer limit reached.
            NotAllowedError: Durable/non-durable clash, a compacted read on a type that has
                none, or the subscription limit reached.
            ConsumerAssignError: Key_Shared STICKY range conflict.
            ProducerBusyError: A blank subscription name (Pulsar's code for it).
            ServiceNotReadyError: The topic is being unloaded.
        """
        self._check_open()
        limits = self.limits()
        check_topic_consumers(limits, self.consumer_count)
        name = request.subscription
        if request.read_compacted and not RULES[request.sub_type].read_compacted:
            # PersistentTopic.subscribe refuses compacted reads on shared subscriptions.
            raise NotAllowedError(
                "readCompacted only allowed on failover or exclusive subscriptions"
            )
        if not name.strip():
            # PersistentTopic.subscribe: a blank name is a NamingException, which Pulsar's
            # getClientErrorCode answers as ProducerBusy (non-persistent topics do not check).
            raise ProducerBusyError("Empty subscription name")
        sub = self._subs.get(name)
        created = sub is None
        if sub is None:
            check_new_subscription(limits, request.durable)
            check_subscriptions(limits, self.name, len(self._subs))
            sub = self._new_subscription(name, request)
        consumer = sub.add_consumer(
            request, sink, max_consumers=limits.max_consumers_per_subscription
        )
        if created:
            self._subs[name] = sub
            if request.durable:
                self._state.add_cursor(name, sub.cursor)
            sub.start(self._tg)
            if request.durable and self._state.persist_cursors is not None:
                await self._state.persist_cursors()
        if request.read_compacted:
            self._compacted_subs.add(name)
            self._read_compacted(sub)
        elif name in self._compacted_subs:
            self._compacted_subs.discard(name)
            sub.compacted = None
        return consumer

    def _read_compacted(self, sub: Subscription) -> None:
        # Before any FLOW reaches the new consumer: acknowledge what compaction removed.
        sub.read_compacted(self._state.compacted)

    @property
    def compacted(self) -> CompactedView | None:
        """The last compaction's view (``compacted``), kept across unloads."""
        return self._state.compacted

    def install_compacted(self, view: CompactedView) -> None:
        """Adopt a compaction's result; subscriptions reading compacted see it at once."""
        self._state.compacted = view
        for name in list(self._compacted_subs):
            sub = self._subs.get(name)
            if sub is None:
                self._compacted_subs.discard(name)
            else:
                self._read_compacted(sub)

    def _new_subscription(self, name: str, request: SubscribeRequest) -> Subscription:
        count = self._state.ledger.count
        if request.durable:
            # An unloaded topic's durable cursors are reopened at load, so this one is new.
            latest = request.initial_position is InitialPosition.LATEST
            start = count if latest else self.ledger.first_index
            return self._make_subscription(name, Cursor(start - 1), start)
        if name in self._state.cursors:
            raise NotAllowedError(f"A durable subscription named '{name}' already exists")
        start = self._reader_start(request.start_message_id, request.initial_position)
        return self._make_subscription(name, Cursor(start - 1, durable=False), start)

    def _reader_start(self, start: MessageIdData | None, initial_position: InitialPosition) -> int:
        ledger = self._state.ledger
        if start is None:
            if initial_position is InitialPosition.LATEST:
                return ledger.count
            return ledger.first_index
        if start.ledger_id < 0:
            return ledger.first_index  # earliest sentinel (-1, -1); trimmed ledgers are gone
        if is_latest(start):
            return ledger.count
        # Start *with* that entry: the client drops what precedes its own start id (§7.1).
        return ledger.index_at_or_after(start.ledger_id, start.entry_id)

    def _make_subscription(self, name: str, cursor: Cursor, read_position: int) -> Subscription:
        sub = Subscription(
            name,
            ledger=self._state.ledger,
            cursor=cursor,
            topic=str(self.name),
            partition=self._partition,
            clock=self._clock,
            settings=self.settings,
            counters=self._state.counters,
            read_position=read_position,
            on_remove=self._subscription_ended,
            on_consumed=self.trim_consumed,
        )
        if self._throttling is not None:
            sub.dispatcher.throttle = self._throttling.open(self.name, name)
        return sub

    def _open_subscription(self, name: str, cursor: Cursor, read_position: int) -> None:
        sub = self._make_subscription(name, cursor, read_position)
        self._subs[name] = sub
        sub.start(self._tg)

    def _subscription_ended(self, sub: Subscription, deleted: bool) -> None:
        if sub.dispatcher.throttle is not None:
            sub.dispatcher.throttle.close()
        if self._subs.get(sub.name) is sub:
            del self._subs[sub.name]
        if deleted and self._state.cursors.get(sub.name) is sub.cursor:
            self._state.remove_cursor(sub.name)
        if not self._closed:
            self.trim_consumed()  # the slowest subscription may be the one that went

    # ---- backlog quotas (``backlog_quota``) ---------------------------------------------------

    def durable_subscriptions(self) -> list[Subscription]:
        """The durable subscriptions, by name."""
        return [sub for _, sub in sorted(self._subs.items()) if sub.durable]

    def disconnect_producers(self) -> None:
        """CLOSE_PRODUCER to every producer, which may come back (``backlog_quota`` rule 2)."""
        self._producers.disconnect_all()

    # ---- message expiry -----------------------------------------------------------------------

    def expirable_subscriptions(self) -> list[Subscription]:
        """The subscriptions a topic-wide expiry applies to (``expiry`` rule 5)."""
        return [sub for name, sub in sorted(self._subs.items()) if is_expirable(name)]

    def expire_to(self, index: int, now_ms: int) -> None:
        """Expire every expirable subscription up to ``index`` (``expiry`` rules 4 and 5)."""
        for sub in self.expirable_subscriptions():
            sub.expiry.last_expire = now_ms
            sub.expire_to(index, now_ms)

    # ---- admin operations (REST API) ----------------------------------------------------------

    def create_subscription(self, name: str, start: MessageIdData | None) -> Subscription:
        """Create a durable subscription without consumers, its cursor before ``start``.

        Args:
            name: The subscription.
            start: Its first entry to deliver (earliest/latest sentinels allowed); None: latest.

        Raises:
            NotAllowedError: A subscription of that name exists, or the topic has as many
                subscriptions as ``maxSubscriptionsPerTopic`` allows (``limits`` rule 4).
            ServiceNotReadyError: The topic is being unloaded.
        """
        self._check_open()
        if name in self._subs or name in self._state.cursors:
            raise NotAllowedError("Subscription already exists for topic")
        check_subscriptions(self.limits(), self.name, len(self._subs))
        index = self._reader_start(start, InitialPosition.LATEST)
        cursor = Cursor(index - 1)
        self._state.add_cursor(name, cursor)
        self._open_subscription(name, cursor, index)
        return self._subs[name]

    def delete_subscription(self, name: str, *, force: bool = False) -> None:
        """Delete a subscription; with ``force`` its consumers are disconnected first.

        Raises:
            SubscriptionNotFoundError: No such subscription.
            ConsumerBusyError: Consumers are attached and ``force`` is false.
        """
        self._existing(name).delete(force=force)

    # ---- queries ------------------------------------------------------------------------------

    def last_message_id(self) -> tuple[int, int, int]:
        """``(ledger, entry, batch_index)`` of the last entry; ``(ledger, -1, -1)`` when empty."""
        return self._state.ledger.last_message_id()

    def stats(self) -> TopicStats:
        """A snapshot for metrics and admin."""
        counters = self._state.counters
        subs = tuple(self._subs[name].stats() for name in sorted(self._subs))
        return TopicStats(
            name=str(self.name),
            namespace=str(self.name.namespace),
            persistent=True,
            producers=self.producer_count,
            consumers=sum(s.consumers for s in subs),
            msg_in=counters.msg_in,
            bytes_in=counters.bytes_in,
            msg_out=counters.msg_out,
            bytes_out=counters.bytes_out,
            msg_dropped=counters.msg_dropped,
            entries=self._state.ledger.count,
            backlog=sum(s.backlog for s in subs),
            subscriptions=subs,
            publisher_stats=tuple(p.stats() for p in self._producers.producers),
            created_ms=counters.created_ms,
            last_publish_ms=counters.last_publish_ms,
        )

    # ---- closing ------------------------------------------------------------------------------

    async def close(self, *, notify: Notify = True) -> None:
        """Close the topic object; its state stays with the service.

        Args:
            notify: Send CLOSE_PRODUCER / CLOSE_CONSUMER to every handler (unload, §9), or
                hold them back until a transfer's destination owns the bundle (``HeldCloses``).
        """
        if self._closed:
            return
        self._closed = True
        self._producers.close_all(notify=notify)
        for sub in list(self._subs.values()):
            sub.close(notify=notify)
            if sub.dispatcher.throttle is not None:
                sub.dispatcher.throttle.close()
        self._subs.clear()
        self._state.topic_epoch = self._producers.topic_epoch
