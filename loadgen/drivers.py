"""The clients loadgen drives: `protocol.client` (native, the default) or `pulsar-client`.

The worker's loops use one small surface, the one `protocol.client` already has:
`send_async(payload, key=, sequence_id=)`, with each SEND's outcome reported to a receipt
listener, `listener(first_seq, last_seq, ledger_id, entry_id, first_batch_index, error)` (once
per batch, not once per message: `ProducerConfig.receipt_listener`), and `receive()` /
`acknowledge()` giving messages with `payload` and `delivery` (ledger id, entry id, batch index,
redelivery count). The native
driver hands out `protocol.client`'s handlers as they are (nothing between loadgen and the fast
client); the official driver wraps `pulsar-client` to the same surface.

The official client calls back on its own threads. Its callbacks only stamp the time and queue
the result; a task on the event loop calls the listener (with the stamp as a seventh argument)
and hands over the messages, so loadgen's bookkeeping stays on one thread and the hand-over
delay does not count as latency. It does not say which broker a handler is on, nor when it
reconnects: those trace columns stay empty for it.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Final, Protocol

import anyio
import anyio.abc

from loadgen.messages import ConsumerPlan, ProducerPlan
from protocol.client import Connector, InitialPosition, SubType, open_client
from protocol.clock import Clock

__all__ = ["ConsumerLike", "Driver", "MessageIdLike", "ProducerLike", "open_driver"]

logger = logging.getLogger(__name__)

_POLL: Final = 0.0005
"""Seconds between looks at the official client's queues (its threads cannot wake our loop
cheaply); what it adds to latency is not measured, since its threads stamp the times."""


class MessageIdLike(Protocol):
    @property
    def ledger_id(self) -> int: ...
    @property
    def entry_id(self) -> int: ...
    @property
    def batch_index(self) -> int: ...


class ProducerLike(Protocol):
    attachments: int
    on_attach: Callable[[], object] | None  # called after each attachment (reconnections)

    @property
    def broker_url(self) -> str | None: ...

    async def send_async(
        self, payload: bytes, *, key: str | None = None, sequence_id: int | None = None
    ) -> Any: ...

    async def flush(self) -> None: ...
    async def aclose(self) -> None: ...


class ConsumerLike(Protocol):
    attachments: int
    on_attach: Callable[[], object] | None  # called after each attachment (reconnections)

    @property
    def broker_url(self) -> str | None: ...

    async def receive(self) -> Any: ...
    def acknowledge(self, message: Any) -> None: ...
    async def aclose(self) -> None: ...


class Driver(Protocol):
    stamps: bool
    """True when messages carry the client thread's time (`stamp_ns`), and receipt listeners
    get it as a seventh argument."""

    async def create_producer(
        self, topic: str, plan: ProducerPlan, listener: Callable[..., None]
    ) -> ProducerLike: ...
    async def subscribe(self, topic: str, plan: ConsumerPlan) -> ConsumerLike: ...


# ---- native ------------------------------------------------------------------------------------


class _NativeDriver:
    stamps = False

    def __init__(self, client: Any) -> None:
        self._client = client

    async def create_producer(
        self, topic: str, plan: ProducerPlan, listener: Callable[..., None]
    ) -> ProducerLike:
        producer: ProducerLike = await self._client.create_producer(
            topic,
            receipt_listener=listener,
            producer_name=plan.name,
            batching_enabled=plan.batching.enabled,
            batching_max_publish_delay=plan.batching.max_delay_ms / 1000.0,
            batching_max_messages=plan.batching.max_messages,
            batching_max_bytes=plan.batching.max_bytes,
            max_pending_messages=plan.max_outstanding,
            send_timeout=plan.send_timeout,
            chunking_enabled=plan.chunking,
        )
        return producer

    async def subscribe(self, topic: str, plan: ConsumerPlan) -> ConsumerLike:
        consumer: ConsumerLike = await self._client.subscribe(
            topic,
            plan.subscription,
            sub_type=SubType[plan.sub_type.upper()],
            initial_position=InitialPosition[plan.initial_position.upper()],
            receiver_queue_size=plan.receiver_queue,
            consumer_name=plan.name,
        )
        return consumer


# ---- official ----------------------------------------------------------------------------------


class _OfficialId:
    __slots__ = ("batch_index", "entry_id", "ledger_id")

    def __init__(self, message_id: Any) -> None:
        self.ledger_id = message_id.ledger_id()
        self.entry_id = message_id.entry_id()
        self.batch_index = message_id.batch_index()


class _OfficialProducer:
    """`pulsar.Producer` behind the native surface; waits for room itself (never blocks)."""

    attachments = 1
    on_attach: Callable[[], object] | None = None  # never called: it never re-attaches
    broker_url = None

    def __init__(
        self, producer: Any, max_outstanding: int, clock: Clock, listener: Callable[..., None]
    ) -> None:
        self._producer = producer
        self._max = max_outstanding
        self._clock = clock
        self._listener = listener
        self._outstanding = 0
        self._completed: collections.deque[tuple[int, Any, Any, int]] = collections.deque()

    async def send_async(
        self, payload: bytes, *, key: str | None = None, sequence_id: int | None = None
    ) -> None:
        while self._outstanding >= self._max:
            self.pump()
            await self._clock.sleep(_POLL)
        completed = self._completed
        wall_ns = self._clock.wall_ns
        assert sequence_id is not None  # loadgen numbers every message

        def sent(result: Any, message_id: Any) -> None:  # on the client's thread
            completed.append((sequence_id, result, message_id, wall_ns()))

        self._outstanding += 1
        self._producer.send_async(payload, sent, partition_key=key, sequence_id=sequence_id)

    def pump(self) -> None:
        """Report the outcomes whose callbacks have come (in order) to the listener."""
        import pulsar

        completed = self._completed
        listener = self._listener
        while completed:
            seq, result, message_id, stamp = completed.popleft()
            self._outstanding -= 1
            if result == pulsar.Result.Ok:
                mid = _OfficialId(message_id)
                listener(seq, seq, mid.ledger_id, mid.entry_id, mid.batch_index, None, stamp)
            else:
                listener(seq, seq, -1, -1, -1, RuntimeError(f"send failed: {result}"), stamp)

    async def flush(self) -> None:
        await anyio.to_thread.run_sync(self._producer.flush)
        while self._outstanding:
            self.pump()
            await self._clock.sleep(_POLL)

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self._producer.close)
        self.pump()


class _OfficialMessage:
    __slots__ = ("_message", "delivery", "message_id", "payload", "redelivery_count", "stamp_ns")

    def __init__(self, message: Any, stamp_ns: int) -> None:
        self._message = message
        self.payload: bytes = message.data()
        self.message_id = mid = _OfficialId(message.message_id())
        self.redelivery_count: int = message.redelivery_count()
        self.delivery = (mid.ledger_id, mid.entry_id, mid.batch_index, self.redelivery_count)
        self.stamp_ns = stamp_ns


class _OfficialConsumer:
    attachments = 1
    on_attach: Callable[[], object] | None = None  # never called: it never re-attaches
    broker_url = None

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._consumer: Any = None
        self.inbox: collections.deque[tuple[Any, int]] = collections.deque()

    def listener(self, consumer: Any, message: Any) -> None:  # on the client's thread
        self.inbox.append((message, self._clock.wall_ns()))

    async def receive(self) -> _OfficialMessage:
        inbox = self.inbox
        while not inbox:
            await self._clock.sleep(_POLL)
        message, stamp = inbox.popleft()
        return _OfficialMessage(message, stamp)

    def acknowledge(self, message: _OfficialMessage) -> None:
        self._consumer.acknowledge(message._message)

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self._consumer.close)


class _OfficialDriver:
    stamps = True

    def __init__(self, client: Any, clock: Clock, tg: anyio.abc.TaskGroup) -> None:
        self._client = client
        self._clock = clock
        self._producers: list[_OfficialProducer] = []
        tg.start_soon(self._pump)

    async def _pump(self) -> None:
        while True:
            for producer in self._producers:
                producer.pump()
            await self._clock.sleep(_POLL)

    async def create_producer(
        self, topic: str, plan: ProducerPlan, listener: Callable[..., None]
    ) -> ProducerLike:
        def create() -> Any:
            return self._client.create_producer(
                topic,
                producer_name=plan.name,
                batching_enabled=plan.batching.enabled,
                batching_max_publish_delay_ms=max(1, round(plan.batching.max_delay_ms)),
                batching_max_messages=plan.batching.max_messages,
                batching_max_allowed_size_in_bytes=plan.batching.max_bytes,
                max_pending_messages=plan.max_outstanding + 1,
                send_timeout_millis=round(plan.send_timeout * 1000),
                chunking_enabled=plan.chunking,
            )

        producer = _OfficialProducer(
            await anyio.to_thread.run_sync(create), plan.max_outstanding, self._clock, listener
        )
        self._producers.append(producer)
        return producer

    async def subscribe(self, topic: str, plan: ConsumerPlan) -> ConsumerLike:
        import pulsar

        consumer = _OfficialConsumer(self._clock)

        def create() -> Any:
            return self._client.subscribe(
                topic,
                plan.subscription,
                consumer_type=getattr(pulsar.ConsumerType, plan.sub_type.replace("_", "")),
                message_listener=consumer.listener,
                receiver_queue_size=plan.receiver_queue,
                consumer_name=plan.name,
                initial_position=getattr(
                    pulsar.InitialPosition, plan.initial_position.capitalize()
                ),
            )

        consumer._consumer = await anyio.to_thread.run_sync(create)
        return consumer


@asynccontextmanager
async def open_driver(
    kind: str, service_url: str, clock: Clock, *, connector: Connector | None = None
) -> AsyncIterator[Driver]:
    """A driver for `kind` (`native` or `official`), closed on exit.

    `connector` opens the native client's transports (TCP by default; the simulator's are in
    memory); the official client always uses its own sockets.
    """
    if kind == "native":
        async with open_client(service_url, clock=clock, connector=connector) as client:
            yield _NativeDriver(client)
        return
    import pulsar

    client = pulsar.Client(service_url, logger=logging.getLogger("pulsar"))
    try:
        async with anyio.create_task_group() as tg:
            yield _OfficialDriver(client, clock, tg)
            tg.cancel_scope.cancel()
    finally:
        await anyio.to_thread.run_sync(client.close)
