"""Odd topic names with the official client: valid ones work end to end, invalid ones are
InvalidTopicName for producers, consumers and readers alike (docs/broker-behaviour.md)."""

from __future__ import annotations

import uuid
from urllib.parse import urlparse

import anyio
import pulsar
import pytest
from pulsar.schema import StringSchema

from protocol import commands as c
from protocol.errors import ServerError
from tests.support.broker import WireClient

pytestmark = pytest.mark.integration

RECEIVE_MS = 5000


@pytest.mark.parametrize("local", ["a\x00b", "h\u00e9 llo 100%"])
def test_a_valid_odd_name_works_with_schemas(client: pulsar.Client, local: str) -> None:
    topic = f"persistent://public/default/{local}-{uuid.uuid4().hex[:8]}"
    consumer = client.subscribe(topic, "s", schema=StringSchema())
    producer = client.create_producer(topic, schema=StringSchema())
    producer.send("hello")
    assert consumer.receive(RECEIVE_MS).value() == "hello"
    reader = client.create_reader(topic, pulsar.MessageId.earliest, schema=StringSchema())
    assert reader.read_next(RECEIVE_MS).value() == "hello"


@pytest.mark.parametrize(
    "topic", ["persistent://public/default/..", "persistent://public/default/\t"]
)
def test_an_invalid_name_is_invalid_topic_name_on_every_command(
    service_url: str, topic: str
) -> None:
    # The C++ client retries InvalidTopicName from a lookup until its operation timeout (it is
    # not among its fatal results, against Pulsar too), so the answers are read off the wire.
    parsed = urlparse(service_url)
    assert parsed.hostname is not None
    assert parsed.port is not None

    async def ask_everything() -> list[c.Command]:
        async with await anyio.connect_tcp(parsed.hostname, parsed.port) as stream:
            client = WireClient(stream)
            await client.handshake()
            commands: list[c.Command] = [
                c.LookupTopic(topic=topic, request_id=1),
                c.PartitionedTopicMetadata(topic=topic, request_id=2),
                c.Producer(topic=topic, producer_id=1, request_id=3),
                c.Subscribe(
                    topic=topic,
                    subscription="s",
                    sub_type=c.SubType.SHARED,
                    consumer_id=1,
                    request_id=4,
                ),
                c.GetSchema(topic=topic, request_id=5),
            ]
            replies = []
            for command in commands:
                await client.send(command)
                replies.append(await client.receive_command())
            return replies

    lookup, metadata, producer, subscribe, schema = anyio.run(ask_everything)
    assert isinstance(lookup, c.LookupTopicResponse)
    assert isinstance(metadata, c.PartitionedTopicMetadataResponse)
    assert isinstance(producer, c.Error)
    assert isinstance(subscribe, c.Error)
    assert isinstance(schema, c.GetSchemaResponse)
    assert {lookup.error, metadata.error, producer.error, subscribe.error, schema.error_code} == {
        ServerError.InvalidTopicName
    }
