"""The report's figures (matplotlib, PNG): one column per run, the scenario drawn on each.

Every time plot shades the scenario's phases (named along the top) and draws each event as a
dashed line numbered as in the report's event timeline, so a dip or a spike can be read
against what the scenario did at that moment.
"""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, Final

from loadgen.analysis.common import Context
from loadgen.analysis.job import JobResult

__all__ = [
    "DELIVERY_GAPS",
    "FAIRNESS",
    "LATENCY",
    "LOAD_BALANCING",
    "THROTTLING",
    "THROUGHPUT",
    "Figure",
    "overlay",
]

_PHASE_COLOURS: Final = ("#f2f2f2", "#e3ecf7")
_EVENT_COLOUR: Final = "#c0392b"
_LB_COLOUR: Final = "#8e44ad"
_LABEL_WIDTH: Final = 0.04
"""Room an event's number takes on a time plot, as a fraction of the time axis."""
_MAX_LINES: Final = 8
"""Series drawn in one panel; more are summed into `other`."""

Panel = Callable[[Any, JobResult], bool]
"""Draws one run's panel on an Axes; False when the run has nothing to draw."""


def short_topic(topic: str) -> str:
    return topic.rsplit("/", 1)[-1]


def overlay(ax: Any, ctx: Context, *, numbers: bool = True) -> None:
    """Shade the phases and draw the events (numbered as in the timeline) on `ax`."""
    for i, phase in enumerate(ctx.phases):
        end = phase.end_s if phase.end_s != float("inf") else ax.get_xlim()[1]
        ax.axvspan(phase.start_s, end, color=_PHASE_COLOURS[i % 2], zorder=0, lw=0)
        ax.text(
            (phase.start_s + end) / 2,
            0.985,
            phase.name,
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="top",
            fontsize=8,
            color="#444444",
            style="italic",
            zorder=2,
        )
    low, high = ax.get_xlim()
    # Events closer than a label's width share one label ("3–8"), placed at the first of them.
    near = _LABEL_WIDTH * (high - low)
    labels: list[tuple[float, list[int]]] = []
    for number, event in enumerate(ctx.events, start=1):
        at = (event.at_ns - ctx.start_ns) / 1e9
        colour = _EVENT_COLOUR if event.source == "loadgen" else _LB_COLOUR
        # A placement ends a move rather than disturbing anything: a fainter, dotted line.
        style = ":" if event.action == "placement" else "--"
        ax.axvline(at, color=colour, ls=style, lw=0.8, zorder=3)
        if labels and at - labels[-1][0] < near:
            labels[-1][1].append(number)
        else:
            labels.append((at, [number]))
    if numbers and len(labels) <= 30:
        for at, group in labels:
            sources = {ctx.events[n - 1].source for n in group}
            ax.text(
                at,
                1.01,
                str(group[0]) if len(group) == 1 else f"{group[0]}–{group[-1]}",
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="bottom",
                fontsize=8,
                color=_EVENT_COLOUR if sources == {"loadgen"} else _LB_COLOUR,
                fontweight="bold",
                clip_on=False,
            )


def _top_series(
    points: dict[str, dict[float, float]], limit: int = _MAX_LINES
) -> dict[str, dict[float, float]]:
    """Keep the `limit - 1` largest series; sum the rest into `other`."""
    if len(points) <= limit:
        return points
    ranked = sorted(points, key=lambda name: -sum(points[name].values()))
    kept = {name: points[name] for name in ranked[: limit - 1]}
    other: dict[float, float] = defaultdict(float)
    for name in ranked[limit - 1 :]:
        for x, y in points[name].items():
            other[x] += y
    kept[f"other ({len(ranked) - limit + 1})"] = dict(other)
    return kept


def _steps(ax: Any, xs: list[float], ys: list[float], **style: Any) -> None:
    """Per-second values as steps, each held for its whole second (the last one included)."""
    if xs:
        xs, ys = [*xs, xs[-1] + 1], [*ys, ys[-1]]
    ax.plot(xs, ys, drawstyle="steps-post", **style)


def _lines(ax: Any, series: dict[str, dict[float, float]], **style: Any) -> None:
    for name, values in _top_series(series).items():
        xs = sorted(values)
        _steps(ax, xs, [values[x] for x in xs], label=name, **style)


