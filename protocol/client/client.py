"""The client: connection pool, topic discovery and the producer/consumer/reader factories.

    async with open_client("pulsar://127.0.0.1:6650") as client:
        producer = await client.create_producer("my-topic")
        consumer = await client.subscribe("my-topic", "my-sub")

Discovery (spec §5): PARTITIONED_METADATA on the service-URL connection decides between one
handler and one per partition; each handler then LOOKUPs its topic (following up to 20
redirects, passing the broker's `authoritative` flag back) and attaches on the connection to
the broker that owns it. Connections are pooled by URL string, as the C++ client does.

All background work (connection pumps, reconnection loops, batch and ack timers) runs in the
task group owned by `open_client` (STYLE.md §1.14).
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Final, TypeVar

import anyio
import anyio.abc

from protocol import commands as c
from protocol.backoff import Backoff
from protocol.client._util import wait_until
from protocol.client.config import ConsumerConfig, ProducerConfig
from protocol.client.connection import CLIENT_VERSION, ClientConnection
from protocol.client.consumer import Consumer
from protocol.client.partitioned import MultiConsumer, PartitionedProducer, partition_name
from protocol.client.pool import ConnectionPool, Connector, service_urls
from protocol.client.producer import Producer
from protocol.client.reader import Reader
from protocol.client.transport import connect_tcp
from protocol.clock import AnyioClock, Clock
from protocol.errors import (
    BrokerError,
    ClientClosedError,
    ConnectionBrokenError,
    InvalidTopicNameError,
    LocalProtocolError,
    OperationTimeoutError,
    RemoteProtocolError,
    ServerError,
)
from protocol.ids import EARLIEST, LATEST, MessageId

__all__ = ["Client", "Connector", "normalize_topic", "open_client"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

MAX_LOOKUP_REDIRECTS: Final = 20
"""Redirects followed per lookup, as the C++ client (spec §5.2)."""


def normalize_topic(topic: str) -> str:
    """Expand short topic names: `t` -> `persistent://public/default/t`, `a/b/t` -> ....

    Raises:
        InvalidTopicNameError: the name has neither one nor three parts (the broker would say
            the same).
    """
    if "://" in topic:
        return topic
    parts = topic.split("/")
    if len(parts) == 1 and parts[0]:
        return f"persistent://public/default/{topic}"
    if len(parts) == 3 and all(parts):
        return f"persistent://{topic}"
    raise InvalidTopicNameError(f"invalid topic name {topic!r}")


class Client:
    """A Pulsar client; create it with `open_client`."""

    def __init__(
        self,
        service_url: str,
        task_group: anyio.abc.TaskGroup,
        *,
        clock: Clock,
        operation_timeout: float,
        connection_timeout: float,
        keep_alive_interval: float | None,
        connector: Connector,
        client_version: str,
        reconnect_initial_delay: float = 0.1,
        reconnect_max_delay: float = 60.0,
        authentication: c.AuthData | None = None,
    ) -> None:
        self.service_url = service_url.rstrip("/")
        # Discovery goes to the listed brokers in turn, as the C++ client's resolveHost does,
        # so a broker that is down costs one retry.
        self._service_hosts = itertools.cycle(service_urls(service_url))
        self.clock = clock
        self.operation_timeout = operation_timeout
        self.connection_timeout = connection_timeout
        self.reconnect_initial_delay = reconnect_initial_delay
        self.reconnect_max_delay = reconnect_max_delay
        self.backoff = Backoff(reconnect_initial_delay, reconnect_max_delay)
        self._tg = task_group
        self._pool = ConnectionPool(
            clock,
            connector,
            self.spawn,
            connection_timeout=connection_timeout,
            keep_alive_interval=keep_alive_interval,
            client_version=client_version,
            authentication=authentication,
        )
        self._producer_ids = itertools.count()
        self._consumer_ids = itertools.count()
        self._handlers: dict[int, Any] = {}  # id() -> open producer/consumer/reader
        self._closed = False

    def __repr__(self) -> str:
        return f"<Client {self.service_url}>"

    # ---- the handlers' host (protocol.client.host.HandlerHost) ---------------------------------

    def new_producer_id(self) -> int:
        """Return a producer id not used before on this client."""
        return next(self._producer_ids)

    def new_consumer_id(self) -> int:
        """Return a consumer id not used before on this client."""
        return next(self._consumer_ids)

    def spawn(self, fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run `fn` in the client's task group (it ends when the client closes)."""
        self._tg.start_soon(fn)

    def _remember(self, handler: Any) -> None:
        self._handlers[id(handler)] = handler

    def forget(self, handler: object) -> None:
        """Drop a closed handler from the set the client closes on exit."""
        self._handlers.pop(id(handler), None)

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("client is closed")

    # ---- connections ---------------------------------------------------------------------------

    async def get_connection(self, url: str) -> ClientConnection:
        """The pooled connection to `url` (see `ConnectionPool.get`)."""
        self._check_open()
        return await self._pool.get(url)

    async def _request(self, cnx: ClientConnection, command: c.Command, what: str) -> c.Command:
        deadline = self.clock.now() + self.operation_timeout
        return await wait_until(cnx.request(command), self.clock, deadline, what)

    # ---- discovery -----------------------------------------------------------------------------

    async def lookup(self, topic: str, *, deadline: float | None = None) -> str:
        """The URL of the broker that owns `topic` (LOOKUP with redirects, spec §5.2).

        A failure worth another try (a listed broker that cannot be reached, a retriable error
        such as ServiceNotReady while the bundle moves) is tried again with backoff, from the
        next listed broker, until `deadline`, as the C++ client's retryable lookup service does:
        a dead broker in a service URL naming several costs a lookup a tenth of a second, not
        a step of the caller's reconnection backoff.

        Raises:
            BrokerError: the lookup failed for good (e.g. `TopicNotFoundError`).
            RemoteProtocolError: too many redirects, or a reply without a broker URL.
            OperationTimeoutError: no answer in time (the last failure is its cause).
        """
        return await self._retrying(partial(self._lookup_once, topic), "LOOKUP", deadline)

    async def _lookup_once(self, topic: str, deadline: float) -> str:
        url = next(self._service_hosts)
        authoritative = False
        for _ in range(MAX_LOOKUP_REDIRECTS + 1):
            cnx = await self.get_connection(url)
            command = c.LookupTopic(
                topic=topic,
                request_id=cnx.new_request_id(),
                authoritative=authoritative,
                advertised_listener_name="",
            )
            reply = await wait_until(cnx.request(command), self.clock, deadline, "LOOKUP")
            assert isinstance(reply, c.LookupTopicResponse)
            if reply.response in (c.LookupType.CONNECT, c.LookupType.REDIRECT):
                if not reply.broker_service_url:
                    raise RemoteProtocolError(f"LOOKUP of {topic} answered without a broker URL")
                if reply.response is c.LookupType.CONNECT:
                    return reply.broker_service_url
                url = reply.broker_service_url
                authoritative = reply.authoritative
                continue
            raise _failure(reply.error, reply.message, f"lookup of {topic} failed")
        raise RemoteProtocolError(f"LOOKUP of {topic}: more than {MAX_LOOKUP_REDIRECTS} redirects")

    async def partition_count(self, topic: str) -> int:
        """PARTITIONED_METADATA: 0 for a non-partitioned topic (spec §5.1).

        Raises:
            BrokerError: the broker refused (e.g. `TopicNotFoundError` for an unknown namespace).
        """
        self._check_open()
        topic = normalize_topic(topic)

        async def ask(deadline: float) -> int:
            cnx = await self.get_connection(next(self._service_hosts))
            command = c.PartitionedTopicMetadata(topic=topic, request_id=cnx.new_request_id())
            reply = await wait_until(
                cnx.request(command), self.clock, deadline, "PARTITIONED_METADATA"
            )
            assert isinstance(reply, c.PartitionedTopicMetadataResponse)
            if reply.response is not c.MetadataResult.SUCCESS:
                # A reply without `response` is a failure too ("Empty response", spec §4.2).
                raise _failure(reply.error, reply.message, f"partition metadata of {topic} failed")
            return reply.partitions or 0

        return await self._retrying(ask, "PARTITIONED_METADATA")

    async def _retrying(
        self, attempt: Callable[[float], Awaitable[T]], what: str, deadline: float | None = None
    ) -> T:
        """Retry a discovery request on broken connections and retriable errors, with backoff.

        Gives up at `deadline` (default: the operation timeout from now), as the C++ client's
        retryable lookup service does.
        """
        if deadline is None:
            deadline = self.clock.now() + self.operation_timeout
        delays = self.backoff.delays()
        while True:
            try:
                return await attempt(deadline)
            except BrokerError as exc:
                if not exc.retriable:
                    raise
                last: Exception = exc
            except ConnectionBrokenError as exc:
                last = exc
            delay = next(delays)
            if self.clock.now() + delay >= deadline:
                raise OperationTimeoutError(f"{what} timed out") from last
            await self.clock.sleep(delay)

    async def get_partitions(self, topic: str) -> list[str]:
        """The partition topics of `topic`, or `[topic]` when it is not partitioned."""
        topic = normalize_topic(topic)
        count = await self.partition_count(topic)
        return [partition_name(topic, i) for i in range(count)] if count else [topic]

    async def get_topics_of_namespace(
        self, namespace: str, mode: c.TopicsMode = c.TopicsMode.PERSISTENT
    ) -> list[str]:
        """The topics of `tenant/namespace` (GET_TOPICS_OF_NAMESPACE, spec §5.3).

        Raises:
            BrokerError: the broker refused (unknown namespace).
        """
        self._check_open()
        cnx = await self.get_connection(next(self._service_hosts))
        command = c.GetTopicsOfNamespace(
            request_id=cnx.new_request_id(), namespace=namespace, mode=mode
        )
        reply = await self._request(cnx, command, "GET_TOPICS_OF_NAMESPACE")
        assert isinstance(reply, c.GetTopicsOfNamespaceResponse)
        return list(reply.topics)

    # ---- factories -----------------------------------------------------------------------------

    async def create_producer(self, topic: str, **options: Any) -> Producer | PartitionedProducer:
        """Create a producer; `options` are the fields of `ProducerConfig`.

        Raises:
            BrokerError: creation was refused (non-retriable) or discovery failed.
            OperationTimeoutError: retriable failures lasted the operation timeout.
        """
        self._check_open()
        topic = normalize_topic(topic)
        config = ProducerConfig(**options)
        partitions = await self.partition_count(topic)
        producer: Producer | PartitionedProducer
        if partitions:
            producer = PartitionedProducer(self, topic, partitions, config)
        else:
            producer = Producer(self, topic, config)
        await producer._start()
        self._remember(producer)
        return producer

    async def subscribe(
        self, topic: str, subscription: str, **options: Any
    ) -> Consumer | MultiConsumer:
        """Subscribe; `options` are the fields of `ConsumerConfig` (e.g. `sub_type=SubType.SHARED`).

        Raises:
            BrokerError: the subscription was refused (e.g. `ConsumerBusyError`).
            OperationTimeoutError: retriable failures lasted the operation timeout.
        """
        self._check_open()
        config = ConsumerConfig(**options)
        return await self._subscribe(normalize_topic(topic), subscription, config)

    async def _subscribe(
        self, topic: str, subscription: str, config: ConsumerConfig
    ) -> Consumer | MultiConsumer:
        # spec §7.1: the C++ client always sends a consumer name, random if none was given.
        name = config.consumer_name or secrets.token_hex(5)
        partitions = await self.partition_count(topic)
        consumer: Consumer | MultiConsumer
        if partitions:
            consumer = MultiConsumer(
                self, topic, subscription, partitions, config, consumer_name=name
            )
        else:
            consumer = Consumer(self, topic, subscription, config, consumer_name=name)
        await consumer._start()
        self._remember(consumer)
        return consumer

    async def create_reader(
        self,
        topic: str,
        start_message_id: MessageId,
        *,
        inclusive: bool = False,
        receiver_queue_size: int = 1000,
        reader_name: str | None = None,
        subscription_role_prefix: str = "reader",
        **options: Any,
    ) -> Reader:
        """Create a reader starting at `start_message_id` (`EARLIEST`, `LATEST` or an id).

        Raises:
            LocalProtocolError: a specific id on a partitioned topic (only the sentinels apply to
                every partition).
            BrokerError: the subscription was refused.
        """
        self._check_open()
        topic = normalize_topic(topic)
        config = ConsumerConfig(
            sub_type=c.SubType.EXCLUSIVE,
            durable=False,
            start_message_id=start_message_id,
            start_message_id_inclusive=inclusive,
            receiver_queue_size=receiver_queue_size,
            consumer_name=reader_name,
            **options,
        )
        subscription = f"{subscription_role_prefix}-{secrets.token_hex(5)}"
        name = reader_name or secrets.token_hex(5)
        partitions = await self.partition_count(topic)
        consumer: Consumer | MultiConsumer
        if partitions:
            if start_message_id not in (EARLIEST, LATEST):
                raise LocalProtocolError("a partitioned reader starts at EARLIEST or LATEST")
            consumer = MultiConsumer(
                self, topic, subscription, partitions, config, consumer_name=name
            )
        else:
            consumer = Consumer(self, topic, subscription, config, consumer_name=name)
        reader = Reader(consumer)
        await reader._start(start_message_id, inclusive)
        self._remember(reader)
        return reader

    # ---- closing -------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close every producer, consumer and reader, then every connection."""
        if self._closed:
            return
        handlers = list(self._handlers.values())
        for handler in handlers:
            try:
                await handler.aclose()
            except Exception as exc:  # one failed close must not keep the others open
                logger.warning("closing %r failed: %r", handler, exc)
        self._closed = True
        await self._pool.aclose()


