"""The report of two runs side by side: HTML, summary.json and a CSV per table."""

from __future__ import annotations

import csv
import json

import pytest

from tests.support.traces import RunBuilder

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:Exception ignored in. <socket.socket"),
]


def small_run(path, lost: int) -> str:
    run = RunBuilder(path, phases=[("only", 2.0)])
    run.subscription("r", "s", "Failover")
    run.event(1.0, "UnloadTopic", "r", topic="r")
    for i in range(20):
        run.send("r", i, 0.1 * i)
        if i >= lost:
            run.receive("r", "s", "c-0", i, 0.1 * i + 0.01)
    return str(run.write())


def test_two_runs_side_by_side(spark, tmp_path) -> None:
    from loadgen.analysis.inputs import load_run
    from loadgen.analysis.jobs import run_jobs
    from loadgen.analysis.report import write_report

    runs = [
        ("threshold", run_jobs(spark, load_run(spark, small_run(tmp_path / "a", lost=0)))),
        ("avg", run_jobs(spark, load_run(spark, small_run(tmp_path / "b", lost=2)))),
    ]
    html_path = write_report(tmp_path / "report", runs)

    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert [(r["label"], r["headline"]["lost"]) for r in summary["runs"]] == [
        ("threshold", 0),
        ("avg", 2),
    ]
    assert set(summary["headline_meaning"]) >= {"lost", "publish_p99_ms", "max_over_ratio"}
    with (tmp_path / "report" / summary["tables"]["correctness"]).open() as f:
        table = list(csv.DictReader(f))
    assert [(r["run"], r["lost"]) for r in table] == [("threshold", "0"), ("avg", "2")]
    for name in summary["tables"].values():
        assert (tmp_path / "report" / name).exists()
    html = html_path.read_text()
    assert "<th>threshold</th><th>avg</th>" in html  # headline numbers, one column per run
    assert html.count("data:image/png;base64,") >= 4
    assert 'class="bad"' in html  # the run with losses is flagged in the correctness table
