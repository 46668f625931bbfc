"""``maxConcurrentLookupRequest``: lookups in flight over the broker, refused past the limit."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from emubroker.app import Broker
from emubroker.config import load_config
from emubroker.handlers.lookups import TOO_MANY_LOOKUPS, LookupLimit
from emubroker.naming import TopicName
from protocol import commands as c
from protocol.errors import ServerError
from tests.emubroker.admin.conftest import Wire
from tests.emubroker.sessions import session_over

pytestmark = pytest.mark.anyio

TOPIC = "persistent://public/default/t"


class SlowMetadata:
    """The real topic service, whose PARTITIONED_METADATA waits for the test's gate."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.gate = anyio.Event()

    async def partitioned_metadata(self, name: TopicName, *, auto_create: bool = True) -> int:
        await self.gate.wait()
        result: int = await self._inner.partitioned_metadata(name, auto_create=auto_create)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.fixture
def broker(memory_broker: Broker) -> Broker:
    return memory_broker


def test_the_limit_counts_lookups_in_flight() -> None:
    limit = LookupLimit(2)
    assert limit.try_acquire()
    assert limit.try_acquire()
    assert not limit.try_acquire()
    limit.release()
    assert limit.try_acquire()
    assert all(LookupLimit(0).try_acquire() for _ in range(100_000))  # 0: no limit


async def test_lookups_past_the_limit_are_answered_too_many_requests(broker: Broker) -> None:
    topics = SlowMetadata(broker.topics)
    lookups = LookupLimit(2)
    session, client, client_end = session_over(broker, topics, lookups=lookups)
    async with anyio.create_task_group() as tg:
        tg.start_soon(session.run)
        await client.handshake()
        for request_id in (1, 2, 3):
            await client.send(c.PartitionedTopicMetadata(topic=TOPIC, request_id=request_id))
        await client.send(c.LookupTopic(topic=TOPIC, request_id=4))
        refused = [await client.receive_command() for _ in range(2)]
        assert refused == [
            c.PartitionedTopicMetadataResponse(
                request_id=3,
                response=c.MetadataResult.FAILED,
                error=ServerError.TooManyRequests,
                message=TOO_MANY_LOOKUPS,
            ),
            c.LookupTopicResponse(
                request_id=4,
                response=c.LookupType.FAILED,
                error=ServerError.TooManyRequests,
                message=TOO_MANY_LOOKUPS,
            ),
        ]
        topics.gate.set()
        answered = [await client.receive_command() for _ in range(2)]
        assert sorted(r.request_id for r in answered) == [1, 2]  # type: ignore[union-attr]
        assert lookups.in_flight == 0
        await client.send(c.LookupTopic(topic=TOPIC, request_id=5))
        reply = await client.receive_command()
        assert isinstance(reply, c.LookupTopicResponse)
        assert reply.response is c.LookupType.CONNECT
        await client_end.aclose()


def test_the_limit_follows_the_configuration() -> None:
    assert load_config(environ={}).maxConcurrentLookupRequest == 50_000  # Pulsar's default
    config = load_config(overrides={"maxConcurrentLookupRequest": 7}, environ={})
    assert config.maxConcurrentLookupRequest == 7


async def test_a_namespace_this_broker_has_not_heard_of_yet_is_read_from_the_store(
    broker: Broker,
) -> None:
    # Created through another broker a moment ago: in the store, not yet in this broker's view.
    namespace = TopicName.parse(TOPIC).namespace
    broker.namespaces.apply(namespace, None)
    assert not broker.namespaces.exists(namespace)
    wire = Wire(broker)
    client = await wire.client()
    await client.send(c.PartitionedTopicMetadata(topic=TOPIC, request_id=1))
    metadata = await client.receive_command()
    assert isinstance(metadata, c.PartitionedTopicMetadataResponse)
    assert metadata.response is not c.MetadataResult.FAILED, metadata
    broker.namespaces.apply(namespace, None)
    await client.send(c.LookupTopic(topic=TOPIC, request_id=2))
    lookup = await client.receive_command()
    assert isinstance(lookup, c.LookupTopicResponse)
    assert lookup.response is c.LookupType.CONNECT, lookup
    assert broker.namespaces.exists(namespace)  # kept: the next topic call needs no read
    await client.send(c.LookupTopic(topic="persistent://public/nowhere/t", request_id=3))
    missing = await client.receive_command()
    assert isinstance(missing, c.LookupTopicResponse)
    assert missing.error is ServerError.TopicNotFound, missing
    await wire.aclose()


async def test_a_lookup_of_a_bundle_this_broker_serves_is_answered_without_a_task(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Most lookups of a large cluster's start-up are of bundles owned already: the owner known
    # without the store, the answer needs no task of its own.
    from emubroker.handlers.discovery import DiscoveryCommands

    in_tasks: list[int] = []
    on_lookup = DiscoveryCommands.on_lookup

    async def counting(self: DiscoveryCommands, cmd: c.LookupTopic) -> None:
        in_tasks.append(cmd.request_id)
        await on_lookup(self, cmd)

    monkeypatch.setattr(DiscoveryCommands, "on_lookup", counting)
    wire = Wire(broker)
    client = await wire.client()
    for request_id in (1, 2):
        await client.send(c.LookupTopic(topic=TOPIC, request_id=request_id))
        answer = await client.receive_command()
        assert isinstance(answer, c.LookupTopicResponse)
        assert (answer.request_id, answer.response) == (request_id, c.LookupType.CONNECT)
        assert answer.broker_service_url == broker.service_url
        assert answer.authoritative
    assert in_tasks == [1]  # the first took the bundle; the second knew its owner
    await wire.aclose()


async def test_partition_counts_known_to_the_broker_are_answered_without_a_task(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every partition's producer and consumer asks for its metadata first (thousands at scale).
    from emubroker.handlers.discovery import DiscoveryCommands

    in_tasks: list[int] = []
    on_metadata = DiscoveryCommands.on_partitioned_metadata

    async def counting(self: DiscoveryCommands, cmd: c.PartitionedTopicMetadata) -> None:
        in_tasks.append(cmd.request_id)
        await on_metadata(self, cmd)

    monkeypatch.setattr(DiscoveryCommands, "on_partitioned_metadata", counting)
    await broker.topics.create_partitioned_topic(
        TopicName.parse("persistent://public/default/p"), 3
    )
    wire = Wire(broker)
    client = await wire.client()
    asked = {
        1: ("persistent://public/default/p", 3),
        2: ("persistent://public/default/p-partition-1", 0),
        3: ("persistent://public/default/plain", 0),  # may be auto-created: a task decides
    }
    for request_id, (topic, partitions) in asked.items():
        await client.send(c.PartitionedTopicMetadata(topic=topic, request_id=request_id))
        answer = await client.receive_command()
        assert answer == c.PartitionedTopicMetadataResponse(
            request_id=request_id, partitions=partitions, response=c.MetadataResult.SUCCESS
        )
    assert in_tasks == [3]
    await wire.aclose()
