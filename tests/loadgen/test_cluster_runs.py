"""Runs that start a 3-broker `emubroker cluster`: a namespace unload, then one broker killed and
restarted, with every traced message checked against what the producers and consumers saw."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from loadgen.__main__ import main

pytestmark = pytest.mark.integration

TOPIC = "persistent://public/default/cluster-churn"

# Events run one after the other, and `kill` and `start` are `emubroker cluster` processes
# (a second or more each on a busy machine): the run lasts long enough for all three. Three
# partitions over the namespace's bundles spread the topic over the brokers, so the unload moves
# every partition and the kill takes some from the broker that served them.
SCENARIO = f"""
name = "cluster-churn"
seed = 11
[cluster]
start = {{ brokers = 3, storage = "memory" }}
[[topics]]
name = "{TOPIC}"
partitions = 3
[[producers]]
name = "in"
topic = "{TOPIC}"
rate = 200
size = 100
keys = {{ distribution = "random", count = 12 }}
[[consumers]]
name = "out"
topic = "{TOPIC}"
subscription = "s"
type = "Failover"
[[phases]]
name = "steady"
duration = "15s"
[[events]]
at = "1.5s"
action = "unload_namespace"
namespace = "public/default"
[[events]]
at = "3s"
action = "kill_broker"
broker = 0
[[events]]
at = "4.5s"
action = "restart_broker"
broker = 0
"""


def table(run_dir: Path, name: str) -> list[dict]:
    return pq.read_table(run_dir / name).to_pylist()


def test_a_three_broker_run_survives_an_unload_and_a_broker_killed_and_restarted(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(SCENARIO)
    # A run path too long for the supervisor's control socket: the cluster runs in a short
    # directory, moved into the run's logs at the end.
    run_dir = tmp_path / ("long-" * 12) / "run"
    code = main(["run", str(scenario), "--trace-dir", str(run_dir), "--no-dashboard"])
    assert code == 0
    manifest = json.loads((run_dir / "manifest.json").read_text())
    cluster = manifest["cluster"]
    assert cluster["started_by_loadgen"]
    assert [b["name"] for b in cluster["brokers"]] == ["broker-0", "broker-1", "broker-2"]
    hosts = cluster["service_url"].removeprefix("pulsar://").split(",")
    assert hosts == [b["service_url"].removeprefix("pulsar://") for b in cluster["brokers"]]
    assert cluster["stub_url"].startswith("stub://127.0.0.1:")

    events = table(run_dir, "events")
    assert [(e["action"], e["outcome"]) for e in events] == [
        ("UnloadNamespace", "ok"),
        ("KillBroker", "ok"),
        ("RestartBroker", "ok"),
    ]
    assert "broker-0 stopped by SIGKILL" in events[1]["detail"]
    assert "broker 0 started" in events[2]["detail"]

    # Every receipted send was delivered at the position its receipt named, with its key and
    # size. A send whose receipt was lost to the kill or the unload is sent again (no
    # deduplication, as in Pulsar by default): its first copy may be delivered too, as a
    # duplicate at another position.
    sends, receives = table(run_dir, "sends"), table(run_dir, "receives")
    acked = {}
    for row in sends:
        if row["error"] is None:
            assert row["receipt_ns"] >= row["send_ns"] >= row["intended_ns"]
            acked[(row["producer_index"], row["sequence_id"])] = row
    assert len(acked) > 1000
    position = ("topic", "ledger_id", "entry_id", "batch_index", "key", "size")
    delivered: dict[tuple[int, int], set[tuple]] = defaultdict(set)
    for row in receives:
        identity = (row["producer_index"], row["sequence_id"])
        assert row["receive_ns"] > acked[identity]["send_ns"]
        delivered[identity].add(tuple(row[f] for f in position))
    assert set(delivered) == set(acked)
    for identity, send in acked.items():
        assert tuple(send[f] for f in position) in delivered[identity], identity
        assert {(p[0], p[4], p[5]) for p in delivered[identity]} == {
            (send["topic"], send["key"], send["size"])
        }
    assert {row["topic"] for row in receives} == {f"{TOPIC}-partition-{i}" for i in range(3)}
    (check,) = manifest["checks"]["subscriptions"]
    assert (check["lost"], check["out_of_order"]) == (0, 0)
    assert check["duplicates"] == len(receives) - len(acked)

    # The unload and the kill moved the consumers: they were served by more than one broker and
    # reconnected, and the seconds table counts what the traces hold.
    served_by = Counter(row["broker"] for row in receives)
    assert len(served_by) >= 2, served_by
    seconds = table(run_dir, "seconds")
    assert sum(r["reconnections"] for r in seconds) >= 3
    assert sum(r["messages"] for r in seconds if r["role"] == "produce") == len(acked)
    assert sum(r["messages"] for r in seconds if r["role"] == "consume") == len(receives)

    # The supervisor's own record of the kill and the restart, and every broker's log.
    supervisor = (run_dir / "logs" / "cluster.log").read_text()
    died = [json.loads(line) for line in supervisor.splitlines() if '"broker-died"' in line]
    assert [(e["broker"], "SIGKILL" in e["message"]) for e in died] == [(0, True)]
    assert '"event":"broker-started"' in supervisor
    for index in range(3):
        assert (run_dir / "logs" / "cluster" / f"broker-{index}.log").exists()
    assert (run_dir / "logs" / "cluster" / "state.json").exists()


STUB_SCENARIO = """
name = "stub-churn"
seed = 3
[cluster]
start = { brokers = 1, storage = "durable" }
[[topics]]
name = "persistent://public/default/stub-churn"
[[producers]]
name = "in"
topic = "persistent://public/default/stub-churn"
rate = 100
size = 100
[[consumers]]
name = "out"
topic = "persistent://public/default/stub-churn"
subscription = "s"
[[phases]]
name = "steady"
duration = "10s"
[[events]]
at = "2s"
action = "kill_broker"
broker = "stub"
[[events]]
at = "3s"
action = "restart_broker"
broker = "stub"
"""


def test_a_run_kills_and_restarts_the_durable_stub_and_loses_nothing(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(STUB_SCENARIO)
    run_dir = tmp_path / "run"
    code = main(["run", str(scenario), "--trace-dir", str(run_dir), "--no-dashboard"])
    assert code == 0
    manifest = json.loads((run_dir / "manifest.json").read_text())
    # One broker, but under `emubroker cluster`: only its supervisor kills and starts the stub.
    assert [b["name"] for b in manifest["cluster"]["brokers"]] == ["broker-0"]
    assert (run_dir / "logs" / "cluster" / "stub.log").exists()
    events = table(run_dir, "events")
    assert [(e["action"], e["target"], e["outcome"]) for e in events] == [
        ("KillBroker", "stub", "ok"),
        ("RestartBroker", "stub", "ok"),
    ]
    assert "stub stopped by SIGKILL" in events[0]["detail"]
    assert "storage-stub started" in events[1]["detail"]
    (check,) = manifest["checks"]["subscriptions"]
    assert (check["lost"], check["out_of_order"]) == (0, 0)
