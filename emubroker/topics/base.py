"""What both topic kinds share: a name, count limits, producers, the subscriptions' directory.

:class:`TopicBase` is the part of ``handles.TopicHandle`` that is the same for persistent and
non-persistent topics; each kind (``topic.Topic``, ``nonpersistent.NonPersistentTopic``) adds
how it stores, delivers and acknowledges. A producer is admitted the same way on both
(``ProducerRegistry.admit``: the producer limit, a generated name, the access-mode rules); a
persistent topic adds deduplication's last sequence id (``dedup``) around it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from emubroker.topics.limits import LimitResolver
from emubroker.topics.producer import OnWaiting, ProducerHandle, ProducerRegistry
from emubroker.topics.stats import TopicLoad
from protocol.errors import ServiceNotReadyError, SubscriptionNotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from emubroker.naming import TopicName
    from emubroker.topics.limits import CountLimits
    from emubroker.topics.requests import ProducerRequest
    from emubroker.topics.settings import TopicSettings
    from emubroker.topics.sinks import ProducerSink
    from emubroker.topics.stats import TopicCounters

__all__ = ["TopicBase"]


class _Subscription(Protocol):
    @property
    def consumers(self) -> Sequence[object]: ...


S = TypeVar("S", bound=_Subscription)


class TopicBase(Generic[S]):
    """The shared part of a loaded topic (see the module docstring).

    Args:
        name: The topic (a partition or a non-partitioned topic).
        settings: Topic settings.
        counters: Its counters (they also key its producers' and consumers' rates).
        producer_names: Generates a unique name for producers that bring none.
        limits: Where its count limits come from (``limits``); None: the broker's only.
        topic_epoch: The exclusive-producer epoch kept from an earlier load (-1: never taken).
    """

    def __init__(
        self,
        name: TopicName,
        settings: TopicSettings,
        counters: TopicCounters,
        producer_names: Callable[[], str],
        limits: LimitResolver | None,
        topic_epoch: int = -1,
    ) -> None:
        self.name = name
        self.settings = settings
        self._counters = counters
        self._limits = limits or LimitResolver()
        self._producers = ProducerRegistry(
            name, counters=counters, names=producer_names, topic_epoch=topic_epoch
        )
        self._subs: dict[str, S] = {}
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once unloaded or closed with the service."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ServiceNotReadyError(f"Topic {self.name} is being unloaded")

    def limits(self) -> CountLimits:
        """The count limits in force now (topic > namespace > broker, ``limits``)."""
        return self._limits.limits(self.name, self.settings)

    # ---- producers ----------------------------------------------------------------------------

    async def add_producer(
        self, request: ProducerRequest, sink: ProducerSink, *, on_waiting: OnWaiting = None
    ) -> ProducerHandle:
        """Attach a producer (``handles.TopicHandle.add_producer``; rules in ``producer``)."""
        self._check_open()
        await self._admitting()
        handle = await self._producers.admit(
            request, sink, limits=self.limits(), on_waiting=on_waiting
        )
        self._admitted(handle)
        return handle

    async def _admitting(self) -> None:
        """Before a producer is admitted: what the topic kind reads first (may await)."""

    def _admitted(self, handle: ProducerHandle) -> None:
        """A producer was admitted: what the topic kind tells it."""

    async def remove_producer(self, producer: ProducerHandle) -> None:
        """Detach a producer (CLOSE_PRODUCER or connection drop)."""
        self._producers.remove(producer)

    def producers(self) -> list[ProducerHandle]:
        """The attached producers, oldest first."""
        return self._producers.producers

    @property
    def producer_count(self) -> int:
        """Attached producers."""
        return len(self._producers.producers)

    def _check_producer(self, producer: ProducerHandle) -> None:
        """Refuse a SEND of a closed producer or to a closed topic.

        Raises:
            ServiceNotReadyError: Pulsar drops such a SEND without a reply; the client re-sends
                it after re-creating the producer, so nothing may be stored or delivered.
        """
        if producer.closed or self._closed:
            raise ServiceNotReadyError(
                f"Producer {producer.producer_name} on {self.name} is closed; SEND dropped"
            )

    # ---- the subscriptions' directory ---------------------------------------------------------

    def subscriptions(self) -> list[str]:
        """Names of the subscriptions, sorted."""
        return sorted(self._subs)

    def subscription(self, name: str) -> S | None:
        """A subscription by name."""
        return self._subs.get(name)

    def _existing(self, name: str) -> S:
        """A subscription by name, for an operation on it.

        Raises:
            SubscriptionNotFoundError: No such subscription.
        """
        sub = self._subs.get(name)
        if sub is None:
            raise SubscriptionNotFoundError(f"Subscription {name} not found for topic {self.name}")
        return sub

    @property
    def consumer_count(self) -> int:
        """Attached consumers over all subscriptions."""
        return sum(len(sub.consumers) for sub in self._subs.values())

    def load(self) -> TopicLoad:
        """Its running counters and attachments (the load report's sample)."""
        c = self._counters
        return TopicLoad(
            self.name,
            c.msg_in,
            c.bytes_in,
            c.msg_out,
            c.bytes_out,
            self.producer_count,
            self.consumer_count,
        )
