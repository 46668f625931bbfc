"""What loadgen's own loops cost per message, against a client that costs nothing.

Usage: python bench/loadgen_hotpath.py [--messages N] [--batch B] [--size S] [--rounds R]

Runs loadgen's producer loop (`ProducerRunner.run` and its receipt listener) and consumer loop
(`ConsumerRunner`'s receive loop) in this process against stand-in handlers that do no I/O:
the producer's hands every message straight back, receipting `--batch` messages at a time as a
batching client does; the consumer's hands out prebuilt `protocol.client` messages (a batch of
`--batch` per entry) whose payloads carry loadgen's header. Beside them, the bare loops a
client application would run against the same stand-ins (`await send_async(payload)`,
`acknowledge(await receive())`). The figure is CPU time per message (`time.process_time`: this
process, the trace writer's thread included), so other load on the machine barely moves it;
loadgen's own cost is each loop's time minus its bare loop's.

Only public constructors are used, so the same script measures another source tree:
`PYTHONPATH=/tmp/base python bench/loadgen_hotpath.py` (e.g. `git archive main | tar -x -C
/tmp/base`) runs that tree's loadgen.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import weakref
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio

import loadgen
from loadgen.checks import SeenSet
from loadgen.consuming import ConsumerRunner, Pauser
from loadgen.messages import ConsumerPlan, ProducerPlan
from loadgen.payload import HEADER, MAGIC, NO_KEY, VERSION, run_tag, sampling_threshold
from loadgen.producing import GroupCounters, ProducerRunner
from loadgen.scenario import Batching, Keys
from loadgen.schedule import UNLIMITED, Segment
from loadgen.trace.writer import TableWriter
from protocol.client.entry import ReceivedEntry
from protocol.client.received import Message
from protocol.clock import AnyioClock

RUN_ID = "hotpath"


class _Done(Exception):
    """The stand-in consumer ran out of messages."""


class _Producer:
    """Receipts every `batch` messages at once, as a batching client does; no I/O."""

    attachments = 1
    broker_url = "pulsar://127.0.0.1:6650"

    def __init__(self, batch: int) -> None:
        self._batch = batch
        self._first = 0
        self._count = 0
        self._entry = 0
        self.listener: Any = None

    async def send_async(
        self, payload: bytes, *, key: str | None = None, sequence_id: int | None = None
    ) -> None:
        self._count += 1
        if self._count == self._batch:
            self.flush_now()

    def flush_now(self) -> None:
        if self._count:
            first = self._first
            self._first += self._count
            self._count = 0
            self._entry += 1
            self.listener(first, self._first - 1, 7, self._entry, 0, None)

    async def flush(self) -> None:
        self.flush_now()

    async def aclose(self) -> None:
        pass


class _Driver:
    stamps = False

    def __init__(self, handler: Any) -> None:
        self.handler = handler

    async def create_producer(self, topic: str, plan: Any, listener: Any) -> Any:
        self.handler.listener = listener
        return self.handler

    async def subscribe(self, topic: str, plan: Any) -> Any:
        return self.handler


class _Consumer:
    """Hands out prebuilt messages, then raises `_Done`; acknowledging does nothing."""

    attachments = 1
    broker_url = "pulsar://127.0.0.1:6650"

    def __init__(self, messages: list[Message]) -> None:
        self._next = iter(messages).__next__

    async def receive(self) -> Message:
        try:
            return self._next()
        except StopIteration:
            raise _Done from None

    def acknowledge(self, message: Any) -> None:
        pass

    async def aclose(self) -> None:
        pass


def _messages(n: int, batch: int, size: int) -> list[Message]:
    """`n` messages of producer 0, `batch` to an entry, with loadgen's header."""
    tag = run_tag(RUN_ID)
    padding = bytes(size - HEADER.size)
    messages = []
    owner = _Consumer([])  # the entries' weak consumer reference needs a live object
    ref = weakref.ref(owner)
    entry = None
    for seq in range(n):
        if seq % batch == 0:
            entry_id = seq // batch
            entry = ReceivedEntry(
                7,
                entry_id,
                (7, entry_id),
                -1,
                0,
                "t",
                ref,
                None,  # type: ignore[arg-type]  # metadata fields: never read here
                batch,
                b"",
                0,
            )
        now = time.time_ns()
        payload = HEADER.pack(MAGIC, VERSION, 0, tag, 0, NO_KEY, seq, now, now) + padding
        messages.append(Message(payload, entry, seq % batch))  # type: ignore[arg-type]
    _messages.owner = owner  # type: ignore[attr-defined]
    return messages