def _failure(error: ServerError | None, message: str | None, default: str) -> BrokerError:
    code = ServerError.UnknownError if error is None else error
    return BrokerError.for_code(code, message or default)


@asynccontextmanager
async def open_client(
    service_url: str,
    *,
    clock: Clock | None = None,
    operation_timeout: float = 30.0,
    connection_timeout: float = 10.0,
    keep_alive_interval: float | None = 30.0,
    connector: Connector | None = None,
    client_version: str = CLIENT_VERSION,
    reconnect_initial_delay: float = 0.1,
    reconnect_max_delay: float = 60.0,
    authentication: c.AuthData | None = None,
) -> AsyncIterator[Client]:
    """Open a client for `service_url` (`pulsar://host:port`) and close it on exit.

    Args:
        service_url: where lookups go.
        clock: time source for every timeout and timer; `AnyioClock()` by default.
        operation_timeout: seconds a request (or a handler's creation) may take.
        connection_timeout: seconds to connect and complete the handshake.
        keep_alive_interval: seconds between keep-alive PINGs; None disables them.
        connector: opens transports; `connect_tcp` by default.
        client_version: sent in CONNECT.
        reconnect_initial_delay: first reconnection backoff (doubles per attempt).
        reconnect_max_delay: the backoff's ceiling.
        authentication: the credential every CONNECT carries (``auth_method_name`` ``token``,
            ``basic``...; ``auth_data`` its bytes); None: none.

    On a normal exit every handler is closed gracefully (flushes, CLOSE_*); when the body raises
    or is cancelled, everything is torn down at once.
    """
    async with anyio.create_task_group() as tg:
        client = Client(
            service_url,
            tg,
            clock=clock if clock is not None else AnyioClock(),
            operation_timeout=operation_timeout,
            connection_timeout=connection_timeout,
            keep_alive_interval=keep_alive_interval,
            connector=connector if connector is not None else connect_tcp,
            client_version=client_version,
            reconnect_initial_delay=reconnect_initial_delay,
            reconnect_max_delay=reconnect_max_delay,
            authentication=authentication,
        )
        try:
            yield client
            await client.aclose()
        finally:
            client._closed = True
            tg.cancel_scope.cancel()
