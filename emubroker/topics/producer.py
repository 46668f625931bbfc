"""Producers of a topic: names, access modes and topic epochs (spec/wire-protocol.md §6.1).

Rules, following Pulsar's ``AbstractTopic.addProducer``:

1. Names are unique among a topic's live producers. A name in use fails with
   ``ProducerBusyError``, except for the *successor* of the holder (same sink, same producer id,
   higher epoch: the client re-created it on the same connection), which replaces it.
2. ``Shared`` producers coexist; one fails with ``ProducerBusyError`` while an exclusive
   producer holds the topic.
3. ``Exclusive`` needs the topic to have no other producer, else ``ProducerFencedError``.
   ``WaitForExclusive`` waits instead until it can have the topic.
   ``ExclusiveWithFencing`` closes every other producer (CLOSE_PRODUCER) and takes the topic.
4. Each time an exclusive producer takes the topic the *topic epoch* goes up by one, unless the
   producer comes back with the current epoch (a reconnection). An exclusive producer that
   presents an older epoch was fenced meanwhile and fails with ``ProducerFencedError``.

:meth:`ProducerRegistry.admit` is the admission both topic kinds share: the producer count limit
first (``limits`` rule 1), a generated name for a producer that brings none, the rules above,
then the handle's metadata and stats key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

import anyio

from emubroker.topics.limits import check_producers
from emubroker.topics.requests import ClientInfo
from emubroker.topics.sinks import producer_closed
from emubroker.topics.stats import PublisherStats
from protocol.commands import AccessMode
from protocol.errors import ProducerBusyError, ProducerFencedError, ServiceNotReadyError

if TYPE_CHECKING:
    from emubroker.naming import TopicName
    from emubroker.topics.limits import CountLimits
    from emubroker.topics.requests import ProducerRequest
    from emubroker.topics.sinks import Notify, ProducerSink
    from emubroker.topics.stats import TopicCounters

__all__ = ["OnWaiting", "ProducerHandle", "ProducerRegistry"]

OnWaiting: TypeAlias = Callable[[], None] | None
"""Called once if a ``WaitForExclusive`` producer has to wait (the handler then answers
``producer_ready=false``, §6.1)."""

_EXCLUSIVE = (
    AccessMode.EXCLUSIVE,
    AccessMode.WAIT_FOR_EXCLUSIVE,
    AccessMode.EXCLUSIVE_WITH_FENCING,
)


class ProducerHandle:
    """One attached producer.

    Attributes:
        producer_id: The client-chosen id.
        producer_name: The name to answer in PRODUCER_SUCCESS (given or generated).
        sink: Where CLOSE_PRODUCER goes.
        access_mode: As requested.
        epoch: The client's reconnection counter.
        topic_epoch: The topic epoch for exclusive producers, else None.
        last_sequence_id: The producer name's last sequence id when deduplication is on, else -1
            (``PRODUCER_SUCCESS.last_sequence_id``, §6.1).
        schema_version: The 8-byte schema version for PRODUCER_SUCCESS, empty without a schema.
        closed: Set once removed.
        metadata: ``CommandProducer.metadata`` (admin stats echo it).
        client: Who opened it (admin stats).
        stats_key: Unique among its topic's producers and consumers (set by the topic).
        msg_in: Messages it published (a batch of N counts N).
        bytes_in: Entry bytes it published.
    """

    __slots__ = (
        "access_mode",
        "bytes_in",
        "client",
        "closed",
        "epoch",
        "last_sequence_id",
        "metadata",
        "msg_in",
        "producer_id",
        "producer_name",
        "schema_version",
        "sink",
        "stats_key",
        "topic_epoch",
    )

    def __init__(
        self,
        producer_id: int,
        producer_name: str,
        sink: ProducerSink,
        access_mode: AccessMode,
        epoch: int,
    ) -> None:
        self.producer_id = producer_id
        self.producer_name = producer_name
        self.sink = sink
        self.access_mode = access_mode
        self.epoch = epoch
        self.topic_epoch: int | None = None
        self.last_sequence_id = -1
        self.schema_version: bytes | None = None
        self.closed = False
        self.metadata: dict[str, str] = {}
        self.client = ClientInfo()
        self.stats_key = 0
        self.msg_in = 0
        self.bytes_in = 0

    def __repr__(self) -> str:
        return f"ProducerHandle({self.producer_id}, {self.producer_name!r})"

    def stats(self) -> PublisherStats:
        """A snapshot for metrics and admin."""
        return PublisherStats(
            key=self.stats_key,
            name=self.producer_name,
            producer_id=self.producer_id,
            msg_in=self.msg_in,
            bytes_in=self.bytes_in,
        )


class ProducerRegistry:
    """The producers of one topic (see the module docstring).

    Args:
        topic: The topic's name, for error messages.
        counters: The topic's counters (they hand out the handles' stats keys).
        names: Generates a unique name for producers that bring none.
        topic_epoch: The topic epoch kept from an earlier load of the topic; -1 until an
            exclusive producer first takes the topic (which then gets epoch 0, as in Pulsar).
    """

    def __init__(
        self,
        topic: TopicName,
        *,
        counters: TopicCounters,
        names: Callable[[], str],
        topic_epoch: int = -1,
    ) -> None:
        self._topic = topic
        self._counters = counters
        self._names = names
        self.topic_epoch = topic_epoch
        self._closed = False
        self._by_name: dict[str, ProducerHandle] = {}
        self._exclusive: ProducerHandle | None = None
        self._changed = anyio.Event()

    @property
    def producers(self) -> list[ProducerHandle]:
        """The live producers, oldest first."""
        return list(self._by_name.values())

    async def admit(
        self,
        request: ProducerRequest,
        sink: ProducerSink,
        *,
        limits: CountLimits,
        on_waiting: Callable[[], None] | None = None,
    ) -> ProducerHandle:
        """Attach the producer a PRODUCER asks for (see the module docstring).

        Args:
            request: The PRODUCER.
            sink: Its session.
            limits: The topic's count limits in force.
            on_waiting: As for :meth:`add`.

        Raises:
            ProducerBusyError: The producer limit is reached, or as :meth:`add` raises it.
            ProducerFencedError: As :meth:`add` raises it.
            ServiceNotReadyError: The topic was closed (unloaded) meanwhile.
        """
        check_producers(limits, self._topic, len(self._by_name))
        handle = await self.add(
            request.producer_id,
            sink,
            producer_name=request.producer_name or self._names(),
            access_mode=request.access_mode,
            epoch=request.epoch,
            topic_epoch=request.topic_epoch,
            on_waiting=on_waiting,
        )
        handle.metadata = dict(request.metadata)
        handle.client = request.client
        handle.stats_key = self._counters.next_handle_key()
        return handle

    async def add(
        self,
        producer_id: int,
        sink: ProducerSink,
        *,
        producer_name: str,
        access_mode: AccessMode,
        epoch: int,
        topic_epoch: int | None,
        on_waiting: Callable[[], None] | None = None,
    ) -> ProducerHandle:
        """Attach a producer.

        Args:
            producer_id: The client's id.
            sink: Its session.
            producer_name: The final name (given or generated).
            access_mode: The requested access mode.
            epoch: The client's reconnection counter.
            topic_epoch: The topic epoch the client got before, if any.
            on_waiting: Called once if a ``WaitForExclusive`` producer has to wait (the handler
                then answers ``producer_ready=false``).

        Returns:
            The new handle.

        Raises:
            ProducerBusyError: The name is taken, or a Shared producer meets an exclusive one.
            ProducerFencedError: An exclusive mode conflicts, or ``topic_epoch`` is stale.
            ServiceNotReadyError: The topic was closed (unloaded) meanwhile; the client retries.
        """
        notified = False
        while True:
            if self._closed:
                raise ServiceNotReadyError(f"Topic {self._topic} is being unloaded")
            existing = self._by_name.get(producer_name)
            if existing is not None and not (
                existing.sink is sink
                and existing.producer_id == producer_id
                and existing.epoch < epoch
            ):
                raise ProducerBusyError(
                    f"Producer with name '{producer_name}' is already connected to topic "
                    f"{self._topic}"
                )
            others = [p for p in self._by_name.values() if p is not existing]
            if access_mode not in _EXCLUSIVE:
                if self._exclusive is not None and self._exclusive is not existing:
                    raise ProducerBusyError(
                        f"Topic {self._topic} has an exclusive producer: "
                        f"{self._exclusive.producer_name}"
                    )
                break
            if topic_epoch is not None and topic_epoch < self.topic_epoch:
                raise ProducerFencedError(
                    f"Producer {producer_name} was fenced: topic epoch {topic_epoch} is older "
                    f"than {self.topic_epoch}"
                )
            if not others:
                break
            if access_mode is AccessMode.EXCLUSIVE_WITH_FENCING:
                for other in others:
                    self._remove(other)
                    other.sink.close_producer(other.producer_id)
                break
            if access_mode is AccessMode.EXCLUSIVE:
                raise ProducerFencedError(
                    f"Topic {self._topic} has existing producers; exclusive access refused"
                )
            # WaitForExclusive: wait for the next removal and try again.
            if not notified and on_waiting is not None:
                on_waiting()
            notified = True
            await self._changed.wait()
        if existing is not None:
            self._remove(existing)
        handle = ProducerHandle(producer_id, producer_name, sink, access_mode, epoch)
        if access_mode in _EXCLUSIVE:
            if topic_epoch is None or topic_epoch != self.topic_epoch:
                self.topic_epoch += 1
            handle.topic_epoch = self.topic_epoch
            self._exclusive = handle
        self._by_name[producer_name] = handle
        return handle

    def remove(self, handle: ProducerHandle) -> None:
        """Detach a producer; unknown or already removed handles are ignored."""
        if self._by_name.get(handle.producer_name) is handle:
            self._remove(handle)

    def _remove(self, handle: ProducerHandle) -> None:
        del self._by_name[handle.producer_name]
        handle.closed = True
        if self._exclusive is handle:
            self._exclusive = None
        self._changed.set()
        self._changed = anyio.Event()

    def disconnect_all(self) -> None:
        """Send every producer CLOSE_PRODUCER and detach it; new ones may still come."""
        for handle in list(self._by_name.values()):
            self._remove(handle)
            handle.sink.close_producer(handle.producer_id)

    def close_all(self, *, notify: Notify) -> None:
        """Detach every producer, telling each client as ``notify`` says (unload, §9)."""
        self._closed = True
        self._changed.set()
        for handle in list(self._by_name.values()):
            self._remove(handle)
            producer_closed(notify, handle.sink, handle.producer_id)
