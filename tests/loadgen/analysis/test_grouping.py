"""A `loadgen produce` and a `loadgen consume` of one topic at once are analysed as one run."""

from __future__ import annotations

from typing import Any

import pytest

from loadgen.analysis.grouping import group_runs
from loadgen.analysis.inputs import AnalysisInputError, Run
from tests.support.traces import RunBuilder, ns

pytestmark = pytest.mark.filterwarnings("ignore:Exception ignored in. <socket.socket")

TOPIC = "persistent://public/default/t"


def manifest(
    run_id: str, *, start: float, end: float, produce: str = "", consume: str = "", **more: Any
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "start_ns": ns(start),
        "end_ns": ns(end),
        "trace_sample": 1.0,
        "scenario": {
            "name": run_id,
            "producers": [{"name": "produce", "topic": produce}] if produce else [],
            "consumers": [{"name": "consume", "topic": consume, "subscription": "sub"}]
            if consume
            else [],
            "phases": [{"name": "run", "duration": end - start}],
        },
        **more,
    }


def run(run_id: str, **fields: Any) -> tuple[str, Run]:
    return run_id, Run(path=f"runs/{run_id}", manifest=manifest(run_id, **fields))


def test_a_produce_and_a_consume_run_of_a_topic_at_the_same_time_are_joined() -> None:
    consume = run("C", start=0, end=10, consume="t")
    produce = run("P", start=1, end=9, produce=TOPIC)
    other = run("O", start=1, end=9, produce="other")  # at the same time, another topic
    later = run("L", start=20, end=30, consume="t")  # the same topic, afterwards
    (joined, alone, after) = group_runs([consume, produce, other, later])
    assert joined.label == "C + P"
    assert joined.lines == (
        "joined: C and P are analysed as one run (they share a topic and overlap in time)",
    )
    assert joined.run.run_id == "C+P"
    assert joined.run.start_ns == ns(0)  # the earliest start is time zero
    assert joined.run.manifest["end_ns"] == ns(10)
    assert joined.run.subscriptions() == [(TOPIC, "sub", "Exclusive")]
    assert [g["topic"] for g in joined.run.scenario["producers"]] == [TOPIC]
    assert joined.run.scenario["description"] == joined.lines[0]
    assert (alone.label, alone.lines, after.label, after.lines) == ("O", (), "L", ())


def test_join_joins_the_runs_given_even_one_after_the_other() -> None:
    produce = run("P", start=0, end=5, produce="t")
    consume = run("C", start=60, end=70, consume="t")
    assert [g.label for g in group_runs([produce, consume])] == ["P", "C"]
    (joined,) = group_runs([produce, consume], join=True)
    assert joined.lines == ("joined: P and C are analysed as one run (as --join asks)",)


def test_runs_whose_messages_would_collide_are_not_joined_and_it_says_why() -> None:
    first = run("A", start=0, end=10, produce="t", consume="t")
    second = run("B", start=2, end=12, produce="t")
    groups = group_runs([first, second])
    why = (
        "not joined: A and B share a topic and overlap in time, but runs A and B both produce "
        "to persistent://public/default/t (their messages' ids would collide)"
    )
    assert [(g.label, g.lines) for g in groups] == [("A", (why,)), ("B", (why,))]
    with pytest.raises(AnalysisInputError, match=r"--join: A and B cannot be joined: runs A and"):
        group_runs([first, second], join=True)
    sampled = run("S", start=1, end=9, consume="t", trace_sample=0.5)
    with pytest.raises(AnalysisInputError, match=r"their trace samples differ \(0.5, 1\)"):
        group_runs([run("P", start=0, end=10, produce="t"), sampled], join=True)


@pytest.mark.spark
def test_the_joined_run_checks_the_produce_runs_sends_against_the_consume_runs_deliveries(
    spark, tmp_path
) -> None:
    from loadgen.analysis.inputs import load_run
    from loadgen.analysis.jobs import run_jobs

    produce = RunBuilder(tmp_path / "produce")
    for seq in range(20):
        produce.send("t", seq, 1.0 + seq * 0.1, latency=0.002)
    produce.manifest.update(manifest("P", start=1, end=4, produce="t"))
    consume = RunBuilder(tmp_path / "consume")
    for seq in range(19):  # the last message never arrives
        consume.receive("t", "sub", "consume-0", seq, 1.01 + seq * 0.1, sent_at=1.0 + seq * 0.1)
    consume.receive("t", "sub", "consume-0", 3, 0.5, sent_at=0.4)  # an earlier run's backlog
    consume.manifest.update(manifest("C", start=0, end=5, consume="t"))
    loaded = [
        (name, load_run(spark, str(built.write())))
        for name, built in (("produce", produce), ("consume", consume))
    ]
    (joined,) = group_runs(loaded)
    assert joined.label == "produce + consume"
    # Each run's missing table is the other's; what neither wrote stays noted.
    assert not [note for note in joined.run.notes if "sends/" in note or "receives/" in note]
    assert "table seconds is missing (seconds/ does not exist)" in joined.run.notes
    tables = run_jobs(spark, joined.run, only=("latency", "correctness")).tables
    (check,) = tables["correctness"].dicts()
    # The backlog's message 3 is left out: not a duplicate of this run's message 3.
    assert (check["acked"], check["received"], check["lost"], check["duplicates"]) == (20, 19, 1, 0)
    (end_to_end,) = (
        r
        for r in tables["latency_by_phase"].dicts()
        if (r["kind"], r["phase"]) == ("end_to_end", "all")
    )
    assert end_to_end["count"] == 19
    assert end_to_end["p50_ms"] == pytest.approx(10.0, rel=0.01)
