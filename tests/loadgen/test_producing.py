"""The producer loop on a FakeClock with a fake client handler: pacing, identity, receipts."""

from __future__ import annotations

import zlib
from typing import Any

import anyio
import pytest

from loadgen.messages import ProducerPlan
from loadgen.payload import HEADER, NO_KEY, key_name, run_tag, sampled
from loadgen.producing import SEND_COLUMNS, GroupCounters, ProducerRunner
from loadgen.scenario import Batching, Keys
from loadgen.schedule import Segment
from protocol.clock import FakeClock

pytestmark = pytest.mark.anyio

FAKE_BROKER = "pulsar://fake:6650"


class FakeHandler:
    """Receipts every send at once (or fails the ones listed), recording when it was sent."""

    attachments = 1
    broker_url = FAKE_BROKER

    def __init__(self, clock: FakeClock, fail: set[int] = frozenset()) -> None:
        self.clock = clock
        self.fail = fail
        self.listener = None
        self.sends: list[tuple[float, bytes, str | None, int]] = []

    async def send_async(self, payload, *, key=None, sequence_id=None):
        self.sends.append((self.clock.now(), payload, key, sequence_id))
        if sequence_id in self.fail:
            self.listener(sequence_id, sequence_id, -1, -1, -1, RuntimeError("send timeout"))
        else:  # every message its own entry, unbatched
            self.listener(sequence_id, sequence_id, 7, len(self.sends) - 1, -1, None)

    async def flush(self) -> None: ...

    async def aclose(self) -> None: ...


class FakeDriver:
    stamps = False

    def __init__(self, handlers: list[FakeHandler]) -> None:
        self.handlers = iter(handlers)

    async def create_producer(self, topic, plan, listener):
        handler = next(self.handlers)
        handler.listener = listener
        return handler


def plan(
    segments: list[Segment], *, messages: int = -1, partitions: int = 1, keys: Keys | None = None
) -> ProducerPlan:
    return ProducerPlan(
        group="g",
        name="g-0-R",
        topic="persistent://public/default/t",
        partitions=[f"persistent://public/default/t-partition-{i}" for i in range(partitions)],
        partitioned=partitions > 1,
        first_index=4,
        segments=segments,
        seed=1,
        size=50,
        keys=keys or Keys(),
        batching=Batching(enabled=False),
        max_outstanding=10,
        messages=messages,
        poisson=False,
        send_timeout=30.0,
        chunking=False,
    )


async def start(
    clock: FakeClock, the_plan: ProducerPlan, handlers: list[FakeHandler]
) -> ProducerRunner:
    runner = ProducerRunner(
        the_plan,
        run_id="R",
        worker=0,
        tag=run_tag("R"),
        clock=clock,
        counters=GroupCounters(),
        writer=None,
        sample_threshold=0,
        full_sample=True,
    )
    await runner.start(FakeDriver(handlers))
    return runner


async def test_paced_sends_happen_at_their_intended_times(fake_clock: FakeClock) -> None:
    handler = FakeHandler(fake_clock)
    runner = await start(fake_clock, plan([Segment(0.0, 1.0, 4.0, 4.0)]), [handler])
    start_ns = fake_clock.wall_ns() + 2_000_000_000
    async with anyio.create_task_group() as tg:
        tg.start_soon(runner.run, fake_clock.now() + 2.0, start_ns)
        await fake_clock.run_until_idle()
    times = [t for t, *_ in handler.sends]
    assert times == pytest.approx([2.0 + 0.25 * i + times[0] - 2.0 for i in range(4)])
    assert 2.0 <= times[0] < 2.25
    for (sent_at, payload, key, sequence_id), expected_seq in zip(
        handler.sends, range(4), strict=True
    ):
        _, _, _, tag, producer, key_index, seq, intended, _sent = HEADER.unpack_from(payload)
        assert (tag, producer, key_index, seq, sequence_id, key) == (
            run_tag("R"),
            4,
            NO_KEY,
            expected_seq,
            expected_seq,
            None,
        )
        assert intended == start_ns + round((sent_at - 2.0) * 1e9)
        assert len(payload) == 50
    assert runner.acked == 4
    assert len(runner._counters.latencies) == 4  # one per receipt: the tick counts them


async def test_an_unlimited_segment_waits_for_its_start_and_stops_at_the_limit(
    fake_clock: FakeClock,
) -> None:
    handler = FakeHandler(fake_clock)
    runner = await start(fake_clock, plan([Segment(0.0, 100.0, 0.0, 0.0)], messages=5), [handler])
    async with anyio.create_task_group() as tg:
        tg.start_soon(runner.run, fake_clock.now() + 3.0, fake_clock.wall_ns() + 3_000_000_000)
        await fake_clock.run_until_idle()
    assert [t for t, *_ in handler.sends] == [3.0] * 5
    assert runner.first_send_ns == fake_clock.wall_ns()


