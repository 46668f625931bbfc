"""What `loadgen analyze` says about runs it cannot analyse, and about a machine without Java."""

from __future__ import annotations

import pytest

from tests.support.traces import RunBuilder

pytestmark = pytest.mark.filterwarnings("ignore:Exception ignored in. <socket.socket")


def built(tmp_path, **manifest) -> RunBuilder:
    run = RunBuilder(tmp_path / "run")
    run.receive("t", "s", "c", 0, 0.1)
    run.manifest.update(manifest)
    return run


@pytest.mark.spark
def test_a_run_without_deliveries_or_sends_says_which_tables_are_missing(spark, tmp_path) -> None:
    from loadgen.analysis.inputs import AnalysisInputError, load_run

    run = RunBuilder(tmp_path / "run")
    path = run.write()
    (path / "receives").mkdir()  # present, but no Parquet file in it
    with pytest.raises(
        AnalysisInputError, match=r"sends/ and receives/ are both missing or empty"
    ) as info:
        load_run(spark, str(path))
    assert "table sends is missing" in str(info.value)
    assert "table receives is empty (no Parquet files in receives/)" in str(info.value)


@pytest.mark.spark
def test_an_unknown_schema_version_is_named(spark, tmp_path) -> None:
    from loadgen.analysis.inputs import AnalysisInputError, load_run

    path = built(tmp_path, schema_version=2).write()
    with pytest.raises(
        AnalysisInputError, match=r"trace schema version 2 is not one this analysis reads \(1\)"
    ):
        load_run(spark, str(path))


@pytest.mark.spark
def test_a_dispatch_trace_of_an_unknown_version_is_named(spark, tmp_path) -> None:
    from loadgen.analysis.inputs import AnalysisInputError, load_run

    run = built(tmp_path)
    run.dispatched(0.1, topic="t", subscription="s", schema_version=2)
    with pytest.raises(
        AnalysisInputError,
        match=r"table dispatch has schema version 2; this analysis reads version 1 only",
    ):
        load_run(spark, str(run.write()))


@pytest.mark.spark
def test_a_directory_that_is_not_a_run_is_named(spark, tmp_path) -> None:
    from loadgen.analysis.inputs import AnalysisInputError, load_run

    with pytest.raises(AnalysisInputError, match=r"no manifest.json: not a loadgen run directory"):
        load_run(spark, str(tmp_path))
    with pytest.raises(AnalysisInputError, match=r"no such run directory"):
        load_run(spark, str(tmp_path / "nowhere"))


@pytest.mark.spark
def test_optional_traces_are_noted_and_their_analyses_skipped(spark, tmp_path) -> None:
    from loadgen.analysis.inputs import load_run
    from loadgen.analysis.jobs import JOBS

    run = load_run(spark, str(built(tmp_path).write()))
    assert "no dispatch trace (dispatch/ does not exist)" in run.notes
    skipped = {job.name: job.missing(run) for job in JOBS if job.missing(run)}
    assert skipped == {
        "throttling": "needs table dispatch",
        "load_balancing": "needs table loadbalance",
    }


def test_without_java_the_command_says_so_in_one_line(tmp_path, monkeypatch, capsys) -> None:
    pytest.importorskip("pyspark")
    from loadgen.__main__ import main

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no java there
    path = built(tmp_path).write()
    assert main(["analyze", str(path), "--out", str(tmp_path / "report")]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("loadgen analyze: Java was not found")
    assert "Java 17" in err[0]
    assert not (tmp_path / "report").exists()


def test_the_analyze_command_lists_its_options_and_small_machine_defaults(capsys) -> None:
    pytest.importorskip("pyspark")
    from loadgen.__main__ import main

    with pytest.raises(SystemExit) as info:
        main(["analyze", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for option in ("--out", "--master", "--conf", "spark.sql.shuffle.partitions=4"):
        assert option in out


@pytest.mark.spark
def test_a_run_written_before_a_new_column_reads_it_as_its_default(
    spark, tmp_path, monkeypatch
) -> None:
    from emubroker.traceschema import BROKER_TRACES, LOADGEN_TABLES, TraceTable
    from emubroker.traceschema.dispatch import DispatchTraceRecord
    from emubroker.traceschema.loadgen import ReceiveRecord
    from loadgen.analysis.inputs import load_run

    run = built(tmp_path)
    run.dispatched(0.1, topic="t", subscription="s", messages=1)
    path = run.write()  # by today's writers: the columns below did not exist

    class NewerReceive(ReceiveRecord, frozen=True, kw_only=True):
        hops: int = 3

    class NewerDispatch(DispatchTraceRecord, frozen=True, kw_only=True):
        shard: str = "none"

    old = LOADGEN_TABLES["receives"]
    monkeypatch.setitem(
        LOADGEN_TABLES,
        "receives",
        TraceTable("receives", NewerReceive, old.version, "loadgen", "table"),
    )
    old = BROKER_TRACES["dispatch"]
    monkeypatch.setitem(
        BROKER_TRACES,
        "dispatch",
        TraceTable("dispatch", NewerDispatch, old.version, "emubroker", "trace"),
    )
    loaded = load_run(spark, str(path))
    assert [row["hops"] for row in loaded.tables["receives"].collect()] == [3]
    assert [row["shard"] for row in loaded.tables["dispatch"].collect()] == ["none"]
    assert loaded.tables["receives"].columns[-1] == "hops"
