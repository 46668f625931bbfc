"""Partitioned topics: one child producer or consumer per `<topic>-partition-<i>` (spec §5.1).

The children do their own lookups and reconnections; the parents only route. Messages with a
key go to `(murmur3_32(key) & 0x7fffffff) % partitions`, the others round robin (spec §14.4).
Partition consumers share one receiver queue, each sized `min(queue, 50000 / partitions)`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

import anyio

from protocol.client._util import Future
from protocol.client.config import ConsumerConfig, ProducerConfig
from protocol.client.consumer import Consumer
from protocol.client.producer import Producer, SendCallback
from protocol.client.receive_queue import ReceiveQueue
from protocol.client.received import Message
from protocol.client.routing import RoundRobinRouter, partition_for_key
from protocol.errors import ClientClosedError, ConsumerClosedError, LocalProtocolError
from protocol.ids import MessageId

if TYPE_CHECKING:
    from protocol.client.host import HandlerHost

__all__ = ["MultiConsumer", "PartitionedProducer", "partition_name"]

MAX_TOTAL_RECEIVER_QUEUE = 50_000
"""The C++ client's cap on the summed receiver queues of a partitioned consumer (spec §7.1)."""

H = TypeVar("H", Producer, Consumer)


def partition_name(topic: str, index: int) -> str:
    """The topic name of partition `index`."""
    return f"{topic}-partition-{index}"


async def _start_all(children: Sequence[H]) -> None:
    try:
        for child in children:
            await child._start()
    except BaseException:
        with anyio.CancelScope(shield=True):
            for child in children:
                await child.aclose()
        raise


class PartitionedProducer:
    """A producer on a partitioned topic: one `Producer` per partition.

    Messages with a key go to `(murmur3_32(key) & 0x7fffffff) % partitions`, the others round
    robin (spec §14.4).
    """

    def __init__(
        self, client: HandlerHost, topic: str, partitions: int, config: ProducerConfig
    ) -> None:
        self.topic = topic
        self._client = client
        self.producers = [
            Producer(client, partition_name(topic, i), config, partition=i)
            for i in range(partitions)
        ]
        self._router = RoundRobinRouter(partitions)

    def __repr__(self) -> str:
        return f"<PartitionedProducer {self.topic} partitions={len(self.producers)}>"

    async def __aenter__(self) -> PartitionedProducer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _start(self) -> None:
        await _start_all(self.producers)

    def _route(self, key: str | None) -> Producer:
        if key is None:
            return self.producers[self._router.next()]
        return self.producers[partition_for_key(key, len(self.producers))]

    @property
    def producer_name(self) -> str:
        """The name the broker gave the first partition's producer (every partition's share it)."""
        return self.producers[0].producer_name

    def is_connected(self) -> bool:
        """True while every partition's producer is attached to a broker."""
        return all(p.is_connected() for p in self.producers)

    async def send(
        self,
        payload: bytes,
        *,
        key: str | None = None,
        properties: Mapping[str, str] | None = None,
        event_time: int | None = None,
        deliver_at: int | None = None,
        sequence_id: int | None = None,
    ) -> MessageId:
        """Route and send one message; see `Producer.send`."""
        return await self._route(key).send(
            payload,
            key=key,
            properties=properties,
            event_time=event_time,
            deliver_at=deliver_at,
            sequence_id=sequence_id,
        )

    async def send_async(
        self,
        payload: bytes,
        *,
        key: str | None = None,
        properties: Mapping[str, str] | None = None,
        event_time: int | None = None,
        deliver_at: int | None = None,
        sequence_id: int | None = None,
        callback: SendCallback | None = None,
    ) -> Future[MessageId]:
        """Route and queue one message; see `Producer.send_async`."""
        return await self._route(key).send_async(
            payload,
            key=key,
            properties=properties,
            event_time=event_time,
            deliver_at=deliver_at,
            sequence_id=sequence_id,
            callback=callback,
        )

    async def flush(self) -> None:
        """Flush every partition's producer."""
        for producer in self.producers:
            await producer.flush()

    async def aclose(self) -> None:
        """Close every partition's producer."""
        for producer in self.producers:
            await producer.aclose()


