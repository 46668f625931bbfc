"""A worker process: runs its share of the producers and consumers and reports to the runner.

    python -m loadgen.workers        (started by the runner; speaks `loadgen.messages` frames)

Several workers let loadgen use every core (`--workers N`): each is a process with its own
client and event loop. The runner assigns producers and consumers round robin, alternating
between the two, so that one producer and one consumer land on different workers.

Life of a worker: read the `WorkerPlan`; subscribe its consumers, then create its producers;
say `Ready`; wait for `Go` (a wall-clock start shared by every worker); send on schedule and
report a `Tick` each second; say `ProducersDone` when its producers have their receipts; keep
consuming until `Stop`; write its traces and report `Final`. Stdout carries only frames: the
process's file descriptor 1 is pointed at stderr, where logs (and the official client's) go.
"""

from __future__ import annotations

import cProfile
import logging
import os
import sys
from collections.abc import Callable
from typing import IO, Any, Protocol

import anyio
import anyio.abc

from loadgen.checks import SeenSet
from loadgen.consuming import ConsumerRunner, Pauser, order_of
from loadgen.drivers import open_driver
from loadgen.messages import (
    Final,
    Go,
    GroupTick,
    Pause,
    ProducersDone,
    Ready,
    Resume,
    Stop,
    StopProducers,
    Tick,
    ToRunner,
    ToWorker,
    WorkerFailed,
    WorkerPlan,
)
from loadgen.payload import run_tag, sampling_threshold
from loadgen.producing import GroupCounters, ProducerRunner
from loadgen.stats import buckets_of
from loadgen.trace.writer import TableWriter
from protocol import rpc
from protocol.client import Connector
from protocol.clock import AnyioClock, Clock

__all__ = ["Channel", "main", "run_worker"]

logger = logging.getLogger(__name__)

_READ_SIZE = 65_536


class Channel(Protocol):
    """The worker's side of its link to the runner (a pipe, or memory for in-process workers)."""

    async def send(self, message: ToRunner) -> None: ...

    async def receive(self) -> ToWorker:
        """The next command; raises `EOFError` once the runner is gone."""
        ...


class _Channel:
    """Frames to the runner (a stdout file) and from it (the stdin descriptor), used off-loop."""

    def __init__(self, reader: int, writer: IO[bytes]) -> None:
        self._reader = reader
        self._writer = writer
        self._decoder: rpc.RpcDecoder[ToWorker] = rpc.RpcDecoder(ToWorker)
        self._lock = anyio.Lock()

    async def send(self, message: ToRunner) -> None:
        data = rpc.encode(message)
        async with self._lock:
            await anyio.to_thread.run_sync(self._write, data)

    def _write(self, data: bytes) -> None:
        self._writer.write(data)
        self._writer.flush()

    async def receive(self) -> ToWorker:
        """The next command.

        Raises:
            EOFError: the runner closed our stdin (it is gone: stop).
        """
        while (message := self._decoder.next_message()) is None:
            data = await anyio.to_thread.run_sync(os.read, self._reader, _READ_SIZE)
            if not data:
                raise EOFError("the runner closed the channel")
            self._decoder.feed(data)
        return message


