"""Client: discovery (PARTITIONED_METADATA, LOOKUP with redirects), pooling, errors, timeouts."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from protocol import commands as c
from protocol.client import Client, Producer, Transport, normalize_topic, open_client
from protocol.client.pool import service_urls
from protocol.clock import FakeClock
from protocol.errors import (
    ClientClosedError,
    ConnectionBrokenError,
    InvalidTopicNameError,
    OperationTimeoutError,
    RemoteProtocolError,
    ServerError,
    ServiceNotReadyError,
    TopicNotFoundError,
)
from tests.protocol.client.conftest import close_on_fake_time
from tests.support.fake_broker import FakeBroker, Session

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("t", "persistent://public/default/t"),
        ("acme/ns/t", "persistent://acme/ns/t"),
        ("non-persistent://acme/ns/t", "non-persistent://acme/ns/t"),
    ],
)
def test_normalize_topic_expands_short_names(name: str, expected: str) -> None:
    assert normalize_topic(name) == expected


@pytest.mark.parametrize("name", ["", "a/b", "a/b/c/d", "a//c"])
def test_normalize_topic_rejects_malformed_names(name: str) -> None:
    with pytest.raises(InvalidTopicNameError):
        normalize_topic(name)


async def test_discovery_asks_partitions_then_looks_up_on_one_connection(
    client: Client, broker: FakeBroker
) -> None:
    await client.create_producer("t")
    metadata = broker.of_type(c.PartitionedTopicMetadata)
    lookups = broker.of_type(c.LookupTopic)
    assert [m.topic for m in metadata] == ["persistent://public/default/t"]
    assert [lk.topic for lk in lookups] == ["persistent://public/default/t"]
    assert lookups[0].authoritative is False
    assert lookups[0].advertised_listener_name == ""
    # The lookup answered with the service URL itself, so the pool reused the connection.
    assert broker.connects == ["pulsar://fake:6650"]
    order = [type(cmd) for _, cmd in broker.received]
    assert order.index(c.PartitionedTopicMetadata) < order.index(c.LookupTopic)
    assert order.index(c.LookupTopic) < order.index(c.Producer)


async def test_lookup_follows_redirects_passing_authoritative_back(
    client: Client, broker: FakeBroker
) -> None:
    def lookup(session: Session, cmd: c.LookupTopic, payload: object) -> bool:
        if session.url == "pulsar://fake:6650":
            response, url, authoritative = c.LookupType.REDIRECT, "pulsar://b2:6651", True
        else:
            response, url, authoritative = c.LookupType.CONNECT, "pulsar://b3:6652", True
        session.send(
            c.LookupTopicResponse(
                request_id=cmd.request_id,
                broker_service_url=url,
                response=response,
                authoritative=authoritative,
            )
        )
        return True

    broker.on(c.LookupTopic, lookup)
    assert await client.lookup("persistent://public/default/t") == "pulsar://b3:6652"
    lookups = broker.of_type(c.LookupTopic)
    assert [lk.authoritative for lk in lookups] == [False, True]
    assert broker.connects == ["pulsar://fake:6650", "pulsar://b2:6651"]
    producer = await client.create_producer("t")
    assert broker.connects[-1] == "pulsar://b3:6652"  # attached where the lookup pointed
    assert broker.sessions[-1].producers == {producer.producer_id: producer.topic}  # type: ignore[union-attr]


async def test_lookup_gives_up_after_20_redirects(client: Client, broker: FakeBroker) -> None:
    def redirect(session: Session, cmd: c.LookupTopic, payload: object) -> bool:
        session.send(
            c.LookupTopicResponse(
                request_id=cmd.request_id,
                broker_service_url=broker.url,
                response=c.LookupType.REDIRECT,
            )
        )
        return True

    broker.on(c.LookupTopic, redirect)
    with pytest.raises(RemoteProtocolError, match="redirects"):
        await client.lookup("persistent://public/default/t")
    assert len(broker.of_type(c.LookupTopic)) == 21


def _failing_lookups(broker: FakeBroker, error: ServerError, message: str, times: int) -> None:
    """The first `times` LOOKUPs answer `error`; later ones are the fake broker's own."""
    failed: list[int] = []

    def fail(session: Session, cmd: c.LookupTopic, payload: object) -> bool:
        if len(failed) >= times:
            return False
        failed.append(cmd.request_id)
        session.send(
            c.LookupTopicResponse(
                request_id=cmd.request_id,
                response=c.LookupType.FAILED,
                error=error,
                message=message,
            )
        )
        return True

    broker.on(c.LookupTopic, fail)


