"""One producer's loop: open-loop pacing, payload headers, receipts, trace rows and tallies.

A producer is one handler per partition of its topic, fed by one schedule. loadgen routes
messages itself (keyed: the Java client's murmur3 hash; keyless: round robin, switching at the
batch delay when batching, as the Java client's default router does), so every partition
handler has its own run of sequence ids 0, 1, 2, ..., set explicitly on each send.

Receipts come back in send order per handler (`protocol.client`'s rule 2; the official
client's callbacks too), so each handler keeps a FIFO of what it sent, and the receipt listener
(`ProducerConfig.receipt_listener`: one call per SEND, a whole batch at once) pops the batch's
messages off its head: no callback and no future per message.
"""

from __future__ import annotations

import collections
import random
from array import array
from collections.abc import Iterator
from typing import Any, Final

from loadgen.checks import compress
from loadgen.drivers import Driver, ProducerLike
from loadgen.messages import ProducerPlan, ProducerTally
from loadgen.payload import HEADER, MAGIC, NO_KEY, VERSION, key_chooser, key_name, sampled
from loadgen.schedule import segment_arrivals
from loadgen.trace.writer import ColumnBuffer, TableWriter
from protocol.client import partition_for_key
from protocol.clock import Clock

__all__ = ["SEND_COLUMNS", "GroupCounters", "ProducerRunner"]

SEND_COLUMNS: Final = (
    "sequence_id",
    "key",
    "intended_ns",
    "send_ns",
    "receipt_ns",
    "ledger_id",
    "entry_id",
    "batch_index",
    "error",
    "broker",
)

FLUSH_ROWS: Final = 16_384
"""Rows a handler buffers before handing them to the writer thread."""


class GroupCounters:
    """One group's counts for the current second, in one worker (reset by each tick)."""

    __slots__ = ("bytes", "delays", "errors", "latencies", "messages", "reconnections")

    def __init__(self) -> None:
        self.messages = 0
        self.bytes = 0
        self.errors = 0
        self.reconnections = 0
        self.latencies = array("q")  # µs from the intended send time
        self.delays = array("q")  # µs the send was late (produce only)


class _Partition:
    """One partition handler: its sequence ids, in-flight FIFO, receipts and trace rows."""

    __slots__ = ("acked", "failed", "handler", "index", "inflight", "next_seq", "receipted", "rows")

    handler: ProducerLike

    def __init__(self, index: int, rows: ColumnBuffer) -> None:
        self.index = index
        self.next_seq = 0
        self.inflight: collections.deque[tuple[int, int, int, int, bool]] = collections.deque()
        self.acked = bytearray(4096)
        self.receipted = 0
        self.failed = 0
        self.rows = rows


