"""The consumer loop on a FakeClock with a fake handler: checks, counters and trace rows.

The handler hands out real `protocol.client` messages (batched and not, redelivered, from
another run, foreign), so the rows are checked against exactly what a consumer of the fast
client would see, row by row.
"""

from __future__ import annotations

import weakref
from typing import Any

import anyio
import pytest

from loadgen.checks import SeenSet
from loadgen.consuming import RECEIVE_COLUMNS, ConsumerRunner, Pauser
from loadgen.messages import ConsumerPlan
from loadgen.payload import HEADER, MAGIC, NO_KEY, VERSION, key_name, run_tag, sampled
from loadgen.producing import GroupCounters
from loadgen.trace.writer import ColumnBuffer
from protocol.client.entry import ReceivedEntry
from protocol.client.received import Message
from protocol.clock import FakeClock

pytestmark = pytest.mark.anyio

TAG = run_tag("R")


class FakeConsumer:
    """Hands out its messages a millisecond apart; moves to another broker at `move_at`."""

    def __init__(self, clock: FakeClock, messages: list[Message], move_at: int) -> None:
        self.clock = clock
        self.messages = messages
        self.move_at = move_at
        self.handed = 0
        self.attachments = 1
        self.on_attach: Any = None
        self.broker_url: str | None = "pulsar://one:6650"
        self.acked: list[Message] = []

    async def receive(self) -> Message:
        if self.handed == len(self.messages):
            await anyio.sleep_forever()
        await self.clock.sleep(0.001)
        if self.handed == self.move_at:
            self.attachments += 1
            self.broker_url = "pulsar://two:6650"
            self.on_attach()
        self.handed += 1
        return self.messages[self.handed - 1]

    def acknowledge(self, message: Any) -> None:
        self.acked.append(message)

    async def aclose(self) -> None: ...


class FakeDriver:
    stamps = False

    def __init__(self, handler: FakeConsumer) -> None:
        self.handler = handler

    async def subscribe(self, topic: str, plan: ConsumerPlan) -> FakeConsumer:
        return self.handler


def entry(ledger: int, entry_id: int, batch: int, redeliveries: int, owner: Any) -> Any:
    return ReceivedEntry(
        ledger, entry_id, (ledger, entry_id), -1, redeliveries, "t", weakref.ref(owner), None,
        batch, b"", 0,  # type: ignore[arg-type]
    )  # fmt: skip


def payload(producer: int, seq: int, key: int, tag: int = TAG, size: int = 60) -> bytes:
    header = HEADER.pack(MAGIC, VERSION, 0, tag, producer, key, seq, 1000 + seq, 2000 + seq)
    return header + bytes(size - HEADER.size)


def messages(owner: Any) -> list[Message]:
    """Two producers, batches and single entries, a redelivery, a duplicate, strangers."""
    made = []
    first = entry(3, 0, 4, 0, owner)
    for index, seq in enumerate((0, 1, 2, 3)):
        made.append(Message(payload(0, seq, NO_KEY), first, index))
    made.append(Message(payload(1, 0, 5, size=100), entry(3, 1, 0, 0, owner)))
    made.append(Message(payload(1, 2, 7, size=100), entry(3, 2, 0, 0, owner)))
    made.append(Message(payload(1, 1, 5, size=100), entry(3, 3, 0, 0, owner)))  # late
    made.append(Message(b"short", entry(3, 4, 0, 0, owner)))  # foreign: no header
    made.append(Message(b"x" * 60, entry(3, 5, 0, 0, owner)))  # foreign: no magic
    made.append(Message(payload(0, 9, NO_KEY, tag=TAG + 1), entry(3, 6, 0, 0, owner)))
    again = entry(3, 0, 4, 1, owner)  # the first batch redelivered: duplicates
    for index, seq in enumerate((0, 1, 2, 3)):
        made.append(Message(payload(0, seq, NO_KEY), again, index))
    made += [Message(payload(0, seq, NO_KEY), entry(4, seq, 0, 0, owner)) for seq in range(4, 40)]
    return made


