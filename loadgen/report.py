"""What a run tells people: console lines, a live dashboard, the summary and OMB's result JSON.

The periodic and final lines have pulsar-perf's shape; the OMB result has OMB's field names, so
OMB's chart scripts draw loadgen runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hdrh.histogram import HdrHistogram
from rich.console import Group
from rich.table import Table
from rich.text import Text

from loadgen.aggregate import Aggregator, Window
from loadgen.checks import CheckReport
from loadgen.stats import LatencySummary, histogram_from, summarize

__all__ = ["check_lines", "dashboard", "final_lines", "omb_result", "perf_lines"]


def _ms(value: float) -> str:
    return f"{value / 1000.0:.3f}"


def _latency(summary: LatencySummary | None) -> str:
    if summary is None:
        return (
            "Latency: mean: - ms - med: - - 95pct: - - 99pct: - - 99.9pct: - - 99.99pct: - - Max: -"
        )
    return (
        f"Latency: mean: {_ms(summary.mean)} ms - med: {_ms(summary.p50)} - "
        f"95pct: {_ms(summary.p95)} - 99pct: {_ms(summary.p99)} - 99.9pct: {_ms(summary.p999)} - "
        f"99.99pct: {_ms(summary.p9999)} - Max: {_ms(summary.max)}"
    )


def _per_second(count: float, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


def perf_lines(window: Window, *, produce: bool, consume: bool) -> list[str]:
    """pulsar-perf's periodic lines for `window` (produced and/or received)."""
    lines = []
    if produce:
        seconds = window.produce_seconds
        rate = _per_second(window.produced, seconds)
        mbit = _per_second(window.produced_bytes * 8 / 1e6, seconds)
        lines.append(
            f"Throughput produced: {window.produced:,} msg --- {rate:,.1f} msg/s --- "
            f"{mbit:,.3f} Mbit/s --- failure {_per_second(window.errors, seconds):,.1f} msg/s"
            f" --- {_latency(window.publish)}"
        )
    if consume:
        seconds = window.consume_seconds
        rate = _per_second(window.consumed, seconds)
        mbit = _per_second(window.consumed_bytes * 8 / 1e6, seconds)
        lines.append(
            f"Throughput received: {window.consumed:,} msg --- {rate:,.1f} msg/s --- "
            f"{mbit:,.3f} Mbit/s --- backlog {window.backlog:,} msg --- "
            f"{_latency(window.end_to_end)}"
        )
    return lines


def final_lines(totals: Window, *, produce: bool, consume: bool) -> list[str]:
    """pulsar-perf's closing 'Aggregated' lines.

    The rates are over the time from the warm-up's end to each role's end (the header says
    how long), not over the drain seconds after it.
    """
    spans = [
        (what, seconds)
        for what, seconds, shown in (
            ("produced", totals.produce_seconds, produce),
            ("received", totals.consume_seconds, consume),
        )
        if shown
    ]
    if len({f"{seconds:.1f}" for _what, seconds in spans}) <= 1:
        over = f" over {spans[0][1]:.1f} s" if spans else ""
        lines = [f"Aggregated{over} (after the warm-up):"]
    else:
        each = ", ".join(f"{what} over {seconds:.1f} s" for what, seconds in spans)
        lines = [f"Aggregated after the warm-up ({each}):"]
    lines += [f"  {line}" for line in perf_lines(totals, produce=produce, consume=consume)]
    if produce and totals.publish_delay is not None:
        lines.append(
            f"  Publish delay (send time - intended time): p50 {_ms(totals.publish_delay.p50)} ms"
            f" - p99 {_ms(totals.publish_delay.p99)} ms - max {_ms(totals.publish_delay.max)} ms"
        )
    return lines


def check_lines(report: CheckReport) -> list[str]:
    lines = [
        f"Correctness: {report.sent:,} sent, {report.acked:,} acknowledged by the broker, "
        f"{report.failed:,} failed"
    ]
    for sub in report.subscriptions:
        verdict = "LOST MESSAGES" if sub.lost else "ok"
        lines.append(
            f"  {sub.topic} / {sub.subscription}: {sub.received:,} of {sub.acked:,} received, "
            f"{sub.lost:,} lost, {sub.duplicates:,} duplicates, {sub.out_of_order:,} out of order"
            f" -- {verdict}"
        )
        if sub.lost_examples:
            shown = ", ".join(f"{name}#{seq}" for name, seq in sub.lost_examples)
            lines.append(f"    first lost: {shown}")
        if sub.foreign:
            lines.append(
                f"    {sub.foreign:,} messages not from this run were acknowledged and skipped"
            )
    return lines


