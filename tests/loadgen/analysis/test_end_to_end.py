"""A scenario through loadgen against a broker it starts, then `loadgen analyze` on the run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from loadgen.__main__ import main
from tests.support.spark import SPARK_TEST_ARGS

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SCENARIO = """
name = "analyze-e2e"
description = "a throttled shared subscription with an unload, for the analysis"
seed = 4
[cluster]
[cluster.start]
brokers = 1
config = { dispatchThrottlingRatePerTopicInMsg = 250, emubrokerDispatchTraceDir = "dispatch" }
[[producers]]
name = "in"
topic = "analyze-e2e"
rate = 200
size = 120
keys = { distribution = "random", count = 8 }
[[consumers]]
name = "out"
topic = "analyze-e2e"
subscription = "shared"
type = "Shared"
count = 2
[[phases]]
name = "steady"
duration = "2s"
[[phases]]
name = "burst"
duration = "2s"
rates = { in = 500 }
[[events]]
at = "3s"
action = "unload_topic"
topic = "analyze-e2e"
"""


def test_a_run_analysed_into_a_report(tmp_path) -> None:
    pytest.importorskip("pyspark")
    scenario = tmp_path / "s.toml"
    scenario.write_text(SCENARIO)
    run_dir = tmp_path / "run"
    code = main(["run", str(scenario), "--trace-dir", str(run_dir), "--no-dashboard"])
    assert code == 0
    assert list((run_dir / "dispatch").glob("dispatch-*.parquet"))  # the broker's trace
    report_dir = tmp_path / "report"
    analysed = subprocess.run(
        [
            sys.executable,
            "-m",
            "loadgen",
            "analyze",
            str(run_dir),
            "--out",
            str(report_dir),
            *SPARK_TEST_ARGS,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert analysed.returncode == 0, analysed.stderr[-3000:]
    assert f"report: {report_dir / 'report.html'}" in analysed.stdout
    summary = json.loads((report_dir / "summary.json").read_text())
    (run,) = summary["runs"]
    numbers = run["headline"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    (check,) = manifest["checks"]["subscriptions"]
    # The analysis counts what loadgen's own end-of-run checks counted.
    assert numbers["produced"] == manifest["checks"]["acked"]
    assert numbers["lost"] == check["lost"] == 0
    assert numbers["duplicates"] == check["duplicates"]
    assert numbers["limiters"] >= 1  # the topic's limiter, from the dispatch trace
    assert numbers["disruptions"] == 1  # the unload
    assert numbers["max_delivery_gap_s"] is not None
    assert numbers["min_jain_index"] > 0.5
    assert numbers["end_to_end_p50_ms"] > 0
    for table in (
        "throughput",
        "latency_by_phase",
        "throttling_summary",
        "delivery_gaps",
        "correctness",
        "fairness",
    ):
        assert (report_dir / summary["tables"][table]).exists()
    html = (report_dir / "report.html").read_text()
    assert html.count("<img ") >= 6  # throughput, backlog, 2 latencies, throttling, gaps, fairness
    for heading in ("Headline numbers", "Event timeline", "Throttling accuracy", "Correctness"):
        assert heading in html
    assert "UnloadTopic" in html
