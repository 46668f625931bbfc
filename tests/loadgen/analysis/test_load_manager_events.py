"""The load manager's decisions (shed, split, placement rows) are events of the run.

The trace below is what `emubroker simulate` writes for four brokers under OverloadShedder:
reports, the leader's placements and its `shed` rows, and no owner `unload` row.
"""

from __future__ import annotations

import re
import shutil
import zlib
from typing import Any

import pytest

from tests.support.traces import RunBuilder, ns, topic_name

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:Exception ignored in. <socket.socket"),
]

BROKERS = ("b0", "b1", "b2", "b3")
QUARTERS = [
    f"public/default/0x{lo:08x}_0x{min(lo + 0x40000000, 0xFFFFFFFF):08x}"
    for lo in range(0, 1 << 32, 0x40000000)
]


def _bundle_of(topic: str) -> str:
    """The quarter bundle of public/default that holds `topic`."""
    return QUARTERS[zlib.crc32(topic_name(topic).encode()) >> 30]


def overload_run(path: Any) -> RunBuilder:
    run = RunBuilder(path, phases=[("steady", 100.0)])
    run.subscription("m", "s", "Shared")
    held = _bundle_of("m")
    other = next(bundle for bundle in QUARTERS if bundle != held)
    for bundle, broker in zip(QUARTERS, BROKERS, strict=True):  # the leader places each bundle
        run.balanced(-0.5, "placement", bundle=bundle, dest_broker=broker, reason="strategy")
    reports = [
        *((0.0, broker, 0.0) for broker in BROKERS),
        (44.0, "b0", 2.2),  # b0 is overloaded: a skew from here
        (75.0, "b1", 0.2),
        (75.01, "b2", 0.2),
        (75.02, "b3", 0.2),
        (75.03, "b0", 0.0),  # b0 shed its bundles: 0.05 above the mean (0.15), 0.2 apart
    ]
    for at, broker, usage in reports:
        run.balanced(at, "report", broker=broker, source_broker=broker, weighted_max_usage=usage)
    for bundle, dest in ((held, "b1"), (other, "b2")):
        run.balanced(
            59.0,
            "shed",
            strategy="OverloadShedder",
            bundle=bundle,
            source_broker="b0",
            dest_broker=dest,
            reason="Overloaded",
        )
    run.balanced(59.1, "placement", bundle=held, dest_broker="b1", reason="affinity")
    # A TransferShedder cycle that decided nothing is no event.
    run.balanced(59.2, "shed", label="Skip", reason="CoolDown", strategy="TransferShedder")
    for i in range(1, 100):  # a delivery every second, none from 58.5 to 61.5
        if not 58 < i < 61:
            run.receive("m", "s", "c-0", i, i + 0.5)
    return run


def test_shed_decisions_are_unload_events_everywhere(spark, tmp_path) -> None:
    from loadgen.analysis.headline import headline
    from loadgen.analysis.inputs import load_run
    from loadgen.analysis.jobs import run_jobs

    run = overload_run(tmp_path / "run")
    result = run_jobs(
        spark,
        load_run(spark, str(run.write())),
        only=("load_balancing", "delivery_gaps"),
    )

    events = [
        (e.source, e.action, round((e.at_ns - result.context.start_ns) / 1e9, 1))
        for e in result.context.events
    ]
    assert events == [
        *[("load-manager", "placement", -0.5)] * 4,
        ("load-manager", "unload", 59.0),
        ("load-manager", "unload", 59.0),
        ("load-manager", "placement", 59.1),
    ]
    assert {(e.target, e.detail) for e in result.context.events[4:6]} == {
        (_bundle_of("m"), "b0 -> b1 (OverloadShedder: Overloaded)"),
        (
            next(b for b in QUARTERS if b != _bundle_of("m")),
            "b0 -> b2 (OverloadShedder: Overloaded)",
        ),
    }

    (episode,) = result.tables["lb_convergence"].dicts()
    assert episode["skew_start_s"] == pytest.approx(44.0)
    assert episode["unloads"] == 2
    assert episode["first_unload_after_s"] == pytest.approx(15.0)
    # b0 emptied by the shedder, the others at 0.2: within the threshold of their mean.
    assert episode["converged_s"] == pytest.approx(75.03)
    assert episode["time_to_converge_s"] == pytest.approx(31.03)
    assert episode["peak_imbalance"] == pytest.approx(2.2 - 2.2 / 4)

    gaps = result.tables["delivery_gaps"].dicts()
    assert {(g["source"], g["event"]) for g in gaps} == {
        ("load-manager", f"unload {_bundle_of('m')}")
    }
    assert gaps[0]["gap_s"] == pytest.approx(3.0)  # 58.5 to 61.5

    numbers = headline(result)
    # The disruptions are the unloads that touched a consumer's topics: the bundle of m.
    assert (numbers["unloads"], numbers["splits"], numbers["disruptions"]) == (2, 0, 1)
    assert numbers["max_time_to_converge_s"] == pytest.approx(31.03)


