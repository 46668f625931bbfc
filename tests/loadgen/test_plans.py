from __future__ import annotations

from loadgen.plans import build_plans
from loadgen.scenario import parse_scenario

TEXT = """\
name = "p"
seed = 9
[cluster]
service_url = "pulsar://127.0.0.1:6650"
[[producers]]
name = "a"
topic = "t1"
count = 2
rate = 1000
messages = 5
[[producers]]
name = "b"
topic = "t2"
[[consumers]]
name = "c"
topic = "t1"
subscription = "s"
count = 2
ack_rate = 100
[[phases]]
name = "x"
duration = 10
rates = { a = { from = 100, to = 300 } }
"""


def plans(workers: int):
    return build_plans(
        parse_scenario(TEXT),
        run_id="R",
        workers=workers,
        service_url="pulsar://127.0.0.1:6650",
        client="native",
        trace_dir="/tmp/x",
        trace_sample=1.0,
        partitions={"persistent://public/default/t1": 3},
    )


def test_rates_limits_and_indices_are_split_among_producers() -> None:
    run = plans(1)
    (worker,) = run.workers
    a0, a1, b0 = worker.producers
    assert [s.rate_from for s in a0.segments] == [50.0]
    assert [s.rate_to for s in a0.segments] == [150.0]
    assert (a0.messages, a1.messages, b0.messages) == (3, 2, -1)
    assert a0.partitions == [f"persistent://public/default/t1-partition-{i}" for i in range(3)]
    assert a0.partitioned
    assert not b0.partitioned
    assert (a0.first_index, a1.first_index, b0.first_index) == (0, 3, 6)
    assert a0.seed != a1.seed
    assert run.producer_names == {
        0: a0.name,
        1: a0.name,
        2: a0.name,
        3: a1.name,
        4: a1.name,
        5: a1.name,
        6: b0.name,
    }
    assert a0.name == "a-0-R"
    assert [c.ack_rate for c in worker.consumers] == [50.0, 50.0]


def test_consumers_and_producers_alternate_over_workers() -> None:
    run = plans(2)
    # Dealt c0, a0, c1, a1, b0: worker 0 gets c0, c1, b0; worker 1 gets a0, a1.
    assert [c.name for c in run.workers[0].consumers] == ["c-0", "c-1"]
    assert [p.name for p in run.workers[0].producers] == ["b-0-R"]
    assert [p.name for p in run.workers[1].producers] == ["a-0-R", "a-1-R"]
    assert run.workers[1].consumers == []
    workers_of = {(a.role, a.name, a.topic): a.worker for a in run.actors}
    assert workers_of[("consume", "c-0", "persistent://public/default/t1")] == 0
    assert len([a for a in run.actors if a.role == "produce"]) == 7
