"""One consumer's loops: receive, read loadgen's header, check, trace, acknowledge, pace.

A consumer is one handler per partition, all with the consumer's name, each with a receive
loop of its own (as the client's multi-topic consumer does inside). The consumers of a group in
one worker share the group's `SeenSet`, so a message delivered to two of them counts as a
duplicate here; duplicates across workers are found when the runner merges the bitmaps.

A traced delivery costs the loop three appends (the message, its receive time and broker); its
row is made when the rows are handed on (`_Pending`), column by column, mostly by C-level
`map` and `extend` and strided reads of the payload headers rather than thirteen appends
apiece.
"""

from __future__ import annotations

import sys
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any, Final

import anyio

from emubroker.traceschema.loadgen import int64_columns
from loadgen.checks import SeenSet
from loadgen.drivers import ConsumerLike, Driver
from loadgen.messages import ConsumerPlan
from loadgen.payload import HEADER, MAGIC, NO_KEY, key_name, sampled
from loadgen.producing import FLUSH_ROWS, GroupCounters
from loadgen.trace.writer import ColumnBuffer, TableWriter
from protocol.clock import Clock

__all__ = ["RECEIVE_COLUMNS", "ConsumerRunner", "Pauser"]

RECEIVE_COLUMNS: Final = (
    "producer",
    "producer_index",
    "sequence_id",
    "key",
    "size",
    "intended_ns",
    "send_ns",
    "receive_ns",
    "ledger_id",
    "entry_id",
    "batch_index",
    "redelivery_count",
    "broker",
)

_ORDER: Final = {
    "Exclusive": "producer",
    "Failover": "producer",
    "Key_Shared": "key",
    "Shared": "none",
}


def order_of(sub_type: str) -> str:
    """What order Pulsar promises for a subscription type (see `checks`)."""
    return _ORDER[sub_type]


class Pauser:
    """A consumer group's pause switch: loops wait on it before each receive."""

    def __init__(self) -> None:
        self.paused = False
        self._resumed = anyio.Event()

    def pause(self) -> None:
        if not self.paused:
            self.paused = True
            self._resumed = anyio.Event()

    def resume(self) -> None:
        self.paused = False
        self._resumed.set()

    async def wait_resumed(self) -> None:
        await self._resumed.wait()


class _Pending:
    """One handler's traced deliveries not yet made into rows of its `ColumnBuffer`.

    Only the message, its receive time and broker are kept per delivery: none of them is an
    object the cyclic garbage collector tracks (`protocol.client` messages are left out of it),
    so thousands of them waiting cost no collections. The header fields are read back from the
    payloads when the rows are made, all of a column at once (`_header_columns`).
    """

    __slots__ = ("brokers", "messages", "rows", "stamps")

    def __init__(self, rows: ColumnBuffer) -> None:
        self.rows = rows
        self.messages: list[Any] = []
        self.stamps: list[int] = []
        self.brokers: list[str] = []

    def __len__(self) -> int:
        return len(self.messages)

    def make_rows(self, names: dict[int, str], keys: dict[int, str | None]) -> ColumnBuffer:
        """Append the pending deliveries' rows to the buffer (`RECEIVE_COLUMNS` order)."""
        messages = self.messages
        if not messages:
            return self.rows
        payloads = list(map(_PAYLOAD, messages))
        producers, key_indexes, (sequence_ids, intended, sent) = _header_columns(payloads)
        ledgers: list[int] = []
        entries: list[int] = []
        batch_indexes: list[int] = []
        redeliveries: list[int] = []
        ledger, entry, batch, redelivery = (
            ledgers.append,
            entries.append,
            batch_indexes.append,
            redeliveries.append,
        )
        for ledger_id, entry_id, batch_index, redelivery_count in map(_DELIVERY, messages):
            ledger(ledger_id)
            entry(entry_id)
            batch(batch_index)
            redelivery(redelivery_count)
        for key in set(key_indexes).difference(keys):
            keys[key] = key_name(key)
        columns = (
            map(names.get, producers, repeat("")),
            producers,
            sequence_ids,
            map(keys.__getitem__, key_indexes),
            map(len, payloads),
            intended,
            sent,
            self.stamps,
            ledgers,
            entries,
            batch_indexes,
            redeliveries,
            self.brokers,
        )
        for column, values in zip(self.rows.lists, columns, strict=True):
            if isinstance(values, bytes):
                column.frombytes(values)  # machine words into an array("q")
            else:
                column.extend(values)
        self.messages = []
        self.stamps = []
        self.brokers = []
        return self.rows


_DELIVERY: Final = attrgetter("delivery")
_PAYLOAD: Final = attrgetter("payload")
_HEAD: Final = itemgetter(slice(0, HEADER.size))


def _header_columns(payloads: list[bytes]) -> tuple[list[int], list[int], list[Any]]:
    """The producer and key indexes of each payload's header; its three int64 fields as bytes.

    The headers, laid end to end, are read as 64-bit and 32-bit words (`HEADER` is 40 bytes,
    five 64-bit words, little-endian): each field is every fifth or tenth word, taken by a
    strided memoryview at C speed instead of an `unpack` per message. The sequence ids,
    intended and send times stay machine words (`array.frombytes` takes them as they are).
    """
    if sys.byteorder != "little":  # pragma: no cover - every platform we run on
        fields = [HEADER.unpack_from(p)[4:] for p in payloads]
        producers, keys, *int64s = (list(column) for column in zip(*fields, strict=True))
        return producers, keys, int64s
    heads = b"".join(map(_HEAD, payloads))
    words = memoryview(heads).cast("q")
    halves = memoryview(heads).cast("I")
    return (
        halves[2::10].tolist(),  # producer index (u32 at byte 8)
        halves[3::10].tolist(),  # key index (u32 at byte 12)
        [words[i::5].tobytes() for i in (2, 3, 4)],  # sequence id, intended ns, send ns
    )


