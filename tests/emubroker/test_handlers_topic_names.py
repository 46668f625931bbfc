"""Odd topic names get the same answer from every command (docs/broker-behaviour.md, "Topic names").

A name Pulsar's ``TopicName`` accepts works everywhere, schemas and stored metadata included;
any other name is ``InvalidTopicName`` in each command's own failure form, never UnknownError.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from emubroker.app import Broker
from protocol import commands as c
from protocol.errors import ServerError
from tests.emubroker.test_handlers import Connections
from tests.emubroker.test_handlers import broker as broker  # the in-memory broker fixture
from tests.support.broker import WireClient

pytestmark = pytest.mark.anyio

VALID = [
    "persistent://public/default/a\x00b",  # NUL: any character but '/' makes a local name
    "persistent://public/default/100%",
    "persistent://public/default/h\u00e9 llo",
    "non-persistent://public/default/a:b=c",
    "PERSISTENT://public/default/upper-domain",  # the domain is read in any case
    "/short",  # a short name's empty segments are dropped
]
INVALID = [
    "persistent://public/default/..",  # Pulsar parses it but cannot store it
    "persistent://public/default/.",
    "persistent://public/default/ \t",  # blank
    "persistent://pub lic/default/t",  # tenants and namespaces: letters, digits, -=:._
    "persistent://public/default",
    "a/b",
    "bogus://public/default/t",
]
STRING_SCHEMA = c.Schema(name="s", schema_data=b"", type=c.SchemaType.STRING)


@pytest.fixture
async def client(broker: Broker) -> AsyncIterator[WireClient]:
    connections = Connections(broker)
    try:
        yield await connections.open()
    finally:
        await connections.aclose()


async def ask(client: WireClient, command: c.Command) -> c.Command:
    await client.send(command)
    return await client.receive_command()


@pytest.mark.parametrize("topic", VALID)
async def test_a_valid_odd_name_works_on_every_command(
    broker: Broker, client: WireClient, topic: str
) -> None:
    lookup = await ask(client, c.LookupTopic(topic=topic, request_id=1))
    assert isinstance(lookup, c.LookupTopicResponse)
    assert lookup.response is c.LookupType.CONNECT, lookup
    assert await ask(client, c.PartitionedTopicMetadata(topic=topic, request_id=2)) == (
        c.PartitionedTopicMetadataResponse(
            request_id=2, partitions=0, response=c.MetadataResult.SUCCESS
        )
    )
    # Schemas and cursors are stored under the topic's name in the metadata store.
    produced = await ask(
        client, c.Producer(topic=topic, producer_id=1, request_id=3, schema=STRING_SCHEMA)
    )
    assert isinstance(produced, c.ProducerSuccess), produced
    subscribe = c.Subscribe(
        topic=topic,
        subscription="s\x00",
        sub_type=c.SubType.SHARED,
        consumer_id=1,
        request_id=4,
        schema=STRING_SCHEMA,
    )
    assert await ask(client, subscribe) == c.Success(request_id=4)
    schema = await ask(client, c.GetSchema(request_id=5, topic=topic))
    assert isinstance(schema, c.GetSchemaResponse)
    assert schema.error_code is None, schema
    await client.send_message(1, 0, b"payload")
    receipt = await client.receive_command()
    assert isinstance(receipt, c.SendReceipt), receipt


@pytest.mark.parametrize("topic", INVALID)
async def test_an_invalid_name_is_invalid_topic_name_on_every_command(
    client: WireClient, topic: str
) -> None:
    lookup = await ask(client, c.LookupTopic(topic=topic, request_id=1))
    assert isinstance(lookup, c.LookupTopicResponse)
    assert (lookup.response, lookup.error) == (c.LookupType.FAILED, ServerError.InvalidTopicName)
    metadata = await ask(client, c.PartitionedTopicMetadata(topic=topic, request_id=2))
    assert isinstance(metadata, c.PartitionedTopicMetadataResponse)
    assert (metadata.response, metadata.error) == (
        c.MetadataResult.FAILED,
        ServerError.InvalidTopicName,
    )
    for request_id, command in enumerate(
        [
            c.Producer(topic=topic, producer_id=1, request_id=3),
            c.Producer(topic=topic, producer_id=2, request_id=4, schema=STRING_SCHEMA),
            c.Subscribe(
                topic=topic,
                subscription="s",
                sub_type=c.SubType.SHARED,
                consumer_id=1,
                request_id=5,
            ),
            c.Subscribe(
                topic=topic,
                subscription="s",
                sub_type=c.SubType.SHARED,
                consumer_id=2,
                request_id=6,
                schema=STRING_SCHEMA,
            ),
        ],
        start=3,
    ):
        reply = await ask(client, command)
        assert isinstance(reply, c.Error), reply
        assert (reply.request_id, reply.error) == (request_id, ServerError.InvalidTopicName)
    schema = await ask(client, c.GetSchema(request_id=7, topic=topic))
    assert isinstance(schema, c.GetSchemaResponse)
    assert schema.error_code is ServerError.InvalidTopicName
