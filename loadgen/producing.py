"""One producer's loop: open-loop pacing, payload headers, receipts, trace rows and tallies.

A producer is one handler per partition of its topic, fed by one schedule. loadgen routes
messages itself (keyed: the Java client's murmur3 hash; keyless: round robin, switching at the
batch delay when batching, as the Java client's default router does), so every partition
handler has its own run of sequence ids 0, 1, 2, ..., set explicitly on each send.

Receipts come back in send order per handler (`protocol.client`'s rule 2; the official
client's callbacks too), so each handler keeps a FIFO of what it sent, and the receipt listener
(`ProducerConfig.receipt_listener`: one call per SEND, a whole batch at once) takes the batch's
messages off its head: no callback and no future per message. The FIFO is columnar
(`inflight.PartitionSends`), so a receipt handles its batch with slices and `extend`s rather
than a step per message.
"""

from __future__ import annotations

import math
import random
import struct
from array import array
from itertools import repeat
from typing import Any, Final

from emubroker.traceschema.loadgen import int64_columns
from loadgen.checks import compress
from loadgen.drivers import Driver
from loadgen.inflight import PartitionSends
from loadgen.messages import ProducerPlan, ProducerTally
from loadgen.payload import HEADER, MAGIC, NO_KEY, VERSION, key_chooser, key_name, sampled
from loadgen.schedule import segment_arrivals, total_duration
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

