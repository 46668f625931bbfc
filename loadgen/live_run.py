"""A run while it goes: its state and the tasks that drive it (`loadgen.runner`'s).

`LiveRun` holds what the workers reported (their seconds go to the `Aggregator`, their
`ProducersDone` and `Final` here), fires the scenario's timed events, shows progress on the
console, turns Ctrl-C into a stop, and decides when production and consumption ended and when
the consumers drained.
"""

from __future__ import annotations

import secrets
import signal
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
import msgspec
from rich.live import Live

from emubroker.traceschema.loadgen import EventRecord
from loadgen.control import ControlError
from loadgen.durations import enc_hook
from loadgen.events import PauseConsumers, ResumeConsumers, event_target
from loadgen.local import ClusterStartError
from loadgen.messages import Final as FinalReport
from loadgen.messages import Pause, ProducersDone, Resume, StopProducers, Tick
from loadgen.report import dashboard, perf_lines

if TYPE_CHECKING:
    from rich.console import Console

    from loadgen.aggregate import Aggregator
    from loadgen.control import ClusterControl
    from loadgen.options import RunOptions
    from loadgen.pool import WorkerLink
    from loadgen.scenario import Scenario
    from protocol.clock import Clock

__all__ = ["LiveRun", "new_run_id"]

TICK_GRACE: Final = 1.2
"""Seconds after a second ends before the console counts it (the workers' ticks are in)."""


def new_run_id(clock: Clock) -> str:
    stamp = datetime.fromtimestamp(clock.wall_ns() / 1e9, UTC)
    return f"{stamp:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


class LiveRun:
    """The state of one run while it goes."""

    def __init__(
        self,
        scenario: Scenario,
        options: RunOptions,
        console: Console,
        clock: Clock,
        run_id: str | None = None,
    ) -> None:
        self.scenario = scenario
        self.options = options
        self.console = console
        self.clock = clock
        self.run_id = run_id or new_run_id(clock)
        self.run_dir = Path(options.trace_dir or f"runs/{self.run_id}")
        self.events: list[EventRecord] = []
        self.event_lines: list[str] = []
        self.done: dict[int, ProducersDone] = {}
        self.finals: dict[int, FinalReport] = {}
        self.workers: Sequence[WorkerLink] = []
        self.stopping = False
        self.traffic_end_ns: int | None = None  # the schedule's end, or when it was stopped

    async def broadcast(self, message: Any) -> None:
        for worker in self.workers:
            await worker.send(message)

    async def listen(self, worker: WorkerLink, aggregator: Aggregator) -> None:
        while worker.index not in self.finals:
            match await worker.receive():
                case Tick() as tick:
                    aggregator.add(tick)
                case ProducersDone() as done:
                    self.done[worker.index] = done
                case FinalReport() as final:
                    self.finals[worker.index] = final
                case _:
                    pass

    async def fire_events(self, control: ClusterControl, start: float, start_ns: int) -> None:
        async with anyio.create_task_group() as tg:
            for index, event in enumerate(sorted(self.scenario.events, key=lambda e: e.at)):
                await self.clock.sleep_until(start + event.at)
                if self.stopping:
                    return
                fired = self.clock.wall_ns()
                try:
                    match event:
                        case PauseConsumers(group=group, duration=duration):
                            await self.broadcast(Pause(group=group))
                            if duration is not None:
                                tg.start_soon(self._resume_later, group, duration)
                            detail = "paused"
                        case ResumeConsumers(group=group):
                            await self.broadcast(Resume(group=group))
                            detail = "resumed"
                        case _:
                            detail = await control.apply(event)
                    outcome = "ok"
                except (ControlError, ClusterStartError, ValueError, OSError) as exc:
                    outcome, detail = "error", str(exc)
                record = EventRecord(
                    run_id=self.run_id,
                    index=index,
                    at_s=float(event.at),
                    action=type(event).__name__,
                    target=event_target(event),
                    params=msgspec.json.encode(event, enc_hook=enc_hook).decode(),
                    fired_ns=fired,
                    finished_ns=self.clock.wall_ns(),
                    outcome=outcome,
                    detail=detail,
                )
                self.events.append(record)
                offset = (fired - start_ns) / 1e9
                line = f"{offset:7.2f}s {record.action} {record.target}: {outcome} {detail}"
                self.event_lines.append(line)
                if not self.options.dashboard:
                    self.console.out(f"event {line}", highlight=False)

    async def _resume_later(self, group: str, delay: float) -> None:
        await self.clock.sleep(delay)
        await self.broadcast(Resume(group=group))

    async def show(
        self, aggregator: Aggregator, start: float, produce: bool, consume: bool
    ) -> None:
        # Seconds are summed once every worker has reported them, a moment after they end.
        await self.clock.sleep_until(start + TICK_GRACE)
        aggregator.take_interval()
        if self.options.dashboard:
            with Live(console=self.console, refresh_per_second=2, transient=False) as live:
                while True:
                    live.update(dashboard(aggregator, self.event_lines, f"loadgen {self.run_id}"))
                    await self.clock.sleep(1.0)
        while True:
            await self.clock.sleep(self.options.stats_interval)
            for line in perf_lines(aggregator.take_interval(), produce=produce, consume=consume):
                self.console.out(line, highlight=False)

    async def watch_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signals reach the main thread only (a run started from another thread)
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                if self.stopping:
                    continue
                self.stopping = True
                self.traffic_end_ns = self.clock.wall_ns()
                self.console.out(
                    "stopping: finishing sends and draining consumers", highlight=False
                )
                await self.broadcast(StopProducers())

    def ends(self, start_ns: int) -> tuple[float, float]:
        """When production and consumption ended, in seconds after `start_ns`.

        Their messages are a rate over the time up to there (`Aggregator.close_all`).

        Production ended when the producers stopped sending or got their last receipt,
        whichever was later; consumption with the last delivery, but not before the traffic
        ended (a consumer that got nothing at the end was still measuring).
        """
        finals = self.finals.values()
        produce_end = max((f.produce_end_ns for f in finals if f.produce_end_ns), default=None)
        traffic_end = produce_end or self.traffic_end_ns or self.clock.wall_ns()
        last_receive = max((f.last_receive_ns for f in finals if f.last_receive_ns), default=0)
        consume_end = max(traffic_end, last_receive)
        return (
            ((produce_end or traffic_end) - start_ns) / 1e9,
            (consume_end - start_ns) / 1e9,
        )

    def drained(self, aggregator: Aggregator) -> bool:
        acked_by_topic: dict[str, int] = {}
        for done in self.done.values():
            for group, acked in done.acked.items():
                topic = aggregator.groups[("produce", group)].topic
                acked_by_topic[topic] = acked_by_topic.get(topic, 0) + acked
        for (role, group), info in aggregator.groups.items():
            if role == "consume" and aggregator.cumulative.get(
                (role, group), 0
            ) < acked_by_topic.get(info.topic, 0):
                return False
        return True