class MultiConsumer:
    """A consumer on a partitioned topic: one `Consumer` per partition, one receiver queue."""

    def __init__(
        self,
        client: HandlerHost,
        topic: str,
        subscription: str,
        partitions: int,
        config: ConsumerConfig,
        *,
        consumer_name: str,
    ) -> None:
        if config.receiver_queue_size <= 0:
            raise LocalProtocolError("receiver_queue_size=0 is not allowed on partitioned topics")
        self.topic = topic
        self.subscription = subscription
        self.consumer_name = consumer_name
        self._clock = client.clock
        self._queue = ReceiveQueue()
        per_partition = min(
            config.receiver_queue_size, max(MAX_TOTAL_RECEIVER_QUEUE // partitions, 1)
        )
        child_config = dataclasses.replace(config, receiver_queue_size=per_partition)
        self.consumers = [
            Consumer(
                client,
                partition_name(topic, i),
                subscription,
                child_config,
                partition=i,
                queue=self._queue,
                consumer_name=consumer_name,
            )
            for i in range(partitions)
        ]
        self._closed = False

    def __repr__(self) -> str:
        return f"<MultiConsumer {self.topic} partitions={len(self.consumers)}>"

    async def __aenter__(self) -> MultiConsumer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __aiter__(self) -> MultiConsumer:
        return self

    async def __anext__(self) -> Message:
        try:
            return await self.receive()
        except ClientClosedError:
            raise StopAsyncIteration from None

    async def _start(self) -> None:
        await _start_all(self.consumers)

    def _check_usable(self) -> None:
        if self._closed:
            raise ConsumerClosedError(f"consumer on {self.topic} is closed")

    def _child(self, message: Message | MessageId) -> Consumer:
        if isinstance(message, Message):
            owner: Consumer | None = message._consumer
            if owner is None:
                raise ConsumerClosedError(f"the partition consumer of {message} is gone")
            return owner
        if not 0 <= message.partition < len(self.consumers):
            raise LocalProtocolError(f"{message} names no partition of {self.topic}")
        return self.consumers[message.partition]

    def is_connected(self) -> bool:
        """True while every partition's consumer is attached to a broker."""
        return all(child.is_connected() for child in self.consumers)

    async def receive(self) -> Message:
        """Wait for the next message from any partition; see `Consumer.receive`."""
        self._check_usable()
        message = await self._queue.get()
        message._consumer._on_dequeued(message)
        return message

    def receive_nowait(self) -> Message | None:
        """The next prefetched message, or None."""
        self._check_usable()
        message = self._queue.get_nowait()
        if message is not None:
            message._consumer._on_dequeued(message)
        return message

    def acknowledge(self, message: Message | MessageId) -> None:
        """Acknowledge on the partition the message came from."""
        self._check_usable()
        self._child(message).acknowledge(message)

    def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        """Cumulative ack within the message's partition."""
        self._check_usable()
        self._child(message).acknowledge_cumulative(message)

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Negative ack on the message's partition."""
        self._check_usable()
        self._child(message).negative_acknowledge(message)

    def redeliver_unacknowledged(self) -> None:
        """Redeliver every partition's unacknowledged messages."""
        self._check_usable()
        for child in self.consumers:
            child.redeliver_unacknowledged()

    def flush_acks(self) -> None:
        """Send every partition's pending acks now."""
        for child in self.consumers:
            child.flush_acks()

    async def seek(self, target: MessageId | int) -> None:
        """Seek every partition to a publish time or a sentinel, or one partition to an id."""
        self._check_usable()
        if isinstance(target, MessageId) and target.partition >= 0:
            await self._child(target).seek(target)
            return
        for child in self.consumers:
            await child.seek(target)

    async def get_last_message_ids(self) -> list[MessageId]:
        """The last message id of every partition, in partition order."""
        return [await child.get_last_message_id() for child in self.consumers]

    async def has_message_available(self) -> bool:
        """True if any partition has a message after the last one handed out."""
        for child in self.consumers:
            if await child.has_message_available():
                return True
        return False

    async def unsubscribe(self) -> None:
        """Unsubscribe every partition, then close."""
        for child in self.consumers:
            await child.unsubscribe()
        await self.aclose()

    async def aclose(self) -> None:
        """Close every partition's consumer; waiting `receive` calls fail."""
        if self._closed:
            return
        self._closed = True
        for child in self.consumers:
            await child.aclose()
        self._queue.close(ConsumerClosedError(f"consumer on {self.topic} is closed"))