class ProducerRunner:
    """Drives one `ProducerPlan` once its handlers are created with `start`."""

    def __init__(
        self,
        plan: ProducerPlan,
        *,
        run_id: str,
        worker: int,
        tag: int,
        clock: Clock,
        counters: GroupCounters,
        writer: TableWriter | None,
        sample_threshold: int,
        full_sample: bool,
    ) -> None:
        self.plan = plan
        self._run_id = run_id
        self._worker = worker
        self._tag = tag
        self._clock = clock
        self._counters = counters
        self._writer = writer
        self._threshold = sample_threshold
        self._full = full_sample
        self._partitions: list[_Partition] = []
        self._attachments = 0
        self.stopping = False
        self.first_send_ns: int | None = None
        self.sent = 0
        self._counted = 0

    async def start(self, driver: Driver) -> None:
        """Create one handler per partition (raises what the client raises)."""
        for offset, topic in enumerate(self.plan.partitions):
            constants = {
                "run_id": self._run_id,
                "worker": self._worker,
                "topic": topic,
                "partition": offset if self.plan.partitioned else -1,
                "producer": self.plan.name,
                "producer_index": self.plan.first_index + offset,
                "size": self.plan.size,
            }
            rows = ColumnBuffer(constants, SEND_COLUMNS)
            partition = _Partition(self.plan.first_index + offset, rows)
            partition.handler = await driver.create_producer(
                topic, self.plan, self._listener(partition)
            )
            self._partitions.append(partition)
        self._attachments = sum(p.handler.attachments for p in self._partitions)

    def reconnections(self) -> int:
        """Re-attachments since the last call."""
        total = sum(p.handler.attachments for p in self._partitions)
        new, self._attachments = total - self._attachments, total
        return new

    def _listener(self, partition: _Partition) -> Any:
        """What the client calls with each SEND's outcome (a batch's messages at once)."""
        latencies = self._counters.latencies
        counters = self._counters
        inflight = partition.inflight.popleft
        rows = partition.rows.lists
        (
            seq_col,
            key_col,
            intended_col,
            send_col,
            receipt_col,
            ledger_col,
            entry_col,
            batch_col,
            error_col,
            broker_col,
        ) = (column.append for column in rows)
        wall = self._clock.wall_ns
        keys = [key_name(i) for i in range(self.plan.keys.count)]
        writer = self._writer

        def heard(
            first_seq: int,
            last_seq: int,
            ledger_id: int,
            entry_id: int,
            first_batch_index: int,
            error: BaseException | None,
            stamp_ns: int = 0,
        ) -> None:
            now = stamp_ns or wall()
            count = last_seq - first_seq + 1
            sent = [inflight() for _ in range(count)]
            if error is None:
                acked = partition.acked
                while last_seq >= len(acked):
                    acked.extend(bytes(len(acked)))
                acked[first_seq : last_seq + 1] = b"\x01" * count
                partition.receipted += count
                latencies.extend([(now - entry[1]) // 1000 for entry in sent])
            else:
                partition.failed += count
                counters.errors += count
                failure = repr(error)
            broker = partition.handler.broker_url or ""
            for offset, (sequence_id, intended, sent_ns, key, keep) in enumerate(sent):
                if not keep:
                    continue
                seq_col(sequence_id)
                key_col(keys[key] if key != NO_KEY else None)
                intended_col(intended)
                send_col(sent_ns)
                broker_col(broker)
                if error is None:
                    receipt_col(now)
                    ledger_col(ledger_id)
                    entry_col(entry_id)
                    batch_col(first_batch_index + offset if first_batch_index >= 0 else -1)
                    error_col(None)
                else:
                    receipt_col(None)
                    ledger_col(-1)
                    entry_col(-1)
                    batch_col(-1)
                    error_col(failure)
            if writer is not None and len(rows[0]) >= FLUSH_ROWS:
                writer.submit_buffer(partition.rows)

        return heard

    @property
    def acked(self) -> int:
        """Messages receipted so far."""
        return sum(p.receipted for p in self._partitions)

    def take_counts(self) -> tuple[int, int]:
        """(messages, bytes) receipted since the last call, for the second's tick."""
        acked = self.acked
        new, self._counted = acked - self._counted, acked
        return new, new * self.plan.size

    async def run(self, start_mono: float, start_ns: int) -> None:
        """Send on schedule until the segments end, the message limit or `stopping`."""
        plan = self.plan
        clock = self._clock
        now = clock.now
        wall = clock.wall_ns
        rng = random.Random(plan.seed)
        keyed = plan.keys.distribution != "none"
        choose_key = key_chooser(plan.keys, random.Random(plan.seed ^ 0x5EED))
        partitions = self._partitions
        count = len(partitions)
        key_partition = [partition_for_key(key_name(i), count) for i in range(plan.keys.count)]
        keys = [key_name(i) for i in range(plan.keys.count)]
        switch = plan.batching.max_delay_ms / 1000.0 if plan.batching.enabled else 0.0
        pack = HEADER.pack
        padding = bytes(plan.size - HEADER.size)
        tag = self._tag
        full, threshold = self._full, self._threshold
        limit = plan.messages
        delays = self._counters.delays.append
        round_robin = 0
        key = NO_KEY
        for segment in plan.segments:
            end = start_mono + segment.end
            if now() >= end:
                continue
            paced = not segment.unlimited
            if not paced and now() < start_mono + segment.start:
                await clock.sleep_until(start_mono + segment.start)  # paced arrivals wait anyway
            arrivals = segment_arrivals(segment, rng, poisson=plan.poisson) if paced else _forever()
            for offset in arrivals:
                if paced:
                    deadline = start_mono + offset
                    if deadline > now():
                        await clock.sleep_until(deadline)
                    intended = start_ns + int(offset * 1e9)
                    sent = wall()
                    delays((sent - intended) // 1000)
                else:
                    if now() >= end:
                        break
                    intended = sent = wall()
                if self.stopping or self.sent == limit:
                    return
                if self.first_send_ns is None:
                    self.first_send_ns = sent
                # One message: route it, number it, remember it, hand it to the client.
                if keyed:
                    key = choose_key()
                    index = key_partition[key]
                elif switch:
                    index = int(now() / switch) % count
                else:
                    index = round_robin = (round_robin + 1) % count
                partition = partitions[index]
                sequence_id = partition.next_seq
                partition.next_seq = sequence_id + 1
                keep = full or (threshold > 0 and sampled(partition.index, sequence_id, threshold))
                partition.inflight.append((sequence_id, intended, sent, key, keep))
                payload = pack(
                    MAGIC, VERSION, 0, tag, partition.index, key, sequence_id, intended, sent
                )
                await partition.handler.send_async(
                    payload + padding, key=keys[key] if keyed else None, sequence_id=sequence_id
                )
                self.sent += 1

    async def finish(self) -> None:
        """Wait for every outstanding receipt (or failure), then close the handlers."""
        for partition in self._partitions:
            await partition.handler.flush()
        for partition in self._partitions:
            await partition.handler.aclose()

    def flush_rows(self) -> None:
        """Hand every completed row to the writer."""
        if self._writer is not None:
            for partition in self._partitions:
                self._writer.submit_buffer(partition.rows)

    def tallies(self) -> list[ProducerTally]:
        return [
            ProducerTally(
                index=p.index,
                group=self.plan.group,
                topic=self.plan.topic,
                sent=p.next_seq,
                acked=compress(p.acked[: p.next_seq]),
                failed=p.failed,
            )
            for p in self._partitions
        ]


def _forever() -> Iterator[float]:
    """The arrivals of an unlimited segment: no intended times, just "next"."""
    while True:
        yield 0.0
