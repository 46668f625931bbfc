"""`loadgen analyze` on a run of `emubroker simulate`: its shedding decisions in the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from emubroker import simulate
from tests.emubroker.simulate.scenarios import TOPICS, shedding_scenario

pytestmark = [
    pytest.mark.spark,
    # pyspark's result sockets, collected by the simulation's garbage (conftest.py says more).
    pytest.mark.filterwarnings("ignore:Exception ignored in. <socket.socket"),
]


def test_loadgen_analyze_reads_a_simulated_run(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loadgen.analysis import __main__ as analyze

    scenario = tmp_path / "shedding.toml"
    scenario.write_text(shedding_scenario(seconds=20, shed_minutes=0.0583))
    result = simulate.run(scenario, tmp_path / "run")
    # The command in this process, on the tests' shared session (a JVM of its own took 25-65 s
    # of the suite's time); test_end_to_end.py runs it as a process, with a session of its own.
    monkeypatch.setattr(analyze, "open_session", lambda master, conf: spark)
    monkeypatch.setattr(spark, "stop", lambda: None)  # the command stops its session
    code = analyze.main([str(result.run_dir), "--out", str(tmp_path / "report"), "--quiet"])

    assert code == 0
    tables = tmp_path / "report" / "tables"
    timeline = (tables / "lb_timeline.csv").read_text().splitlines()
    sheds = [line for line in timeline if ",shed," in line]
    assert len(sheds) == len([d for d in result.decisions if d.event == "shed"])
    assert all("ThresholdShedder" in line for line in sheds)
    # The shed decisions are the run's unloads: in the headline and the delivery gaps.
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["runs"][0]["headline"]["unloads"] == len(sheds) > 0
    gaps = (tables / "delivery_gaps.csv").read_text()
    assert ",load-manager,unload public/default/" in gaps
    correctness = (tables / "correctness.csv").read_text().splitlines()[1:]
    assert len(correctness) == len(TOPICS)
    assert all(line.split(",")[7] == "0" for line in correctness)  # nothing lost
