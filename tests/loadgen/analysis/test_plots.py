"""The report's figures: events drawn on every time plot, per-second counts drawn as rates."""

from __future__ import annotations

import pytest

START = 1_800_000_000 * 10**9


def test_events_at_one_instant_share_a_label_on_the_plots() -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from loadgen.analysis.common import Context, Event
    from loadgen.analysis.inputs import Run
    from loadgen.analysis.plots import overlay

    events = [
        *(Event(START, "load-manager", "placement", f"q{i}") for i in range(8)),
        Event(START + 59 * 10**9, "load-manager", "unload", "q0"),
        Event(START + 59_300_000_000, "load-manager", "unload", "q1"),
        Event(START + 80 * 10**9, "loadgen", "UnloadTopic", "t"),
    ]
    ctx = Context(None, Run("run", {"start_ns": START}), events)
    ax = Figure().subplots()
    ax.plot([0, 100], [0, 1])
    overlay(ax, ctx)

    # Events a few pixels apart (59 s and 59.3 s on a 100 s axis) share a label too.
    assert [text.get_text() for text in ax.texts] == ["1–8", "9–10", "11"]
    styles = [line.get_linestyle() for line in ax.lines[1:]]
    assert styles == [":"] * 8 + ["--"] * 3  # placements dotted


def test_the_bucket_the_run_ends_in_is_a_rate_over_its_part() -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from loadgen.analysis.common import Context, Table
    from loadgen.analysis.inputs import Run
    from loadgen.analysis.job import JobResult
    from loadgen.analysis.plots import THROUGHPUT

    run = Run("run", {"start_ns": START, "end_ns": START + 6_200_000_000})
    columns = ("second", "role", "topic", "subscription", "broker", "messages", "bytes")
    rows = [(s, "produce", "t", "", "b", 200, 0) for s in range(6)] + [
        (6, "produce", "t", "", "b", 40, 0)  # the last 0.2 s of the run: 200 msg/s too
    ]
    result = JobResult(
        Context(None, run, []), {"throughput": Table("throughput", columns, rows)}, {}
    )
    (figure,) = [f for f in THROUGHPUT if f.key == "throughput"]
    ax = Figure().subplots()
    assert figure.panel(ax, result)

    (line,) = ax.lines
    assert list(line.get_xdata()) == [0, 1, 2, 3, 4, 5, 6, pytest.approx(6.2)]
    assert list(line.get_ydata()) == [200] * 6 + [pytest.approx(200.0)] * 2