def dashboard(aggregator: Aggregator, events: Sequence[str], title: str) -> Group:
    """The live view: per group rates, latency, backlog, errors, reconnections; recent events."""
    table = Table(title=title, expand=False)
    for column in (
        "group",
        "topic",
        "role",
        "msg/s",
        "MB/s",
        "p50 ms",
        "p99 ms",
        "max ms",
        "backlog",
        "errors",
        "reconn.",
    ):
        table.add_column(
            column, justify="right" if column not in ("group", "topic", "role") else "left"
        )
    for key, info in sorted(aggregator.groups.items()):
        _second, total = aggregator.last.get(key, (0, None))
        if total is None:
            table.add_row(info.group, info.topic, info.role, *["-"] * 8)
            continue
        summary = summarize(total.histogram)
        table.add_row(
            info.group,
            info.topic,
            info.role,
            f"{total.messages:,}",
            f"{total.bytes / 1e6:.2f}",
            _ms(summary.p50) if summary else "-",
            _ms(summary.p99) if summary else "-",
            _ms(summary.max) if summary else "-",
            f"{aggregator.backlog(info.group):,}" if info.role == "consume" else "",
            f"{total.errors:,}",
            f"{total.reconnections:,}",
        )
    recent = Text("\n".join(events[-6:]) if events else "no events yet", style="dim")
    return Group(table, Text("events:"), recent)


_OMB_FIELDS = {
    "Avg": "mean",
    "50pct": "p50",
    "75pct": "p75",
    "95pct": "p95",
    "99pct": "p99",
    "999pct": "p999",
    "9999pct": "p9999",
    "Max": "max",
}


def _quantiles(histogram: HdrHistogram, scale: float) -> dict[str, float]:
    if not histogram.get_total_count():
        return {}
    return {
        str(item.percentile_level_iterated_to): item.value_iterated_to / scale
        for item in histogram.get_percentile_iterator(100)
    }


def omb_result(
    aggregator: Aggregator,
    *,
    workload: str,
    driver: str,
    message_size: int,
    topics: int,
    partitions: int,
    producers_per_topic: int,
    consumers_per_topic: int,
) -> dict[str, Any]:
    """The OpenMessaging Benchmark's `TestResult` JSON.

    10 s series, latencies in ms (publish delay in µs) and quantile maps, as OMB writes them.
    """
    points = aggregator.omb_points

    def latency_series(prefix: str, pick: str, scale: float) -> dict[str, list[float]]:
        out = {}
        for suffix, field in _OMB_FIELDS.items():
            values = []
            for point in points:
                summary: LatencySummary | None = getattr(point, pick)
                values.append(getattr(summary, field) / scale if summary else 0.0)
            out[f"{prefix}{suffix}"] = values
        return out

    total = aggregator.total
    result: dict[str, Any] = {
        "workload": workload,
        "driver": driver,
        "messageSize": message_size,
        "topics": topics,
        "partitions": partitions,
        "producersPerTopic": producers_per_topic,
        "consumersPerTopic": consumers_per_topic,
        "publishRate": [_per_second(p.produced, p.produce_seconds) for p in points],
        "publishErrorRate": [_per_second(p.errors, p.produce_seconds) for p in points],
        "consumeRate": [_per_second(p.consumed, p.consume_seconds) for p in points],
        "backlog": [p.backlog for p in points],
    }
    result |= latency_series("publishLatency", "publish", 1000.0)
    result |= latency_series("publishDelayLatency", "publish_delay", 1.0)  # µs, as OMB
    result |= latency_series("endToEndLatency", "end_to_end", 1000.0)
    for prefix, histogram, scale in (
        ("aggregatedPublishLatency", total.produce.histogram, 1000.0),
        ("aggregatedEndToEndLatency", total.consume.histogram, 1000.0),
        ("aggregatedPublishDelayLatency", total.produce.delays, 1.0),
    ):
        # summarize gives HdrHistogram's own percentiles and mean, without stepping through
        # all its buckets in pure Python (a third of a second per histogram).
        summary = summarize(histogram)
        for suffix in ("50pct", "75pct", "95pct", "99pct", "999pct", "9999pct", "Avg"):
            value = getattr(summary, _OMB_FIELDS[suffix]) if summary is not None else 0.0
            result[f"{prefix}{suffix}"] = value / scale
        result[f"{prefix}Max"] = summary.max / scale if summary is not None else 0.0
        result[f"{prefix}Quantiles"] = _quantiles(histogram_from(histogram or {}), scale)
    return result