def _rates(ax: Any, result: JobResult, series: dict[str, dict[float, float]], **style: Any) -> None:
    """Counts per one-second bucket as rates: the bucket the run ends in counts over its part.

    A run ending 0.2 s into its last bucket delivered that bucket's messages in 0.2 s; drawn
    as a whole second, it would read as a fifth of its rate.
    """
    end_ns = result.context.run.manifest.get("end_ns")
    end = (int(end_ns) - result.context.start_ns) / 1e9 if end_ns else None
    for name, values in _top_series(series).items():
        xs = sorted(values)
        ys = [values[x] for x in xs]
        if end is not None and xs and xs[-1] < end < xs[-1] + 1:
            ys[-1] /= end - xs[-1]
            ax.plot([*xs, end], [*ys, ys[-1]], drawstyle="steps-post", label=name, **style)
        else:
            _steps(ax, xs, ys, label=name, **style)


def _throughput(ax: Any, result: JobResult) -> bool:
    table = result.tables.get("throughput")
    if table is None or not table.rows:
        return False
    series: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for row in table.dicts():
        topic = short_topic(row["topic"]).split("-partition-")[0]
        name = (
            f"produced {topic}"
            if row["role"] == "produce"
            else (f"consumed {topic} / {row['subscription']}")
        )
        series[name][row["second"]] += row["messages"]
    _rates(ax, result, series)
    ax.set_ylabel("messages / s")
    return True


def _backlog(ax: Any, result: JobResult) -> bool:
    table = result.tables.get("backlog")
    if table is None or not table.rows:
        return False
    series: dict[str, dict[float, float]] = defaultdict(dict)
    for row in table.dicts():
        series[f"{short_topic(row['topic'])} / {row['subscription']}"][row["second"]] = row[
            "backlog"
        ]
    _lines(ax, series)
    ax.set_ylabel("backlog (messages)")
    return True


def _per_broker(ax: Any, result: JobResult) -> bool:
    table = result.tables.get("throughput")
    if table is None:
        return False
    series: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for row in table.dicts():
        if row["broker"]:
            series[f"{row['role']} {row['broker'].split('//')[-1]}"][row["second"]] += row[
                "messages"
            ]
    if len({name.split(" ", 1)[1] for name in series}) < 2:
        return False  # one broker: the throughput plot says it all
    _rates(ax, result, series)
    ax.set_ylabel("messages / s")
    return True


def _latency(kind: str) -> Panel:
    def draw(ax: Any, result: JobResult) -> bool:
        table = result.tables.get("latency_over_time")
        rows = [r for r in table.dicts() if r["kind"] == kind] if table else []
        if not rows:
            return False
        xs = [r["second"] for r in rows]
        for column, style in (("p50_ms", "-"), ("p99_ms", "-"), ("max_ms", ":")):
            _steps(ax, xs, [r[column] for r in rows], ls=style, label=column[:-3])
        ax.set_yscale("log")
        ax.set_ylabel("ms (log scale)")
        return True

    return draw


def _limiter_name(row: dict[str, Any]) -> str:
    parts = [row["level"], row["broker"]]
    if row["topic"]:
        parts.append(short_topic(row["topic"]))
    if row["subscription"]:
        parts.append(row["subscription"])
    return " ".join(parts)


def _throttling(ax: Any, result: JobResult) -> bool:
    table = result.tables.get("throttling_periods")
    if table is None or not table.rows:
        return False
    by_limiter: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in table.dicts():
        if row["limit_msgs"] > 0:
            by_limiter[_limiter_name(row)].append(row)
    if not by_limiter:
        return False
    ranked = sorted(by_limiter, key=lambda n: -sum(r["over_msgs"] for r in by_limiter[n]))
    for name in ranked[:4]:
        rows = by_limiter[name]
        line = ax.plot(
            [r["t_s"] for r in rows],
            [r["delivered_msgs"] for r in rows],
            drawstyle="steps-post",
            label=f"delivered: {name}",
        )[0]
        ax.plot(
            [r["t_s"] for r in rows],
            [r["limit_msgs"] for r in rows],
            drawstyle="steps-post",
            ls="--",
            color=line.get_color(),
            lw=0.8,
            label="limit",
        )
        over = [r for r in rows if r["over_msgs"] > 0]
        ax.scatter(
            [r["t_s"] for r in over],
            [r["delivered_msgs"] for r in over],
            marker="^",
            color=_EVENT_COLOUR,
            zorder=4,
            label="over the limit" if name == ranked[0] else None,
        )
        carry = [r for r in rows if r["carry_over"]]
        ax.scatter(
            [r["t_s"] for r in carry],
            [r["delivered_msgs"] for r in carry],
            marker="v",
            color="#2471a3",
            zorder=4,
            label="carry-over" if name == ranked[0] else None,
        )
    ax.set_ylabel("messages per period")
    return True