async def test_lookup_failure_maps_the_error_code(client: Client, broker: FakeBroker) -> None:
    _failing_lookups(broker, ServerError.TopicNotFound, "no such topic", times=100)
    with pytest.raises(TopicNotFoundError, match="no such topic"):
        await client.lookup("persistent://public/default/t")
    assert len(broker.of_type(c.LookupTopic)) == 1  # not worth another try


async def test_a_retriable_lookup_failure_is_tried_again_until_the_deadline(
    client: Client, broker: FakeBroker, fake_clock: FakeClock
) -> None:
    # A bundle being unloaded answers ServiceNotReady for a moment: the lookup asks again with
    # backoff (0.1 s, 0.2 s, ...) and answers once the bundle has an owner again.
    _failing_lookups(broker, ServerError.ServiceNotReady, "is being unloaded", times=2)
    result: list[str] = []

    async def look() -> None:
        result.append(await client.lookup("persistent://public/default/t"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(look)
        await fake_clock.advance(1.0)
    assert result == [broker.url]
    assert len(broker.of_type(c.LookupTopic)) == 3

    # Still failing at the deadline: the operation timed out, the broker's error its cause.
    _failing_lookups(broker, ServerError.ServiceNotReady, "is being unloaded", times=100)
    failures: list[BaseException] = []

    async def fail() -> None:
        try:
            await client.lookup("persistent://public/default/t", deadline=fake_clock.now() + 2)
        except OperationTimeoutError as exc:
            failures.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(fail)
        await fake_clock.advance(2.0)
    assert len(failures) == 1
    assert isinstance(failures[0].__cause__, ServiceNotReadyError)


async def test_unknown_namespace_is_topic_not_found(client: Client) -> None:
    with pytest.raises(TopicNotFoundError):
        await client.create_producer("acme/nope/t")
    with pytest.raises(TopicNotFoundError):
        await client.subscribe("acme/nope/t", "s")


async def test_get_partitions_lists_partition_topics(client: Client, broker: FakeBroker) -> None:
    broker.partitions["persistent://public/default/p"] = 3
    assert await client.get_partitions("p") == [
        f"persistent://public/default/p-partition-{i}" for i in range(3)
    ]
    assert await client.get_partitions("q") == ["persistent://public/default/q"]


async def test_get_topics_of_namespace(client: Client, broker: FakeBroker) -> None:
    await client.create_producer("a")
    await client.create_producer("b")
    topics = await client.get_topics_of_namespace("public/default")
    assert sorted(topics) == ["persistent://public/default/a", "persistent://public/default/b"]
    request = broker.of_type(c.GetTopicsOfNamespace)[0]
    assert request.mode is c.TopicsMode.PERSISTENT


async def test_request_times_out_on_the_fake_clock(
    client: Client, broker: FakeBroker, fake_clock: FakeClock
) -> None:
    broker.on(c.LookupTopic, lambda session, cmd, payload: True)  # never answered
    result: list[BaseException] = []

    async def lookup() -> None:
        try:
            await client.lookup("persistent://public/default/t")
        except Exception as exc:
            result.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(lookup)
        await fake_clock.advance(4.9)  # the client fixture's operation timeout is 5 s
        assert result == []
        await fake_clock.advance(0.2)
    assert len(result) == 1
    assert isinstance(result[0], OperationTimeoutError)


async def test_retriable_creation_errors_are_retried_with_backoff(
    client: Client, broker: FakeBroker, fake_clock: FakeClock
) -> None:
    broker.fail_next(c.Producer, ServerError.ServiceNotReady, times=2)
    async with anyio.create_task_group() as tg:
        tg.start_soon(client.create_producer, "t")
        await anyio.wait_all_tasks_blocked()
        assert len(broker.of_type(c.Producer)) == 1
        await fake_clock.advance(0.1)
        assert len(broker.of_type(c.Producer)) == 2
        await fake_clock.advance(0.19)
        assert len(broker.of_type(c.Producer)) == 2  # the second delay doubles to 0.2 s
        await fake_clock.advance(0.01)
    producers = broker.of_type(c.Producer)
    assert len(producers) == 3
    assert [p.epoch for p in producers] == [0, 1, 2]


async def test_retriable_errors_time_out_after_the_operation_timeout(
    client: Client, broker: FakeBroker, fake_clock: FakeClock
) -> None:
    broker.fail_next(c.Subscribe, ServerError.ServiceNotReady, times=1000)
    result: list[BaseException] = []

    async def subscribe() -> None:
        try:
            await client.subscribe("t", "s")
        except Exception as exc:
            result.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(subscribe)
        await fake_clock.advance(6.0)
    assert isinstance(result[0], OperationTimeoutError)


async def test_closed_client_refuses_new_handlers(
    broker: FakeBroker, fake_clock: FakeClock
) -> None:
    async with open_client(broker.url, connector=broker.connect, clock=fake_clock) as client:
        producer = await client.create_producer("t")
    assert isinstance(producer, Producer)
    assert broker.of_type(c.CloseProducer)[0].producer_id == producer.producer_id
    with pytest.raises(ClientClosedError):
        await client.create_producer("t")


async def test_unreachable_broker_is_retried_until_timeout(fake_clock: FakeClock) -> None:
    attempts: list[str] = []

    async def refuse(host: str, port: int) -> Transport:
        attempts.append(host)
        raise ConnectionBrokenError("refused")

    async with open_client(
        "pulsar://nowhere:6650", connector=refuse, clock=fake_clock, operation_timeout=1.0
    ) as client:
        result: list[BaseException] = []

        async def create() -> None:
            try:
                await client.create_producer("persistent://public/default/t")
            except Exception as exc:
                result.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(create)
            await fake_clock.advance(2.0)
        assert isinstance(result[0], OperationTimeoutError)
        assert isinstance(result[0].__cause__, ConnectionBrokenError)
        assert len(attempts) > 3  # retried with backoff: 0.1, 0.2, 0.4 ...


def test_a_service_url_may_name_several_brokers() -> None:
    assert service_urls("pulsar://a:6650,b:6651,c/") == [
        "pulsar://a:6650",
        "pulsar://b:6651",
        "pulsar://c",
    ]
    assert service_urls("pulsar://a:6650") == ["pulsar://a:6650"]
    for bad in ("http://a:8080", "pulsar://a:6650,,b:1", "a:6650"):
        with pytest.raises(ValueError, match="pulsar://"):
            service_urls(bad)


def _down_or(broker: FakeBroker, attempts: list[str]) -> Callable[[str, int], Awaitable[Transport]]:
    """A connector that records each attempt, refuses host ``down`` and dials ``broker`` else."""

    async def connect(host: str, port: int) -> Transport:
        attempts.append(f"{host}:{port}")
        if host == "down":
            raise ConnectionBrokenError("refused")
        return await broker.connect(host, port)

    return connect


async def test_discovery_turns_to_the_next_listed_broker_when_one_is_down(
    broker: FakeBroker, fake_clock: FakeClock
) -> None:
    attempts: list[str] = []
    async with open_client(
        "pulsar://down:6650,fake:6650",
        connector=_down_or(broker, attempts),
        clock=fake_clock,
    ) as client:
        async with anyio.create_task_group() as tg:

            async def create() -> None:
                await client.create_producer("persistent://public/default/t")

            tg.start_soon(create)
            await fake_clock.advance(1.0)
        assert attempts[:2] == ["down:6650", "fake:6650"]
        assert broker.of_type(c.LookupTopic)  # the second broker answered
        await close_on_fake_time(client, fake_clock)


async def test_a_lookup_asks_the_next_listed_broker_when_one_is_down(
    broker: FakeBroker, fake_clock: FakeClock
) -> None:
    # A producer reattaching after its broker died looks the topic up again; a dead broker among
    # the service URL's hosts must cost that lookup a backoff step of 0.1 s, not a failed
    # attempt (whose reattach backoff doubles up to a minute), as the C++ client's retryable
    # lookup service does.
    attempts: list[str] = []
    async with open_client(
        "pulsar://down:6650,fake:6650",
        connector=_down_or(broker, attempts),
        clock=fake_clock,
    ) as client:
        result: list[str] = []

        async def look() -> None:
            result.append(await client.lookup("persistent://public/default/t"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(look)
            await fake_clock.advance(1.0)
        assert result == [broker.url]
        assert attempts == ["down:6650", "fake:6650"]
        await close_on_fake_time(client, fake_clock)
