"""PIP-344: PARTITIONED_METADATA without auto-creation, and CONNECTED announcing it.

The Java client (3.3+) asks for partition counts with ``metadata_auto_creation_enabled=false``
when it checks for new partitions (``autoUpdatePartitions``) and in pattern consumers, and fails
with ``FeatureNotSupportedException`` unless CONNECTED announced
``supports_get_partitioned_metadata_without_auto_creation`` (found by peers/java).
"""

from __future__ import annotations

import pytest

from emubroker.app import Broker
from protocol import commands as c
from protocol.errors import ServerError
from tests.emubroker.test_handlers import Connections
from tests.emubroker.test_handlers import broker as broker  # the in-memory broker fixture
from tests.emubroker.test_handlers import conns as conns

pytestmark = pytest.mark.anyio


async def test_connected_announces_metadata_without_auto_creation(broker: Broker) -> None:
    connections = Connections(broker)
    try:
        client = await connections.open(handshake=False)
        connected = await client.handshake()
        assert connected.feature_flags is not None
        assert connected.feature_flags.supports_get_partitioned_metadata_without_auto_creation
    finally:
        await connections.aclose()


async def test_metadata_without_auto_creation_creates_nothing(conns: Connections) -> None:
    client = await conns.open()
    topic = "persistent://public/default/never-created"
    await client.send(
        c.PartitionedTopicMetadata(topic=topic, request_id=1, metadata_auto_creation_enabled=False)
    )
    reply = await client.receive_command()
    assert isinstance(reply, c.PartitionedTopicMetadataResponse)
    assert reply.response is c.MetadataResult.FAILED
    assert reply.error is ServerError.TopicNotFound
    # The default (auto-creation on) still answers 0 partitions for a topic to be created.
    await client.send(c.PartitionedTopicMetadata(topic=topic, request_id=2))
    reply = await client.receive_command()
    assert isinstance(reply, c.PartitionedTopicMetadataResponse)
    assert reply.partitions == 0
    assert reply.response is c.MetadataResult.SUCCESS