def _lb_usage(ax: Any, result: JobResult) -> bool:
    table = result.tables.get("lb_broker_usage")
    if table is None or not table.rows:
        return False
    series: dict[str, dict[float, float]] = defaultdict(dict)
    for row in table.dicts():
        series[row["broker"]][row["t_s"]] = 100 * row["weighted_max_usage"]
    for name, values in _top_series(series).items():
        xs = sorted(values)
        ax.plot(xs, [values[x] for x in xs], marker=".", label=name)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("weighted max usage (%)")
    return True


def _gaps(ax: Any, result: JobResult) -> bool:
    table = result.tables.get("delivery_gaps")
    rows = [r for r in table.dicts() if r["gap_s"] is not None] if table else []
    if not rows:
        return False
    consumers = sorted({r["consumer"] for r in rows})
    for consumer in consumers[:_MAX_LINES]:
        mine = [r for r in rows if r["consumer"] == consumer]
        ax.plot(
            [r["event_t_s"] for r in mine],
            [r["gap_s"] for r in mine],
            "o",
            label=consumer,
            alpha=0.8,
        )
    ax.set_ylim(bottom=0)
    ax.set_ylabel("delivery gap (s)")
    return True


def _fairness(ax: Any, result: JobResult) -> bool:
    table = result.tables.get("fairness_over_time")
    if table is None or not table.rows:
        return False
    series: dict[str, dict[float, float]] = defaultdict(dict)
    for row in table.dicts():
        series[f"{row['subscription']}: {row['consumer']}"][row["second"]] = row["deliveries"]
    _rates(ax, result, series)
    ax.set_ylabel("deliveries / s")
    return True


class Figure:
    """One figure of the report: a panel per run, side by side, sharing the y axis."""

    def __init__(self, key: str, title: str, panel: Panel, *, timeline: bool = True) -> None:
        self.key = key
        self.title = title
        self.panel = panel
        self.timeline = timeline

    def render(self, runs: Sequence[tuple[str, JobResult]]) -> bytes | None:
        """The PNG, or None when no run has anything to draw."""
        from matplotlib.figure import Figure as MplFigure

        figure = MplFigure(figsize=(6.4 * len(runs) if len(runs) > 1 else 10, 3.6), dpi=100)
        axes = figure.subplots(1, len(runs), sharey=True, squeeze=False)[0]
        drawn = False
        for ax, (label, result) in zip(axes, runs, strict=True):
            if self.panel(ax, result):
                drawn = True
                if self.timeline:
                    overlay(ax, result.context)
                ax.set_xlabel("seconds since the start of the run")
                ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
                ax.grid(True, alpha=0.3)
            else:
                ax.text(0.5, 0.5, "nothing to show", ha="center", transform=ax.transAxes)
            if len(runs) > 1:
                ax.set_title(label, fontsize=9, pad=14)
        if not drawn:
            return None
        figure.suptitle(self.title, fontsize=11)
        figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
        return buffer.getvalue()


THROUGHPUT: Final = (
    Figure("throughput", "Produced and consumed, messages a second", _throughput),
    Figure("backlog", "Backlog per subscription", _backlog),
    Figure("per_broker", "Messages a second per broker", _per_broker),
)
LATENCY: Final = (
    Figure("publish_latency", "Publish latency (receipt - intended send)", _latency("publish")),
    Figure("e2e_latency", "End-to-end latency (receive - intended send)", _latency("end_to_end")),
)
THROTTLING: Final = (
    Figure("throttling", "Delivered per limiter period vs the limit", _throttling),
)
LOAD_BALANCING: Final = (Figure("lb_usage", "Broker usage (load reports)", _lb_usage),)
DELIVERY_GAPS: Final = (Figure("gaps", "Delivery gap per consumer after each disruption", _gaps),)
FAIRNESS: Final = (
    Figure("fairness", "Deliveries a second per consumer (shared subscriptions)", _fairness),
)
"""The figures of each job's section (the job's declaration in `jobs.JOBS` names them)."""
