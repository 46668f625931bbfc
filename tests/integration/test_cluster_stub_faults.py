"""The storage-stub of an ``emubroker cluster`` dies (``kill -9``): real processes, the official
client.

- Durable stub, no ``--restart``: every broker loses its metadata session a session timeout
  later and stops, cleanly (one ERROR line, no traceback) and at once; ``cluster start stub``
  brings the stub back and, with it, the brokers, and the client produces and consumes again.
- In-memory stub with ``--restart``: the stub comes back empty, so the supervisor says so in
  one WARNING and restarts the brokers, which re-create the cluster's defaults; the client
  produces and consumes again within a bound.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import psutil
import pulsar
import pytest

from emubroker.cluster.state import read_state
from tests.integration.conftest import make_client
from tests.support.cluster import ClusterProcess, cluster_process

pytestmark = pytest.mark.integration

SESSION_TIMEOUT = 2.0  # metadataStoreSessionTimeoutMillis of these clusters
# A session timeout after the stub's death the brokers notice; then they exit at once. The rest
# is slack for a busy 2-core machine.
STOP_BOUND = SESSION_TIMEOUT + 6.0
# From the stub's restart to a send acknowledged: brokers start (~1 s of CPU each), the client
# reconnects with its backoff.
SERVE_AGAIN_BOUND = 45.0


def _conf(tmp_path: Path) -> Path:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"metadataStoreSessionTimeoutMillis={int(SESSION_TIMEOUT * 1000)}\n")
    return conf


def _kill_stub(cluster: ClusterProcess) -> float:
    pid = read_state(cluster.run_dir).stub.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    return time.monotonic()


def _send_until_acked(service_url: str, topic: str, within: float) -> float:
    """Keep sending one message on fresh clients until one is acknowledged; when it was."""
    deadline = time.monotonic() + within
    last: Exception | None = None
    while time.monotonic() < deadline:
        client = make_client(service_url)
        try:
            producer = client.create_producer(topic, send_timeout_millis=3000)
            producer.send(b"again")
            return time.monotonic()
        except Exception as exc:  # any failure of the official client: try again
            last = exc
            time.sleep(0.2)
        finally:
            client.close()
    raise AssertionError(f"no send acknowledged within {within} s; last error: {last}")


def _produce_and_consume(service_url: str, topic: str, count: int) -> None:
    client = make_client(service_url)
    try:
        consumer = client.subscribe(topic, "check")
        producer = client.create_producer(topic)
        for i in range(count):
            producer.send(f"m{i}".encode())
        received = [consumer.receive(timeout_millis=10_000).data() for _ in range(count)]
        assert received == [f"m{i}".encode() for i in range(count)]
    finally:
        client.close()


def test_brokers_stop_cleanly_when_a_durable_stub_stays_down_and_start_with_it(
    tmp_path: Path,
) -> None:
    args = ("-n", "2", "--config", str(_conf(tmp_path)), "--data-dir", str(tmp_path / "data"))
    with cluster_process(tmp_path / "run", *args) as cluster:
        topic = f"persistent://public/default/durable-{uuid.uuid4().hex[:8]}"
        _produce_and_consume(cluster.ready["service_url"], topic, 5)
        brokers = [psutil.Process(b["pid"]) for b in cluster.ready["brokers"]]
        killed = _kill_stub(cluster)
        cluster.wait_event("stub-died", timeout=10)
        for _ in brokers:
            died = cluster.wait_event("broker-died", timeout=STOP_BOUND)
            assert "exited with status 1" in died["message"]
        stopped = time.monotonic() - killed
        assert stopped < STOP_BOUND
        assert not any(b.is_running() for b in brokers)
        status = cluster.cli("status").stdout.splitlines()
        stub_line = next(line for line in status if line.startswith("stub "))
        assert "dead (exit status -9)  restarts 0  durable " in stub_line
        for index in range(2):
            log = (cluster.run_dir / f"broker-{index}.log").read_text()
            assert "Traceback" not in log
            assert log.count("ERROR") == 1
            assert "ERROR emubroker.metadata.session_loss: metadata session lost" in log

        restarted = time.monotonic()
        started = cluster.cli("start", "stub")
        assert started.returncode == 0, started.stderr
        assert "2 of 2 brokers run" in started.stdout
        acked = _send_until_acked(cluster.ready["service_url"], topic, SERVE_AGAIN_BOUND)
        # The durable stub kept what was acknowledged before its death.
        client = make_client(cluster.ready["service_url"])
        try:
            reader = client.create_reader(topic, pulsar.MessageId.earliest)
            first = [reader.read_next(10_000).data() for _ in range(6)]
            assert first == [*(f"m{i}".encode() for i in range(5)), b"again"]
        finally:
            client.close()
        print(
            f"stub kill -> brokers stopped {stopped:.2f} s; start -> send {acked - restarted:.2f} s"
        )


def test_an_in_memory_stub_restarted_by_the_supervisor_restarts_the_cluster(
    tmp_path: Path,
) -> None:
    args = ("-n", "2", "--config", str(_conf(tmp_path)), "--restart")
    with cluster_process(tmp_path / "run", *args) as cluster:
        topic = f"persistent://public/default/memory-{uuid.uuid4().hex[:8]}"
        _produce_and_consume(cluster.ready["service_url"], topic, 3)
        killed = cluster.cli("kill", "stub", "--signal", "KILL")
        assert killed.returncode == 0, killed.stderr
        assert killed.stdout.startswith("sent SIGKILL to the storage-stub (pid ")
        lost = cluster.wait_event("stub-data-lost", timeout=10)
        assert lost["level"] == "warning"
        assert "every topic, subscription and message" in lost["message"]
        cluster.wait_event("stub-restarted", timeout=30)
        restarted = time.monotonic()
        cluster.wait_event("broker-restarted", timeout=SERVE_AGAIN_BOUND)
        cluster.wait_event("broker-restarted", timeout=SERVE_AGAIN_BOUND)
        acked = _send_until_acked(cluster.ready["service_url"], topic, SERVE_AGAIN_BOUND)
        _produce_and_consume(cluster.ready["service_url"], topic + "-after", 3)
        assert "broker-died" not in [e["event"] for e in cluster.seen]
        status = cluster.cli("status").stdout.splitlines()
        stub_line = next(line for line in status if line.startswith("stub "))
        assert "running pid" in stub_line
        assert "restarts 1  in memory" in stub_line
        print(f"stub restart -> first send acknowledged {acked - restarted:.2f} s")
