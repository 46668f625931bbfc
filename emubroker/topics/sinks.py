"""Where topics push frames: the protocols the network session implements.

Sinks are non-blocking on purpose (spec/wire-protocol.md §7.2): a dispatch round is a plain loop
that queues frames into the session's outbox, with no ``await`` per message; the session's writer
task flushes them in batches.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["ConsumerSink", "ProducerSink", "send_each"]


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

    def close_consumer(self, consumer_id: int) -> None:
        """Queue a CLOSE_CONSUMER; the client reconnects and resubscribes (§9)."""
        ...

    def active_consumer_change(self, consumer_id: int, is_active: bool) -> None:
        """Queue an ACTIVE_CONSUMER_CHANGE (Failover subscriptions)."""
        ...

    def reached_end_of_topic(self, consumer_id: int) -> None:
        """Queue a REACHED_END_OF_TOPIC: the topic is terminated and everything is consumed."""
        ...


class ProducerSink(Protocol):
    """The session side of a producer."""

    def close_producer(self, producer_id: int) -> None:
        """Queue a CLOSE_PRODUCER; the client reconnects and re-sends pending messages (§9)."""
        ...


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
