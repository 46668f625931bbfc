"""Where topics push frames: the protocols the network session implements.

Sinks are non-blocking on purpose (spec/wire-protocol.md §7.2): a dispatch round is a plain loop
that queues frames into the session's outbox, with no ``await`` per message; the session's writer
task flushes them in batches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeAlias

if TYPE_CHECKING:
    from emubroker.naming import AssignedBroker, TopicName

__all__ = [
    "ConsumerSink",
    "HeldCloses",
    "Notify",
    "ProducerSink",
    "consumer_closed",
    "producer_closed",
    "send_each",
]


class ConsumerSink(Protocol):
    """The session side of a consumer.

    Attributes:
        writable: Whether the connection takes more now: false while more than a high water
            mark of bytes waits to be written to it (Netty's channel writability, which
            Pulsar's ``cnx.isWritable()`` reads); non-persistent topics drop what they would
            send to an unwritable consumer.
    """

    writable: bool

    def send_message(
        self,
        consumer_id: int,
        ledger_id: int,
        entry_id: int,
        partition: int,
        redelivery_count: int,
        ack_set: tuple[int, ...],
        section: bytes,
    ) -> None:
        """Queue one MESSAGE frame.

        Args:
            consumer_id: The consumer it is for.
            ledger_id: The entry's ledger.
            entry_id: The entry's id in that ledger.
            partition: The topic's partition index, -1 for a non-partitioned topic (§7.2).
            redelivery_count: 0 on first delivery, +1 per redelivery in the subscription.
            ack_set: For a partly batch-index-acked entry, the words of the bitmap of messages
                still to deliver; empty otherwise.
            section: ``framing.payload_section(entry, crc)`` as stored.
        """
        ...

    def send_messages(
        self, consumer_id: int, ledger_id: int, entry_id: int, partition: int, sections: list[bytes]
    ) -> int:
        """Queue the first deliveries of consecutive entries from ``entry_id`` on.

        What ``send_message`` of each in turn does (redelivery count 0, no ack set), stopping
        before an entry when the sink is no longer ``writable`` (``send_each``): the
        dispatcher's run of new entries to one consumer.

        Returns:
            How many were queued (the first ones of ``sections``).
        """
        ...

    def close_consumer(self, consumer_id: int, assigned: AssignedBroker | None = None) -> None:
        """Queue a CLOSE_CONSUMER; the client reconnects and resubscribes (§9).

        With ``assigned`` (a bundle transfer), the client reconnects there without a lookup.
        """
        ...

    def active_consumer_change(self, consumer_id: int, is_active: bool) -> None:
        """Queue an ACTIVE_CONSUMER_CHANGE (Failover subscriptions)."""
        ...

    def reached_end_of_topic(self, consumer_id: int) -> None:
        """Queue a REACHED_END_OF_TOPIC: the topic is terminated and everything is consumed."""
        ...


class ProducerSink(Protocol):
    """The session side of a producer."""

    def close_producer(self, producer_id: int, assigned: AssignedBroker | None = None) -> None:
        """Queue a CLOSE_PRODUCER; the client reconnects and re-sends pending messages (§9).

        With ``assigned`` (a bundle transfer), the client reconnects there without a lookup.
        """
        ...

    def hold_producer(self, producer_id: int) -> None:
        """The broker closed the producer and tells the client later (``HeldCloses``).

        From now on its SENDs are dropped unanswered, as Pulsar ignores them while a topic
        transfers; the client re-sends them after the CLOSE_PRODUCER.
        """
        ...


class HeldCloses:
    """CLOSE_PRODUCER / CLOSE_CONSUMER held back while a bundle moves to its destination.

    Pulsar's transfer (``loadBalancerMultiPhaseBundleUnload``): the topics close first without
    disconnecting their clients (their SENDs are ignored meanwhile), and only once the
    destination owns the bundle are the clients told, with its address, so that they reconnect
    there without a lookup. The topics hand their producers and consumers here when they close;
    :meth:`send` tells them all.

    Attributes:
        topics: The topics closed (their names), in order.
    """

    def __init__(self) -> None:
        self.topics: list[TopicName] = []
        self._producers: list[tuple[ProducerSink, int]] = []
        self._consumers: list[tuple[ConsumerSink, int]] = []

    def __bool__(self) -> bool:
        """Whether any client waits to be told."""
        return bool(self._producers or self._consumers)

    def hold_producer(self, sink: ProducerSink, producer_id: int) -> None:
        """A producer closed: its SENDs are dropped from now on, its CLOSE waits."""
        sink.hold_producer(producer_id)
        self._producers.append((sink, producer_id))

    def hold_consumer(self, sink: ConsumerSink, consumer_id: int) -> None:
        """A consumer closed (it gets no more messages): its CLOSE waits."""
        self._consumers.append((sink, consumer_id))

    def send(self, assigned: AssignedBroker | None) -> None:
        """Tell every held client, with where to reconnect (None: they look the topic up)."""
        producers, self._producers = self._producers, []
        consumers, self._consumers = self._consumers, []
        for producer_sink, producer_id in producers:
            producer_sink.close_producer(producer_id, assigned)
        for consumer_sink, consumer_id in consumers:
            consumer_sink.close_consumer(consumer_id, assigned)


Notify: TypeAlias = "bool | HeldCloses"
"""How the clients of a closing topic learn of it: CLOSE_* now (True), never (False: the bundle
was lost, or the connection is going), or once the bundle's destination owns it (``HeldCloses``)."""


def producer_closed(notify: Notify, sink: ProducerSink, producer_id: int) -> None:
    """Tell a producer's client that the broker closed it, as ``notify`` says."""
    if isinstance(notify, HeldCloses):
        notify.hold_producer(sink, producer_id)
    elif notify:
        sink.close_producer(producer_id)


def consumer_closed(notify: Notify, sink: ConsumerSink, consumer_id: int) -> None:
    """Tell a consumer's client that the broker closed it, as ``notify`` says."""
    if isinstance(notify, HeldCloses):
        notify.hold_consumer(sink, consumer_id)
    elif notify:
        sink.close_consumer(consumer_id)


def send_each(
    sink: ConsumerSink,
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    partition: int,
    sections: list[bytes],
) -> int:
    """``ConsumerSink.send_messages`` as ``send_message`` of each entry in turn.

    For sinks without a faster way (tests, the throwaway consumer of a DLQ producer).
    """
    for offset, section in enumerate(sections):
        if not sink.writable:
            return offset
        sink.send_message(consumer_id, ledger_id, entry_id + offset, partition, 0, (), section)
    return len(sections)
