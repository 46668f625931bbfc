"""One consumer's loops: receive, read loadgen's header, check, trace, acknowledge, pace.

A consumer is one handler per partition, all with the consumer's name, each with a receive
loop of its own (as the client's multi-topic consumer does inside). The consumers of a group in
one worker share the group's `SeenSet`, so a message delivered to two of them counts as a
duplicate here; duplicates across workers are found when the runner merges the bitmaps.
"""

from __future__ import annotations

from typing import Any, Final

import anyio

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
        self._handlers: list[tuple[ConsumerLike, ColumnBuffer]] = []
        self._attachments = 0
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
            self._handlers.append((handler, ColumnBuffer(constants, RECEIVE_COLUMNS)))
        self._attachments = sum(h.attachments for h, _ in self._handlers)

    def reconnections(self) -> int:
        total = sum(h.attachments for h, _ in self._handlers)
        new, self._attachments = total - self._attachments, total
        return new

    async def run(self) -> None:
        """Receive on every partition until cancelled."""
        async with anyio.create_task_group() as tg:
            for handler, rows in self._handlers:
                tg.start_soon(self._receive_loop, handler, rows)

    async def _receive_loop(self, handler: ConsumerLike, rows: ColumnBuffer) -> None:
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
        names = self._names
        keys: dict[int, str] = {}
        receive = handler.receive
        acknowledge = handler.acknowledge
        pauser = self._pauser
        lists = rows.lists
        (
            producer_col,
            index_col,
            seq_col,
            key_col,
            size_col,
            intended_col,
            send_col,
            receive_col,
            ledger_col,
            entry_col,
            batch_col,
            redelivery_col,
            broker_col,
        ) = (column.append for column in lists)
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
            magic, _, _, run, producer, key, sequence_id, intended, sent = unpack(payload)
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
            size = len(payload)
            counters.bytes += size
            latencies((stamp - intended) // 1000)
            if full or (threshold > 0 and sampled(producer, sequence_id, threshold)):
                message_id = message.message_id
                if key != NO_KEY and key not in keys:
                    keys[key] = key_name(key)
                if handler.attachments != attachments:
                    attachments = handler.attachments
                    broker = handler.broker_url or ""
                producer_col(names.get(producer, ""))
                index_col(producer)
                seq_col(sequence_id)
                key_col(keys[key] if key != NO_KEY else None)
                size_col(size)
                intended_col(intended)
                send_col(sent)
                receive_col(stamp)
                ledger_col(message_id.ledger_id)
                entry_col(message_id.entry_id)
                batch_col(message_id.batch_index)
                redelivery_col(message.redelivery_count)
                broker_col(broker)
                if writer is not None and len(lists[0]) >= FLUSH_ROWS:
                    writer.submit_buffer(rows)
            acknowledge(message)
            if pace:
                next_slot += pace
                if next_slot > clock.now():
                    await clock.sleep_until(next_slot)

    async def close(self) -> None:
        for handler, _ in self._handlers:
            await handler.aclose()

    def flush_rows(self) -> None:
        if self._writer is not None:
            for _, rows in self._handlers:
                self._writer.submit_buffer(rows)
