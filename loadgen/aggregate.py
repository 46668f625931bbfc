"""The runner's view of the run: every worker's ticks summed per second, per window and overall.

A second is *closed* once every worker has reported a later one (or at the end). Closing it
writes one `seconds` row per group, adds its histograms to the run totals (after the warm-up)
and to the current OMB window (10 s), and writes the HdrHistogram logs' interval. Only open
seconds keep histograms, so memory does not grow with the run's length.

A rate is messages over the time they flowed in. The seconds after the traffic ended (the
drain: late receipts, consumers catching up) hold few messages, so the run's totals and its
last OMB point measure each role's time up to that role's end (`close_all`), not to the last
closed second: 14,002 messages after a 1 s warm-up of an 8 s run at 2,000 msg/s are
2,000 msg/s over 7 s, as pulsar-perf says, not 1,750 over the 8 seconds that had ticks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final, TextIO

import msgspec
from hdrh.log import HistogramLogWriter

from emubroker.traceschema.loadgen import SecondRecord
from loadgen.messages import GroupTick, Tick
from loadgen.stats import Buckets, HistogramScratch, LatencySummary, add_buckets, summarize

__all__ = ["OMB_WINDOW", "Aggregator", "GroupInfo", "Window"]

OMB_WINDOW: Final = 10
"""Seconds per point of OMB's series (its `WorkloadGenerator` reports every 10 s)."""


class GroupInfo(msgspec.Struct, frozen=True):
    role: str
    group: str
    topic: str
    subscription: str | None = None


class _Sum:
    """One group's counts over some stretch of time.

    Latencies are HdrHistogram buckets (`loadgen.stats.Buckets`): a sum of seconds of a few
    messages each holds a few entries, where an HdrHistogram allocates and adds ~23k counters.
    """

    def __init__(self) -> None:
        self.messages = 0
        self.bytes = 0
        self.errors = 0
        self.reconnections = 0
        self.histogram: Buckets | None = None  # latencies (µs), None if there were none
        self.delays: Buckets | None = None  # publish delays (µs), None if there were none

    def add(self, tick: GroupTick) -> None:
        self.messages += tick.messages
        self.bytes += tick.payload_bytes
        self.errors += tick.errors
        self.reconnections += tick.reconnections
        if tick.histogram:
            self.histogram = add_buckets(self.histogram, tick.histogram)
        if tick.delay_histogram:
            self.delays = add_buckets(self.delays, tick.delay_histogram)

    def merge(self, other: _Sum) -> None:
        self.messages += other.messages
        self.bytes += other.bytes
        self.errors += other.errors
        self.reconnections += other.reconnections
        if other.histogram is not None:
            self.histogram = add_buckets(self.histogram, other.histogram)
        if other.delays is not None:
            self.delays = add_buckets(self.delays, other.delays)


class Window(msgspec.Struct):
    """Totals by role over a stretch of seconds (a console interval or an OMB point).

    `seconds` counts the closed seconds; `produce_seconds` and `consume_seconds` are the time
    each role's messages are a rate over (the same, but for a stretch the role ended in).
    """

    seconds: int
    produce_seconds: float
    consume_seconds: float
    produced: int
    produced_bytes: int
    errors: int
    consumed: int
    consumed_bytes: int
    backlog: int
    publish: LatencySummary | None
    end_to_end: LatencySummary | None
    publish_delay: LatencySummary | None


