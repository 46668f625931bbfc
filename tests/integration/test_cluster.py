"""``emubroker cluster`` with real broker processes, the official client and leader failover."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from emubroker.cluster.state import read_state
from tests.integration.conftest import make_client
from tests.support.cluster import cluster_process, run_cli
from tests.support.rest import rest_call

pytestmark = pytest.mark.integration

ADMIN = (sys.executable, "-m", "emubroker", "admin")
SESSION_TIMEOUT = 4.0  # metadataStoreSessionTimeoutMillis of these clusters
# How much later than the session timeout a new leader may show: the session's expiry, the
# followers' notification and election, and this test's polling, on a busy 2-core machine.
FAILOVER_SLACK = 2.0


@pytest.fixture
def broker_conf(tmp_path: Path) -> Path:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"metadataStoreSessionTimeoutMillis={int(SESSION_TIMEOUT * 1000)}\n")
    return conf


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_gone(pids: list[int], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while any(map(alive, pids)):
        assert time.monotonic() < deadline, [pid for pid in pids if alive(pid)]
        time.sleep(0.05)


def leader_seen_by(broker: dict[str, object]) -> str | None:
    """The leader ``broker`` names, or None while an election runs (Pulsar's 404)."""
    status, body = rest_call(str(broker["admin_url"]), "GET", "/admin/v2/brokers/leaderBroker")
    if status == 404:
        return None
    assert status == 200, (status, body)
    assert body["serviceUrl"] == f"http://{body['brokerId']}"
    return str(body["brokerId"])


def wait_for_leader(
    broker: dict[str, object], *, other_than: str | None = None, within: float = 30.0
) -> str:
    """Poll until ``broker`` names a leader (other than ``other_than``) and return it."""
    deadline = time.monotonic() + within
    while (leader := leader_seen_by(broker)) is None or leader == other_than:
        assert time.monotonic() < deadline, f"no new leader seen by {broker['admin_url']}"
        time.sleep(0.05)
    return leader


def is_leader_metric(broker: dict[str, object]) -> str:
    with urllib.request.urlopen(f"{broker['admin_url']}/metrics", timeout=10) as response:
        text = response.read().decode()
    [line] = [ln for ln in text.splitlines() if ln.startswith("emubroker_leader_election_is")]
    return line.rsplit(" ", 1)[1]


def produce_and_consume(service_url: str, topics: list[str]) -> None:
    client = make_client(service_url)
    try:
        for topic in topics:
            consumer = client.subscribe(topic, "sub")
            producer = client.create_producer(topic)
            for i in range(5):
                producer.send(f"{topic}-{i}".encode())
            got = [consumer.receive(10_000) for _ in range(5)]
            for message in got:
                consumer.acknowledge(message)
            assert [m.data().decode() for m in got] == [f"{topic}-{i}" for i in range(5)]
    finally:
        client.close()


def test_three_brokers_serve_clients_and_a_killed_leader_is_replaced(
    tmp_path: Path, broker_conf: Path
) -> None:
    with cluster_process(tmp_path / "run", "--config", str(broker_conf)) as cluster:
        brokers = cluster.ready["brokers"]
        assert len(brokers) == 3
        ports = [f"127.0.0.1:{b['port']}" for b in brokers]
        assert cluster.ready["service_url"] == "pulsar://" + ",".join(ports)

        # Exactly one leader, and every broker names it.
        leaders = {wait_for_leader(b) for b in brokers}
        assert len(leaders) == 1
        [leader_id] = leaders
        [leader] = [b for b in brokers if b["broker_id"] == leader_id]
        assert sorted(is_leader_metric(b) for b in brokers) == ["0", "0", "1"]

        topics = [f"persistent://public/default/cluster-{uuid.uuid4().hex[:8]}" for _ in range(4)]
        produce_and_consume(cluster.ready["service_url"], topics)

        status = cluster.cli("status", "--json")
        assert status.returncode == 0, status.stderr
        summary = json.loads(status.stdout)
        assert summary["supervisor_running"]
        assert [b["status"] for b in summary["brokers"]] == ["running"] * 3

        # kill -9 the leader: its session expires and a follower takes over in time.
        killed = cluster.cli("kill", leader_id, "--signal", "KILL")
        assert killed.returncode == 0, killed.stderr
        began = time.monotonic()
        died = cluster.wait_event("broker-died")
        assert died["broker"] == leader["index"]
        survivors = [b for b in brokers if b is not leader]
        # During the re-election a follower answers 404 (no leader known), as Pulsar does.
        wait_for_leader(survivors[0], other_than=leader_id, within=SESSION_TIMEOUT + FAILOVER_SLACK)
        failover = time.monotonic() - began
        assert failover < SESSION_TIMEOUT + FAILOVER_SLACK, failover
        new_leaders = {wait_for_leader(b, other_than=leader_id) for b in survivors}
        assert len(new_leaders) == 1
        assert new_leaders != {leader_id}
        assert sorted(is_leader_metric(b) for b in survivors) == ["0", "1"]
        admin_url = survivors[1]["admin_url"]
        admin = subprocess.run(
            [*ADMIN, "--admin-url", admin_url, "brokers", "leader-broker"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert json.loads(admin.stdout)["brokerId"] in new_leaders

        # Started again on its ports, it follows the new leader.
        started = cluster.cli("start", str(leader["index"]))
        assert started.returncode == 0, started.stderr
        assert wait_for_leader(leader) == new_leaders.pop()
        produce_and_consume(cluster.ready["service_url"], topics[:1])
        pids = [b.pid for b in read_state(cluster.run_dir).brokers]
        pids.append(read_state(cluster.run_dir).stub.pid)

        assert cluster.stop(signal.SIGTERM) == 0
        wait_gone(pids)
        assert cluster.wait_event("stopped")
        assert read_state(cluster.run_dir).status == "stopped"


def test_restart_data_dir_and_control_from_another_shell(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    topic = f"persistent://public/default/durable-{uuid.uuid4().hex[:8]}"
    args = ("-n", "2", "--data-dir", str(data_dir), "--restart")
    with cluster_process(data_dir / "run", *args) as cluster:
        client = make_client(cluster.ready["service_url"])
        try:
            client.subscribe(topic, "sub").close()  # keeps what is produced
            producer = client.create_producer(topic)
            for i in range(20):
                producer.send(b"m%d" % i)
        finally:
            client.close()

        # A broker killed with -9 comes back by itself on the same ports.
        before = cluster.broker(1)
        assert cluster.cli("kill", "1", "--signal", "KILL").returncode == 0
        assert cluster.wait_event("broker-died")["broker"] == 1
        assert cluster.wait_event("broker-restarted")["broker"] == 1
        after = read_state(cluster.run_dir).brokers[1]
        assert (after.port, after.admin_port) == (before["port"], before["admin_port"])
        assert after.pid != before["pid"]
        assert after.restarts == 1
        assert rest_call(before["admin_url"], "GET", "/admin/v2/brokers/health")[0] == 200

        # One supervisor per run directory.
        second = run_cli("--port", "0", *args)
        assert second.returncode == 1
        assert "already running" in second.stderr

        # ``stop`` from another shell (the run directory found from the data directory):
        # brokers first, then the stub; the supervisor exits 0.
        stopped = run_cli("stop", "--data-dir", str(data_dir))
        assert stopped.returncode == 0, stopped.stderr
        assert cluster.proc.wait(timeout=60) == 0

    # A restart keeps everything.
    with cluster_process(data_dir / "run", *args) as cluster:
        client = make_client(cluster.ready["service_url"])
        try:
            consumer = client.subscribe(topic, "sub")
            got = [consumer.receive(10_000).data() for _ in range(20)]
            assert got == [b"m%d" % i for i in range(20)]
        finally:
            client.close()

        # A supervisor killed with -9 leaves its children; ``stop`` finds and stops them.
        state = read_state(cluster.run_dir)
        pids = [b.pid for b in state.brokers] + [state.stub.pid]
        cluster.proc.kill()
        cluster.proc.wait()
        status = cluster.cli("status")
        assert status.returncode == 1
        assert "not running" in status.stdout
        stop = cluster.cli("stop")
        assert stop.returncode == 0, stop.stderr
        assert "stopped leftover processes" in stop.stdout
        wait_gone([pid for pid in pids if pid is not None])


def test_a_broker_that_cannot_bind_fails_the_start_cleanly(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(
            *("-n", "1", "--port", str(port), "--admin-port", "0"),
            *("--run-dir", str(tmp_path / "run")),
        )
    assert result.returncode == 1
    assert "cannot start: broker 0 exited with status 1 before it was ready" in result.stderr
    assert "broker-0.log" in result.stderr
    state = read_state(tmp_path / "run")
    assert state.status == "failed"
    assert state.stub.pid is None
    assert not any(b.pid for b in state.brokers)


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    for args, message in (
        (["-n", "0"], "-n must be at least 1"),
        (["--port", "65535", "-n", "3"], "leaves no room for 3 brokers"),
        (["--config", str(tmp_path / "missing.conf")], "cannot read config file"),
    ):
        result = run_cli(*args, "--run-dir", str(tmp_path / "run"), timeout=60)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr
    assert not (tmp_path / "run").exists()  # nothing was started
