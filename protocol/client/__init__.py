"""An async (anyio) Pulsar client: the only I/O in `protocol`.

    from protocol.client import open_client

    async with open_client("pulsar://127.0.0.1:6650") as client:
        producer = await client.create_producer("my-topic", batching_enabled=True)
        message_id = await producer.send(b"hello")
        consumer = await client.subscribe(
            "my-topic", "my-sub", initial_position=InitialPosition.EARLIEST
        )
        message = await consumer.receive()
        consumer.acknowledge(message)

The protocol decisions live in the sans-IO `protocol.connection.Connection`; this package pumps
bytes between it and a `Transport`, and keeps the per-producer / per-consumer state.
"""

from __future__ import annotations

from protocol.client._util import Future
from protocol.client.client import Client, Connector, normalize_topic, open_client
from protocol.client.config import ConsumerConfig, ProducerConfig
from protocol.client.connection import ClientConnection
from protocol.client.consumer import Consumer
from protocol.client.partitioned import MultiConsumer, PartitionedProducer
from protocol.client.producer import Producer
from protocol.client.reader import Reader
from protocol.client.received import Message
from protocol.client.routing import murmur3_32, partition_for_key
from protocol.client.transport import (
    StreamTransport,
    Transport,
    connect_tcp,
    memory_transport_pair,
)
from protocol.commands import AccessMode, InitialPosition, SubType, TopicsMode
from protocol.ids import EARLIEST, LATEST, MessageId

__all__ = [
    "EARLIEST",
    "LATEST",
    "AccessMode",
    "Client",
    "ClientConnection",
    "Connector",
    "Consumer",
    "ConsumerConfig",
    "Future",
    "InitialPosition",
    "Message",
    "MessageId",
    "MultiConsumer",
    "PartitionedProducer",
    "Producer",
    "ProducerConfig",
    "Reader",
    "StreamTransport",
    "SubType",
    "TopicsMode",
    "Transport",
    "connect_tcp",
    "memory_transport_pair",
    "murmur3_32",
    "normalize_topic",
    "open_client",
    "partition_for_key",
]