def test_the_report_shows_the_load_managers_events(spark, tmp_path) -> None:
    from loadgen.analysis.inputs import load_run
    from loadgen.analysis.jobs import run_jobs
    from loadgen.analysis.report import write_report

    run = overload_run(tmp_path / "run")
    result = run_jobs(spark, load_run(spark, str(run.write())), only=("load_balancing",))
    html = write_report(tmp_path / "report", [("overload", result)]).read_text()

    timeline = html[html.index("<h2>Event timeline</h2>") : html.index("<h2>Load balancing")]
    assert "no events" not in timeline
    assert timeline.count('<td class="text">load-manager</td>') == 7
    assert "b0 -&gt; b2 (OverloadShedder: Overloaded)" in timeline


def test_a_trace_directory_outside_the_run_keeps_the_runs_rows(spark, tmp_path) -> None:
    from loadgen.analysis.inputs import AnalysisInputError, attach_trace, load_run
    from loadgen.analysis.jobs import run_jobs

    run = overload_run(tmp_path / "run")
    run.manifest["prepared_ns"] = ns(-1.0)
    # An earlier run on the same cluster left its rows in the same directory.
    run.balanced(-600.0, "report", broker="b0", source_broker="b0", weighted_max_usage=0.9)
    run.balanced(-500.0, "shed", bundle=QUARTERS[0], source_broker="b0", reason="Overloaded")
    run.balanced(-400.0, "report", broker="b0", source_broker="b0", weighted_max_usage=0.3)
    run.dispatched(-500.0, topic=topic_name("m"), subscription="s", messages=1)
    run.dispatched(5.0, topic=topic_name("m"), subscription="s", messages=1)
    shutil.move(run.write() / "loadbalance", tmp_path / "cluster-traces")
    shutil.move(run.path / "dispatch", tmp_path / "dispatch-traces")
    loaded = load_run(spark, str(run.path))
    assert "no load-balancer trace (loadbalance/ does not exist)" in loaded.notes

    attach_trace(spark, loaded, "loadbalance", str(tmp_path / "cluster-traces"))
    attach_trace(spark, loaded, "dispatch", str(tmp_path / "dispatch-traces"))
    assert [r["wall_ns"] for r in loaded.tables["dispatch"].collect()] == [ns(5.0)]
    result = run_jobs(spark, loaded, only=("load_balancing",))

    assert not any("load-balancer" in note or "dispatch" in note for note in loaded.notes)
    actions = [(e.action, e.at_ns) for e in result.context.events]
    assert ("unload", ns(-500.0)) not in actions
    assert actions.count(("unload", ns(59.0))) == 2
    usage = [(r["t_s"], r["broker"]) for r in result.tables["lb_broker_usage"].dicts()]
    assert (-400.0, "b0") in usage  # b0's last report before the run: where it started from
    assert (-600.0, "b0") not in usage

    for location, problem in (
        (tmp_path / "nowhere", "no such load-balancer trace directory"),
        (
            tmp_path / "run" / "receives",
            "not a load-balancer trace: no column wall_ns (and 2 more)",
        ),
    ):
        with pytest.raises(AnalysisInputError, match=re.escape(problem)):
            attach_trace(spark, loaded, "loadbalance", str(location))
    (tmp_path / "running").mkdir()
    (tmp_path / "running" / ".loadbalance-b0-00001.parquet.inprogress").write_text("")
    with pytest.raises(AnalysisInputError, match="stop the cluster before analysing"):
        attach_trace(spark, loaded, "loadbalance", str(tmp_path / "running"))
    later = load_run(spark, str(run.path))
    later.manifest["prepared_ns"] = later.manifest["start_ns"] = ns(10_000.0)
    later.manifest["end_ns"] = ns(10_100.0)
    with pytest.raises(AnalysisInputError, match="no load-balancer trace rows in the time of"):
        attach_trace(spark, later, "loadbalance", str(tmp_path / "cluster-traces"))