async def test_keys_route_to_partitions_and_failures_are_tallied(fake_clock: FakeClock) -> None:
    handlers = [FakeHandler(fake_clock, fail={1}), FakeHandler(fake_clock)]
    runner = await start(
        fake_clock,
        plan(
            [Segment(0.0, 1.0, 20.0, 20.0)],
            partitions=2,
            keys=Keys(distribution="round_robin", count=16),
        ),
        handlers,
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(runner.run, fake_clock.now(), fake_clock.wall_ns())
        await fake_clock.run_until_idle()
    from protocol.client import partition_for_key

    for index, handler in enumerate(handlers):
        assert handler.sends
        assert {partition_for_key(key, 2) for _, _, key, _ in handler.sends} == {index}
        assert [seq for *_, seq in handler.sends] == list(range(len(handler.sends)))
    tallies = runner.tallies()
    assert [t.index for t in tallies] == [4, 5]
    assert tallies[0].failed == 1
    assert zlib.decompress(tallies[0].acked)[:3] == b"\x01\x00\x01"
    assert runner.acked == 20 - 1
    (first_rows, _) = (p.rows for p in runner._partitions)
    columns = dict(zip(SEND_COLUMNS, first_rows.lists, strict=True))
    assert columns["error"][1] == "RuntimeError('send timeout')"
    assert columns["receipt_ns"][1] is None
    assert columns["ledger_id"][1] == -1


class BatchingHandler(FakeHandler):
    """Receipts `batch` sends at once (the batch holding a `fail` sequence id fails whole)."""

    def __init__(self, clock: FakeClock, batch: int, fail: set[int] = frozenset()) -> None:
        super().__init__(clock, fail)
        self.batch = batch
        self.pending: list[int] = []
        self.outcomes: dict[int, tuple[Any, ...]] = {}  # sequence id -> its row's receipt part
        self.entries = 0

    async def send_async(self, payload, *, key=None, sequence_id=None):
        self.sends.append((self.clock.now(), payload, key, sequence_id))
        self.pending.append(sequence_id)
        if len(self.pending) == self.batch:
            await self.flush()

    async def flush(self) -> None:
        if not self.pending:
            return
        first, last = self.pending[0], self.pending[-1]
        now = self.clock.wall_ns()
        if self.fail & set(self.pending):
            error = RuntimeError("batch failed")
            self.listener(first, last, -1, -1, -1, error)
            for seq in self.pending:
                self.outcomes[seq] = (None, -1, -1, -1, repr(error))
        else:
            self.entries += 1
            self.listener(first, last, 9, self.entries, 0, None)
            for index, seq in enumerate(self.pending):
                self.outcomes[seq] = (now, 9, self.entries, index, None)
        self.pending = []
        await self.clock.sleep(0.002)  # receipts take a while: the next batch's times differ


@pytest.mark.parametrize("threshold", [None, 1 << 52])
@pytest.mark.parametrize("keyed", [False, True])
async def test_batched_receipts_trace_every_message_as_it_was_sent(
    fake_clock: FakeClock, threshold: int | None, keyed: bool
) -> None:
    handlers = [BatchingHandler(fake_clock, 3, fail={4}), BatchingHandler(fake_clock, 5)]
    the_plan = plan(
        [Segment(0.0, 1.0, 40.0, 40.0)],
        partitions=2,
        keys=Keys(distribution="random", count=8) if keyed else None,
    )
    runner = ProducerRunner(
        the_plan,
        run_id="R",
        worker=0,
        tag=run_tag("R"),
        clock=fake_clock,
        counters=GroupCounters(),
        writer=None,
        sample_threshold=threshold or 0,
        full_sample=threshold is None,
    )
    await runner.start(FakeDriver(handlers))

    async def run_and_finish() -> None:
        await runner.run(fake_clock.now(), fake_clock.wall_ns())
        await runner.finish()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_and_finish)
        await fake_clock.run_until_idle()
    kept_total = 0
    for handler, partition in zip(handlers, runner._partitions, strict=True):
        assert handler.sends
        assert not handler.pending
        expected = []
        for _, payload, key, seq in handler.sends:
            _, _, _, _, producer, key_index, _, intended, sent = HEADER.unpack_from(payload)
            if threshold is not None and not sampled(producer, seq, threshold):
                continue
            assert key == (None if key_index == NO_KEY else key_name(key_index))
            receipt, ledger, entry, batch_index, error = handler.outcomes[seq]
            expected.append(
                (seq, key, intended, sent, receipt, ledger, entry, batch_index, error, FAKE_BROKER)
            )
        rows = list(zip(*partition.rows.lists, strict=True))
        assert partition.rows.columns == SEND_COLUMNS
        assert rows == expected
        kept_total += len(rows)
    sent_total = sum(len(h.sends) for h in handlers)
    assert sent_total == 40
    if threshold is not None:
        assert 0 < kept_total < sent_total
    tallies = runner.tallies()
    assert tallies[0].failed == 3
    assert zlib.decompress(tallies[0].acked)[3:6] == b"\x00\x00\x00"
    assert runner.acked == 40 - 3
    assert len(runner._counters.latencies) == 40 - 3
    assert runner._counters.errors == 3


class ReconnectingHandler(FakeHandler):
    """Counts how often its attachment count is read; re-attaches when told to."""

    reads = 0

    @property  # type: ignore[override]
    def attachments(self) -> int:
        ReconnectingHandler.reads += 1
        return 1

    on_attach: Any = None

    def reattach(self) -> None:
        self.on_attach()


async def test_reconnections_are_counted_as_they_happen_not_summed_over_partitions(
    fake_clock: FakeClock,
) -> None:
    # A tick asks every second; at scale a group has thousands of partitions, so the count must
    # not visit each handler (each attachment tells the runner instead).
    handlers = [ReconnectingHandler(fake_clock) for _ in range(50)]
    runner = await start(fake_clock, plan([], partitions=50), list(handlers))
    ReconnectingHandler.reads = 0
    assert runner.reconnections() == 0
    handlers[3].reattach()
    handlers[40].reattach()
    handlers[3].reattach()
    assert runner.reconnections() == 3
    assert runner.reconnections() == 0
    assert ReconnectingHandler.reads == 0