_UNPACED: Final = repeat(0.0)
"""The arrivals of every unlimited segment."""


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
        self._partitions: list[PartitionSends] = []
        self._reattached = 0  # attachments since `start` not yet counted by `reconnections`
        self.stopping = False
        self.first_send_ns: int | None = None
        self.stopped_ns: int | None = None  # when it stopped sending (`run`)
        self.last_receipt_ns: int | None = None
        self.sent = 0

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
            rows = ColumnBuffer(constants, SEND_COLUMNS, int64_columns("sends"))
            partition = PartitionSends(self.plan.first_index + offset, rows)
            partition.handler = await driver.create_producer(
                topic, self.plan, self._listener(partition)
            )
            self._partitions.append(partition)
        for partition in self._partitions:  # from here on, each attachment is a reconnection
            partition.handler.on_attach = self._attached

    def _attached(self) -> None:
        self._reattached += 1

    def reconnections(self) -> int:
        """Re-attachments since the last call (counted as they happen, not summed)."""
        new, self._reattached = self._reattached, 0
        return new

    def _listener(self, partition: PartitionSends) -> Any:
        """What the client calls with each SEND's outcome (a batch's messages at once)."""
        latencies = self._counters.latencies
        counters = self._counters
        lists = partition.rows.lists
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
        ) = (column.extend for column in lists)
        (
            seq_one,
            key_one,
            intended_one,
            send_one,
            receipt_one,
            ledger_one,
            entry_one,
            batch_one,
            error_one,
            broker_one,
        ) = (column.append for column in lists)
        wall = self._clock.wall_ns
        keyed = self.plan.keys.distribution != "none"
        key_names = [key_name(i) for i in range(self.plan.keys.count)] if keyed else []
        writer = self._writer
        full, threshold = self._full, self._threshold
        index = partition.index
        take = partition.take
        runner = self

        def add_rows(
            first_seq: int,
            at: int,
            n: int,
            receipt: tuple[int, int, int, int] | None,
            failure: str | None,
        ) -> None:
            """Trace rows of `n` messages from FIFO place `at` (sequence id `first_seq`) on.

            `receipt`: (receipt time, ledger id, entry id, first batch index or -1), or None
            when the send failed with `failure`.
            """
            seq_col(range(first_seq, first_seq + n))
            if keyed:
                key_col([key_names[k] for k in partition.keys[at : at + n]])
            else:
                key_col(repeat(None, n))
            intended_col(partition.intended[at : at + n])
            send_col(partition.sent[at : at + n])
            broker_col(repeat(partition.handler.broker_url or "", n))
            if receipt is not None:
                now, ledger_id, entry_id, batch_index = receipt
                receipt_col(repeat(now, n))
                ledger_col(repeat(ledger_id, n))
                entry_col(repeat(entry_id, n))
                if batch_index >= 0:
                    batch_col(range(batch_index, batch_index + n))
                else:
                    batch_col(repeat(-1, n))
                error_col(repeat(None, n))
            else:
                receipt_col(repeat(None, n))
                ledger_col(repeat(-1, n))
                entry_col(repeat(-1, n))
                batch_col(repeat(-1, n))
                error_col(repeat(failure, n))

        def add_row(
            sequence_id: int,
            at: int,
            receipt: tuple[int, int, int, int] | None,
            failure: str | None,
        ) -> None:
            """`add_rows` for one message (unbatched sends, sampled rows): appends, not extends."""
            seq_one(sequence_id)
            key_one(key_names[partition.keys[at]] if keyed else None)
            intended_one(partition.intended[at])
            send_one(partition.sent[at])
            broker_one(partition.handler.broker_url or "")
            if receipt is not None:
                now, ledger_id, entry_id, batch_index = receipt
                receipt_one(now)
                ledger_one(ledger_id)
                entry_one(entry_id)
                batch_one(batch_index if batch_index >= 0 else -1)
                error_one(None)
            else:
                receipt_one(None)
                ledger_one(-1)
                entry_one(-1)
                batch_one(-1)
                error_one(failure)

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
            first, start, end = take(count)
            receipt: tuple[int, int, int, int] | None = None
            failure = None
            if error is None:
                acked = partition.acked
                while first + count > len(acked):
                    acked.extend(bytes(len(acked)))
                acked[first : first + count] = b"\x01" * count
                partition.receipted += count
                latencies.extend([(now - at) // 1000 for at in partition.intended[start:end]])
                receipt = (now, ledger_id, entry_id, first_batch_index)
                runner.last_receipt_ns = now
            else:
                partition.failed += count
                counters.errors += count
                failure = repr(error)
            if full and count > 1:
                add_rows(first, start, count, receipt, failure)
            elif full:
                add_row(first, start, receipt, failure)
            elif threshold:
                for offset in range(count):
                    if sampled(index, first + offset, threshold):
                        one = receipt
                        if receipt is not None and first_batch_index >= 0:
                            one = (now, ledger_id, entry_id, first_batch_index + offset)
                        add_row(first + offset, start + offset, one, failure)
            partition.compact()
            if writer is not None and len(partition.rows) >= FLUSH_ROWS:
                writer.submit_buffer(partition.rows)

        return heard

    @property
    def acked(self) -> int:
        """Messages receipted so far."""
        return sum(p.receipted for p in self._partitions)

    @property
    def end_ns(self) -> int | None:
        """When its production ended (None before `run` ends).

        That is when it stopped sending or got its last receipt, whichever was later.
        """
        if self.stopped_ns is None:
            return None
        return max(self.stopped_ns, self.last_receipt_ns or 0)

    async def run(self, start_mono: float, start_ns: int) -> None:
        """Send on schedule until the segments end, the message limit or `stopping`.

        Sets `stopped_ns`: the schedule's end when it ran to it (a producer at 1 msg/s has sent
        its last message a second before), else when it stopped.
        """
        try:
            await self._send_on_schedule(start_mono, start_ns)
        finally:
            if self.stopped_ns is None:
                self.stopped_ns = self._clock.wall_ns()

    async def _send_on_schedule(self, start_mono: float, start_ns: int) -> None:
        plan = self.plan
        clock = self._clock
        now = clock.now
        wall = clock.wall_ns
        rng = random.Random(plan.seed)
        keyed = plan.keys.distribution != "none"
        choose_key = key_chooser(plan.keys, random.Random(plan.seed ^ 0x5EED))
        partitions = self._partitions
        count = len(partitions)
        # Made only for keyed plans: every producer's start paid them (100 keys by default,
        # each named and hashed), keyed or not.
        keys = [key_name(i) for i in range(plan.keys.count)] if keyed else []
        key_partition = [partition_for_key(key, count) for key in keys]
        switch = plan.batching.max_delay_ms / 1000.0 if plan.batching.enabled else 0.0
        # The header with the padding up to the message size: one `pack` makes the payload.
        pack = struct.Struct(HEADER.format + f"{plan.size - HEADER.size}x").pack
        tag = self._tag
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
            # An unlimited segment's arrivals have no intended times, just "next".
            arrivals = segment_arrivals(segment, rng, poisson=plan.poisson) if paced else _UNPACED
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
                    return  # stopped now (`run`)
                if self.first_send_ns is None:
                    self.first_send_ns = sent
                # One message: route it, number it, remember it, hand it to the client.
                if keyed:
                    key = choose_key()
                    index = key_partition[key]
                elif count == 1:
                    index = 0
                elif switch:
                    index = int(now() / switch) % count
                else:
                    index = round_robin = (round_robin + 1) % count
                partition = partitions[index]
                sequence_id = partition.next_seq
                partition.next_seq = sequence_id + 1
                partition.intended.append(intended)
                partition.sent.append(sent)
                if keyed:
                    partition.keys.append(key)
                payload = pack(
                    MAGIC, VERSION, 0, tag, partition.index, key, sequence_id, intended, sent
                )
                await partition.handler.send_async(
                    payload, key=keys[key] if keyed else None, sequence_id=sequence_id
                )
                self.sent += 1
        scheduled = total_duration(plan.segments)
        self.stopped_ns = start_ns + round(scheduled * 1e9) if math.isfinite(scheduled) else wall()

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