class _Worker:
    def __init__(self, plan: WorkerPlan, channel: Channel, clock: Clock) -> None:
        self.plan = plan
        self.channel = channel
        self.clock = clock
        threshold = sampling_threshold(plan.trace_sample)
        self.full = plan.trace_sample >= 1.0
        self.threshold = threshold
        self.tag = run_tag(plan.run_id)
        self.counters: dict[tuple[str, str], GroupCounters] = {}
        self.seen: dict[str, SeenSet] = {}
        self.pausers: dict[str, Pauser] = {}
        tracing = plan.trace_sample > 0
        prefix = f"w{plan.worker}"
        self.send_writer = (
            TableWriter(f"{plan.trace_dir}/sends", "sends", prefix=prefix)
            if tracing and plan.producers
            else None
        )
        self.receive_writer = (
            TableWriter(f"{plan.trace_dir}/receives", "receives", prefix=prefix)
            if tracing and plan.consumers
            else None
        )
        self.producers: list[ProducerRunner] = []
        self.consumers: list[ConsumerRunner] = []

    def _counters(self, role: str, group: str) -> GroupCounters:
        return self.counters.setdefault((role, group), GroupCounters())

    async def setup(self, stamps: bool, driver: Any) -> None:
        plan = self.plan
        for consumer_plan in plan.consumers:
            group = consumer_plan.group
            seen = self.seen.setdefault(group, SeenSet(order_of(consumer_plan.sub_type)))
            runner = ConsumerRunner(
                consumer_plan,
                run_id=plan.run_id,
                worker=plan.worker,
                tag=self.tag,
                clock=self.clock,
                counters=self._counters("consume", group),
                seen=seen,
                pauser=self.pausers.setdefault(group, Pauser()),
                writer=self.receive_writer,
                producer_names=plan.producer_names,
                sample_threshold=self.threshold,
                full_sample=self.full,
                stamps=stamps,
            )
            await runner.start(driver)
            self.consumers.append(runner)
        for producer_plan in plan.producers:
            runner_p = ProducerRunner(
                producer_plan,
                run_id=plan.run_id,
                worker=plan.worker,
                tag=self.tag,
                clock=self.clock,
                counters=self._counters("produce", producer_plan.group),
                writer=self.send_writer,
                sample_threshold=self.threshold,
                full_sample=self.full,
            )
            await runner_p.start(driver)
            self.producers.append(runner_p)

    def tick(self, second: int) -> Tick:
        reconnections: dict[tuple[str, str], int] = {}
        sizes: dict[str, int] = {}
        for p in self.producers:
            key = ("produce", p.plan.group)
            reconnections[key] = reconnections.get(key, 0) + p.reconnections()
            sizes[p.plan.group] = p.plan.size
        for group, size in sizes.items():
            # The second's receipts, one latency each (the producers' listener), rather than a
            # sum over every partition of every producer every second (thousands at scale).
            counters = self.counters[("produce", group)]
            receipted = len(counters.latencies)
            counters.messages += receipted
            counters.bytes += receipted * size
        for c in self.consumers:
            key = ("consume", c.plan.group)
            reconnections[key] = reconnections.get(key, 0) + c.reconnections()
        groups = []
        for (role, group), counters in self.counters.items():
            latencies = counters.latencies
            histogram = buckets_of(latencies) if latencies else None
            delays = counters.delays
            delay_histogram = buckets_of(delays) if delays else None
            groups.append(
                GroupTick(
                    role="produce" if role == "produce" else "consume",
                    group=group,
                    messages=counters.messages,
                    payload_bytes=counters.bytes,
                    errors=counters.errors,
                    histogram=histogram,
                    delay_histogram=delay_histogram,
                    reconnections=reconnections.get((role, group), 0),
                )
            )
            counters.messages = counters.bytes = counters.errors = 0
            del latencies[:]
            del delays[:]
        return Tick(worker=self.plan.worker, second=second, groups=groups)

    async def tick_loop(self) -> None:
        clock = self.clock
        interval = self.plan.tick_interval
        while True:
            wall = clock.wall_ns() / 1e9
            boundary = (int(wall / interval) + 1) * interval
            await clock.sleep_until(clock.now() + (boundary - wall))
            await self.channel.send(self.tick(int(boundary - interval)))

    async def run_producers(self, start_ns: int, done: Callable[[], None]) -> None:
        clock = self.clock
        start_mono = clock.now() + (start_ns - clock.wall_ns()) / 1e9
        async with anyio.create_task_group() as tg:
            for producer in self.producers:
                tg.start_soon(producer.run, start_mono, start_ns)
        for producer in self.producers:
            await producer.finish()
            producer.flush_rows()
        acked: dict[str, int] = {}
        for producer in self.producers:
            acked[producer.plan.group] = acked.get(producer.plan.group, 0) + producer.acked
        await self.channel.send(ProducersDone(worker=self.plan.worker, acked=acked))
        done()

    def final(self) -> Final:
        for consumer in self.consumers:
            consumer.flush_rows()
        rows = {}
        for table, writer in (("sends", self.send_writer), ("receives", self.receive_writer)):
            if writer is not None:
                writer.close()
                rows[table] = writer.rows_written
        foreign: dict[str, int] = {}
        for consumer in self.consumers:
            foreign[consumer.plan.group] = foreign.get(consumer.plan.group, 0) + consumer.foreign
        subscriptions = {c.plan.group: c.plan.subscription for c in self.consumers}
        return Final(
            worker=self.plan.worker,
            producers=[t for p in self.producers for t in p.tallies()],
            consumers=[
                seen.tally(group, subscriptions[group], foreign.get(group, 0))
                for group, seen in self.seen.items()
            ],
            rows=rows,
            first_send_ns=min(
                (p.first_send_ns for p in self.producers if p.first_send_ns), default=None
            ),
            last_receive_ns=max(
                (c.last_receive_ns for c in self.consumers if c.last_receive_ns), default=None
            ),
            produce_end_ns=max((p.end_ns for p in self.producers if p.end_ns), default=None),
        )