class ConsumerRunner:
    """Drives one `ConsumerPlan` once its handlers are subscribed with `start`."""

    def __init__(
        self,
        plan: ConsumerPlan,
        *,
        run_id: str,
        worker: int,
        tag: int,
        clock: Clock,
        counters: GroupCounters,
        seen: SeenSet,
        pauser: Pauser,
        writer: TableWriter | None,
        producer_names: dict[int, str],
        sample_threshold: int,
        full_sample: bool,
        stamps: bool,
    ) -> None:
        self.plan = plan
        self._run_id = run_id
        self._worker = worker
        self._tag = tag
        self._clock = clock
        self._counters = counters
        self._seen = seen
        self._pauser = pauser
        self._writer = writer
        self._names = producer_names
        self._threshold = sample_threshold
        self._full = full_sample
        self._stamps = stamps
        self._handlers: list[tuple[ConsumerLike, _Pending]] = []
        self._keys: dict[int, str | None] = {NO_KEY: None}  # key index -> its name
        self._reattached = 0  # attachments since `start` not yet counted by `reconnections`
        self.foreign = 0
        self.other_runs = 0
        self.last_receive_ns: int | None = None

    async def start(self, driver: Driver) -> None:
        """Subscribe one handler per partition (raises what the client raises)."""
        for offset, topic in enumerate(self.plan.partitions):
            handler = await driver.subscribe(topic, self.plan)
            constants = {
                "run_id": self._run_id,
                "worker": self._worker,
                "topic": topic,
                "partition": offset if self.plan.partitioned else -1,
                "subscription": self.plan.subscription,
                "consumer": self.plan.name,
            }
            rows = ColumnBuffer(constants, RECEIVE_COLUMNS, int64_columns("receives"))
            self._handlers.append((handler, _Pending(rows)))
        for handler, _ in self._handlers:  # from here on, each attachment is a reconnection
            handler.on_attach = self._attached

    def _attached(self) -> None:
        self._reattached += 1

    def reconnections(self) -> int:
        """Re-attachments since the last call (counted as they happen, not summed)."""
        new, self._reattached = self._reattached, 0
        return new

    async def run(self) -> None:
        """Receive on every partition until cancelled."""
        async with anyio.create_task_group() as tg:
            for handler, rows in self._handlers:
                tg.start_soon(self._receive_loop, handler, rows)

    async def _receive_loop(self, handler: ConsumerLike, pending: _Pending) -> None:
        clock = self._clock
        wall = clock.wall_ns
        stamps = self._stamps
        unpack = HEADER.unpack_from
        header_size = HEADER.size
        tag = self._tag
        see = self._seen.see
        counters = self._counters
        latencies = counters.latencies.append
        full, threshold = self._full, self._threshold
        receive = handler.receive
        acknowledge = handler.acknowledge
        pauser = self._pauser
        writer = self._writer
        # The broker that delivers: the one the handler was attached to when it received. It
        # changes only with an attachment, so it is read again only then.
        attachments = handler.attachments
        broker = handler.broker_url or ""
        pace = 1.0 / self.plan.ack_rate if self.plan.ack_rate > 0 else 0.0
        next_slot = clock.now()
        while True:
            if pauser.paused:
                await pauser.wait_resumed()
                next_slot = clock.now()
            message: Any = await receive()
            stamp = message.stamp_ns if stamps else wall()
            payload = message.payload
            if len(payload) < header_size:
                self.foreign += 1
                acknowledge(message)
                continue
            magic, _, _, run, producer, key, sequence_id, intended, _ = unpack(payload)
            if magic != MAGIC:
                self.foreign += 1
                acknowledge(message)
                continue
            if run == tag:  # another run's messages count for throughput and latency only
                see(producer, sequence_id, key)
            else:
                self.other_runs += 1
            self.last_receive_ns = stamp
            counters.messages += 1
            counters.bytes += len(payload)
            latencies((stamp - intended) // 1000)
            if full or (threshold > 0 and sampled(producer, sequence_id, threshold)):
                if handler.attachments != attachments:
                    attachments = handler.attachments
                    broker = handler.broker_url or ""
                pending.messages.append(message)
                pending.stamps.append(stamp)
                pending.brokers.append(broker)
                if writer is not None and len(pending) >= FLUSH_ROWS:
                    writer.submit_buffer(pending.make_rows(self._names, self._keys))
            acknowledge(message)
            if pace:
                next_slot += pace
                if next_slot > clock.now():
                    await clock.sleep_until(next_slot)

    async def close(self) -> None:
        for handler, _ in self._handlers:
            await handler.aclose()

    def flush_rows(self) -> None:
        """Make rows of every traced delivery and hand them to the writer."""
        for _, pending in self._handlers:
            rows = pending.make_rows(self._names, self._keys)
            if self._writer is not None:
                self._writer.submit_buffer(rows)