def _writer(tmp: str, table: str, sample: float) -> TableWriter | None:
    return TableWriter(f"{tmp}/{table}", table, prefix="w0") if sample > 0 else None


async def produce(n: int, batch: int, size: int, sample: float, tmp: str) -> float:
    plan = ProducerPlan(
        group="p",
        name="p",
        topic="t",
        partitions=["t"],
        partitioned=False,
        first_index=0,
        segments=[Segment(0.0, 3600.0, UNLIMITED, UNLIMITED)],
        seed=1,
        size=size,
        keys=Keys(),
        batching=Batching(enabled=True, max_delay_ms=10),
        max_outstanding=5000,
        messages=n,
        poisson=False,
        send_timeout=30.0,
        chunking=False,
    )
    clock = AnyioClock()
    writer = _writer(tmp, "sends", sample)
    runner = ProducerRunner(
        plan,
        run_id=RUN_ID,
        worker=0,
        tag=run_tag(RUN_ID),
        clock=clock,
        counters=GroupCounters(),
        writer=writer,
        sample_threshold=sampling_threshold(sample),
        full_sample=sample >= 1.0,
    )
    await runner.start(_Driver(_Producer(batch)))
    started = time.process_time()
    await runner.run(clock.now(), clock.wall_ns())
    await runner.finish()
    runner.flush_rows()
    if writer is not None:
        writer.close()
    return time.process_time() - started


async def consume(messages: list[Message], sample: float, tmp: str) -> float:
    plan = ConsumerPlan(
        group="c",
        name="c",
        topic="t",
        partitions=["t"],
        partitioned=False,
        subscription="s",
        sub_type="Exclusive",
        receiver_queue=5000,
        ack_rate=0.0,
        initial_position="earliest",
    )
    writer = _writer(tmp, "receives", sample)
    runner = ConsumerRunner(
        plan,
        run_id=RUN_ID,
        worker=0,
        tag=run_tag(RUN_ID),
        clock=AnyioClock(),
        counters=GroupCounters(),
        seen=SeenSet("producer"),
        pauser=Pauser(),
        writer=writer,
        producer_names={0: "p"},
        sample_threshold=sampling_threshold(sample),
        full_sample=sample >= 1.0,
        stamps=False,
    )
    await runner.start(_Driver(_Consumer(messages)))
    started = time.process_time()
    try:
        await runner.run()
    except BaseException as exc:  # the task group wraps `_Done`
        if not isinstance(exc, _Done) and not exc.__class__.__name__.endswith("ExceptionGroup"):
            raise
    runner.flush_rows()
    if writer is not None:
        writer.close()
    return time.process_time() - started


async def bare_produce(n: int, batch: int, size: int) -> float:
    producer = _Producer(batch)
    producer.listener = lambda *args: None
    payload = b"x" * size
    send = producer.send_async
    started = time.process_time()
    for _ in range(n):
        await send(payload)
    await producer.flush()
    return time.process_time() - started


async def bare_consume(messages: list[Message]) -> float:
    consumer = _Consumer(messages)
    receive, acknowledge = consumer.receive, consumer.acknowledge
    started = time.process_time()
    try:
        while True:
            acknowledge(await receive())
    except _Done:
        pass
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000, help="messages per receipt / entry")
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    n = args.messages
    cases: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            runs: dict[str, Callable[[], Awaitable[float]]] = {
                "produce, bare": partial(bare_produce, n, args.batch, args.size)
            }
            for label, sample in (("trace none", 0.0), ("trace 1 %", 0.01), ("trace all", 1.0)):
                runs[f"produce, loadgen {label}"] = partial(
                    produce, n, args.batch, args.size, sample, f"{tmp}/p{round_}{sample}"
                )
            messages = _messages(n, args.batch, args.size)
            runs["consume, bare"] = partial(bare_consume, messages)
            for label, sample in (("trace none", 0.0), ("trace 1 %", 0.01), ("trace all", 1.0)):
                runs[f"consume, loadgen {label}"] = partial(
                    consume, messages, sample, f"{tmp}/c{round_}{sample}"
                )
            for name, run in runs.items():
                cases.setdefault(name, []).append(anyio.run(run) / n * 1e6)
    print(f"loadgen from {loadgen.__file__}; {n:,} messages, {args.batch} a batch, {args.size} B")
    print(f"{'case':<32} {'CPU us/msg':>10} {'beyond bare':>12}")
    for name, values in cases.items():
        cpu = statistics.median(values)
        bare = statistics.median(cases[name.split(",")[0] + ", bare"])
        extra = f"{cpu - bare:>12.2f}" if "loadgen" in name else ""
        print(f"{name:<32} {cpu:>10.2f} {extra}")


if __name__ == "__main__":
    main()