def expected_rows(
    received: list[Message], stamps: list[int], brokers: list[str], threshold: int | None
) -> list[tuple[Any, ...]]:
    names = {0: "p-0"}
    rows = []
    for message, stamp, broker in zip(received, stamps, brokers, strict=True):
        data = message.payload
        if len(data) < HEADER.size or HEADER.unpack_from(data)[0] != MAGIC:
            continue
        _, _, _, _, producer, key, seq, intended, sent = HEADER.unpack_from(data)
        if threshold is not None and not sampled(producer, seq, threshold):
            continue
        mid = message.message_id
        rows.append(
            (
                names.get(producer, ""),
                producer,
                seq,
                None if key == NO_KEY else key_name(key),
                len(data),
                intended,
                sent,
                stamp,
                mid.ledger_id,
                mid.entry_id,
                mid.batch_index,
                message.redelivery_count,
                broker,
            )
        )
    return rows


@pytest.mark.parametrize("threshold", [None, 1 << 52, 0])
async def test_every_delivery_is_checked_counted_and_traced_as_received(
    fake_clock: FakeClock, threshold: int | None
) -> None:
    handler = FakeConsumer(fake_clock, [], move_at=20)
    received = handler.messages = messages(handler)
    seen = SeenSet("producer")
    counters = GroupCounters()
    plan = ConsumerPlan(
        group="g",
        name="c",
        topic="t",
        partitions=["t"],
        partitioned=False,
        subscription="s",
        sub_type="Exclusive",
        receiver_queue=10,
        ack_rate=0.0,
        initial_position="earliest",
    )
    runner = ConsumerRunner(
        plan,
        run_id="R",
        worker=0,
        tag=TAG,
        clock=fake_clock,
        counters=counters,
        seen=seen,
        pauser=Pauser(),
        writer=None,
        producer_names={0: "p-0"},  # producer 1 is not named: its rows say ""
        sample_threshold=threshold or 0,
        full_sample=threshold is None,
        stamps=False,
    )
    await runner.start(FakeDriver(handler))
    start_ns = fake_clock.wall_ns()
    async with anyio.create_task_group() as tg:
        tg.start_soon(runner.run)
        await fake_clock.run_until_idle()
        tg.cancel_scope.cancel()
    assert handler.acked == received  # strangers too, in order
    assert (runner.reconnections(), runner.reconnections()) == (1, 0)  # the move, counted once
    stamps = [start_ns + (i + 1) * 1_000_000 for i in range(len(received))]
    brokers = ["pulsar://one:6650"] * 20 + ["pulsar://two:6650"] * (len(received) - 20)
    runner.flush_rows()  # no writer: the rows stay in the handler's buffer
    ((_, pending),) = runner._handlers
    buffer = pending.rows
    assert isinstance(buffer, ColumnBuffer)
    rows = list(zip(*buffer.lists, strict=True)) if buffer.lists[0] else []
    assert buffer.columns == RECEIVE_COLUMNS
    assert rows == expected_rows(received, stamps, brokers, threshold)
    if threshold is not None and threshold > 0:
        assert 0 < len(rows) < len(received) - 3  # a real sample, not all or nothing
    assert (runner.foreign, runner.other_runs) == (2, 1)
    assert (seen.duplicates, seen.out_of_order) == (4, 1)
    assert bytes(seen.bitmaps[0][:41]) == b"\x01" * 40 + b"\x00"
    assert bytes(seen.bitmaps[1][:4]) == b"\x01\x01\x01\x00"
    assert counters.messages == len(received) - 2
    assert counters.bytes == 60 * (len(received) - 5) + 100 * 3
    assert list(counters.latencies) == [
        (stamp - HEADER.unpack_from(m.payload)[7]) // 1000
        for m, stamp in zip(received, stamps, strict=True)
        if len(m.payload) >= HEADER.size and HEADER.unpack_from(m.payload)[0] == MAGIC
    ]
    assert runner.last_receive_ns == stamps[-1]