async def run_worker(
    channel: Channel, clock: Clock | None = None, *, connector: Connector | None = None
) -> None:
    """Serve one run over `channel` (the body of a worker process, or an in-process task).

    `connector` opens the native client's transports (see `loadgen.drivers.open_driver`).
    """
    clock = clock or AnyioClock()
    plan = await channel.receive()
    if not isinstance(plan, WorkerPlan):
        raise RuntimeError(f"expected a plan, got {plan!r}")
    worker = _Worker(plan, channel, clock)
    try:
        async with open_driver(plan.client, plan.service_url, clock, connector=connector) as driver:
            await worker.setup(driver.stamps, driver)
            await channel.send(Ready(worker=plan.worker))
            await _serve(worker)
            for producer in worker.producers:
                producer.stopping = True
            for consumer in worker.consumers:
                await consumer.close()
    except Exception as exc:  # the task boundary: the runner reports it
        logger.exception("worker %d failed", plan.worker)
        await channel.send(WorkerFailed(worker=plan.worker, error=_describe(exc)))
        return
    await channel.send(worker.final())


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _describe(exc.exceptions[0])
    return f"{type(exc).__name__}: {exc}"


async def _serve(worker: _Worker) -> None:
    """Run from `Go` to `Stop`."""
    channel = worker.channel
    command = await channel.receive()
    while not isinstance(command, Go | Stop):
        command = await channel.receive()
    if isinstance(command, Stop):
        return
    start_ns = command.start_ns
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.tick_loop)
        for consumer in worker.consumers:
            tg.start_soon(consumer.run)
        tg.start_soon(worker.run_producers, start_ns, lambda: None)
        while True:
            match await channel.receive():
                case Pause(group=group):
                    if group in worker.pausers:
                        worker.pausers[group].pause()
                case Resume(group=group):
                    if group in worker.pausers:
                        worker.pausers[group].resume()
                case StopProducers():
                    for producer in worker.producers:
                        producer.stopping = True
                case Stop():
                    await channel.send(worker.tick(int(worker.clock.wall_ns() // 1_000_000_000)))
                    tg.cancel_scope.cancel()
                    return
                case _:
                    pass


def main() -> int:
    # Frames go to the original stdout; everything else written to fd 1 goes to stderr.
    frames = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    logging.basicConfig(
        level=os.environ.get("LOADGEN_WORKER_LOG", "WARNING"),
        format="%(asctime)s worker %(levelname)s %(name)s: %(message)s",
    )
    channel = _Channel(sys.stdin.fileno(), frames)
    # LOADGEN_WORKER_PROFILE=PREFIX writes each worker's cProfile to PREFIX-<pid>.prof (bench/).
    profile = os.environ.get("LOADGEN_WORKER_PROFILE")
    profiler = cProfile.Profile() if profile else None
    try:
        if profiler is not None:
            profiler.enable()
        anyio.run(run_worker, channel, backend="asyncio")
    except EOFError:
        return 1
    finally:
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(f"{profile}-{os.getpid()}.prof")
    return 0


if __name__ == "__main__":
    sys.exit(main())