class _Span:
    """Sums by role over a stretch of seconds."""

    def __init__(self) -> None:
        self.seconds = 0
        self.first = 0  # its first second, in seconds after the run's start
        self.produce = _Sum()
        self.consume = _Sum()

    def add_second(self, offset: int) -> None:
        if not self.seconds:
            self.first = offset
        self.seconds += 1

    def length(self, end: float) -> float:
        """Its seconds, up to `end` (seconds after the run's start) if that comes sooner."""
        return max(0.0, min(float(self.seconds), end - self.first))

    def window(self, backlog: int, ends: tuple[float, float] = (math.inf, math.inf)) -> Window:
        """Its totals.

        `ends`: when production and consumption ended (seconds after the start), which
        shorten the time their rates are over.
        """
        return Window(
            seconds=self.seconds,
            produce_seconds=self.length(ends[0]),
            consume_seconds=self.length(ends[1]),
            produced=self.produce.messages,
            produced_bytes=self.produce.bytes,
            errors=self.produce.errors,
            consumed=self.consume.messages,
            consumed_bytes=self.consume.bytes,
            backlog=backlog,
            publish=summarize(self.produce.histogram),
            end_to_end=summarize(self.consume.histogram),
            publish_delay=summarize(self.produce.delays),
        )


class Aggregator:
    """Sums ticks; see the module docstring.

    Args:
        run_id: for the rows.
        groups: (role, group) -> what it is.
        workers: how many workers report.
        start_second: the run's first second (wall clock).
        warmup: seconds at the start left out of the run totals.
        phase_at: seconds after the start -> the phase's name.
        write_rows: takes the `seconds` rows of each closed second.
        hlogs: HdrHistogram logs for publish and end-to-end latency, or None.
    """

    def __init__(
        self,
        run_id: str,
        groups: dict[tuple[str, str], GroupInfo],
        *,
        workers: int,
        start_second: int,
        warmup: float,
        phase_at: Callable[[float], str],
        write_rows: Callable[[list[SecondRecord]], None],
        hlogs: tuple[TextIO, TextIO] | None = None,
    ) -> None:
        self.run_id = run_id
        self.groups = groups
        self._workers = workers
        self.start_second = start_second
        self._warmup = warmup
        self._phase_at = phase_at
        self._write_rows = write_rows
        self._open: dict[int, dict[tuple[str, str], _Sum]] = {}
        self._latest: dict[int, int] = {}  # worker -> latest second reported
        self.cumulative: dict[tuple[str, str], int] = {}  # messages so far per group
        self._produced: dict[str, int] = {}  # messages so far per topic, of its producer groups
        self.total = _Span()  # after the warm-up
        self.interval = _Span()  # since the console last printed
        self.omb = _Span()
        self.omb_points: list[Window] = []
        self.last: dict[tuple[str, str], tuple[int, _Sum]] = {}  # the latest closed second
        self.reconnections = 0
        self.closed_through = start_second - 1
        self._ends = (math.inf, math.inf)  # production's and consumption's ends (`close_all`)
        self._hlogs = None
        self._scratch = HistogramScratch()
        if hlogs is not None:
            self._hlogs = tuple(HistogramLogWriter(f) for f in hlogs)
            for writer in self._hlogs:
                writer.output_log_format_version()
                writer.output_comment(f"[StartTime: {start_second:.3f} (seconds since epoch)]")
                writer.output_base_time(start_second * 1000)
                writer.output_legend()

    def add(self, tick: Tick) -> None:
        """Take one worker's tick (late ticks for closed seconds go to the next open one)."""
        second = max(tick.second, self.closed_through + 1)
        sums = self._open.setdefault(second, {})
        for group_tick in tick.groups:
            key = (group_tick.role, group_tick.group)
            sums.setdefault(key, _Sum()).add(group_tick)
        self._latest[tick.worker] = max(self._latest.get(tick.worker, 0), tick.second)
        if len(self._latest) == self._workers:
            self.close_through(min(self._latest.values()))

    def backlog(self, group: str) -> int:
        """Receipted sends of the group's topic minus what the consumer group received."""
        info = self.groups[("consume", group)]
        produced = self._produced.get(info.topic, 0)
        return max(produced - self.cumulative.get(("consume", group), 0), 0)

    def total_backlog(self) -> int:
        return sum(self.backlog(group) for role, group in self.groups if role == "consume")

    def close_through(self, second: int) -> None:
        """Close every open second up to and including `second`."""
        for closing in sorted(s for s in self._open if s <= second):
            self._close(closing, self._open.pop(closing))
        self.closed_through = max(self.closed_through, second)

    def close_all(self, produce_end: float = math.inf, consume_end: float = math.inf) -> None:
        """Close every second at the end of the run.

        Args:
            produce_end: when production ended, in seconds after the start: the producers'
                schedule's end (or when they stopped) or their last receipt, whichever came
                later.
            consume_end: the same for consumption (the last delivery, at the earliest the
                end of the traffic).
        """
        self._ends = (produce_end, consume_end)
        if self._open:
            self.close_through(max(self._open))
        if self.omb.seconds:
            self.omb_points.append(self.omb.window(self.total_backlog(), self._ends))
            self.omb = _Span()

    def take_interval(self) -> Window:
        """The totals since the last call (for the console line)."""
        window = self.interval.window(self.total_backlog())
        self.interval = _Span()
        return window

    def _close(self, second: int, sums: dict[tuple[str, str], _Sum]) -> None:
        offset = second - self.start_second
        phase = self._phase_at(offset)
        counted = offset >= self._warmup
        # The second's sums by role first, then those into each span: one histogram addition
        # per group and a few per second, rather than one per group and span.
        produce, consume = _Sum(), _Sum()
        for key, total in sums.items():
            self.cumulative[key] = self.cumulative.get(key, 0) + total.messages
            if key[0] == "produce":
                # Kept by topic as it grows: the backlog of every consumer group, every second,
                # would otherwise go through every group (quadratic in the groups).
                topic = self.groups[key].topic
                self._produced[topic] = self._produced.get(topic, 0) + total.messages
            self.reconnections += total.reconnections
            self.last[key] = (second, total)
            (produce if key[0] == "produce" else consume).merge(total)
        for span in [self.interval, self.omb, *([self.total] if counted else [])]:
            span.produce.merge(produce)
            span.consume.merge(consume)
        self.interval.add_second(offset)
        self.omb.add_second(offset)
        if counted:
            self.total.add_second(offset)
        rows = [self._row(second, phase, key, total) for key, total in sorted(sums.items())]
        self._write_rows(rows)
        if self._hlogs is not None:
            start = float(offset)
            latencies = (produce.histogram, consume.histogram)
            for writer, buckets in zip(self._hlogs, latencies, strict=True):
                if buckets is not None and any(buckets.values()):
                    with self._scratch.holding(buckets) as histogram:
                        writer.output_interval_histogram(histogram, start, start + 1.0, 1000.0)
        if self.omb.seconds >= OMB_WINDOW:
            self.omb_points.append(self.omb.window(self.total_backlog(), self._ends))
            self.omb = _Span()

    def _row(self, second: int, phase: str, key: tuple[str, str], total: _Sum) -> SecondRecord:
        info = self.groups.get(key, GroupInfo(key[0], key[1], ""))
        summary = summarize(total.histogram)
        return SecondRecord(
            run_id=self.run_id,
            second=second,
            phase=phase,
            role=info.role,
            group=info.group,
            topic=info.topic,
            subscription=info.subscription,
            messages=total.messages,
            bytes=total.bytes,
            errors=total.errors,
            latency_mean_us=summary.mean if summary else None,
            latency_p50_us=summary.p50 if summary else None,
            latency_p95_us=summary.p95 if summary else None,
            latency_p99_us=summary.p99 if summary else None,
            latency_p999_us=summary.p999 if summary else None,
            latency_max_us=summary.max if summary else None,
            backlog=self.backlog(info.group) if info.role == "consume" else None,
            reconnections=total.reconnections,
        )

    def totals(self) -> Window:
        """The run's totals after the warm-up (rates up to each role's end: `close_all`)."""
        return self.total.window(self.total_backlog(), self._ends)
