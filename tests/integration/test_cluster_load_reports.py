"""Broker registration and load reports on ``emubroker cluster -n 3`` (real processes)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from emubroker.loadbalance.model.data import LocalBrokerData
from emubroker.loadbalance.runtime.broker_registry import read_reports
from emubroker.metadata.remote import open_remote_metadata_store
from tests.integration.conftest import make_client
from tests.support.cluster import ROOT, _env, cluster_process
from tests.support.rest import rest_call

pytestmark = pytest.mark.integration

SESSION_TIMEOUT = 3.0  # metadataStoreSessionTimeoutMillis of this cluster
# How much later than the session timeout a killed broker may still be listed: the session's
# expiry, the notification, and this test's polling on a busy 2-core machine.
SLACK = 2.0
CONF = f"""\
metadataStoreSessionTimeoutMillis={int(SESSION_TIMEOUT * 1000)}
loadBalancerReportUpdateMinIntervalMillis=200
loadBalancerHostUsageCheckIntervalMinutes=0.005
statsUpdateFrequencyInSecs=1
loadBalancerOverrideBrokerNicSpeedGbps=0.001
emubrokerAvailableProcessors=1
emubrokerMaxMemoryMB=4096
"""


def admin(admin_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``emubroker admin --admin-url URL ARGS``."""
    return subprocess.run(
        [sys.executable, "-m", "emubroker", "admin", "--admin-url", admin_url, *args],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=60,
    )


def listed(admin_url: str) -> list[str]:
    status, body = rest_call(admin_url, "GET", "/admin/v2/brokers/standalone")
    assert status == 200, body
    return list(body)


def reports(metadata_url: str) -> dict[str, LocalBrokerData]:
    """The registration nodes, read as the leader reads them (its own metadata session)."""

    async def read() -> dict[str, LocalBrokerData]:
        async with open_remote_metadata_store(metadata_url) as store:
            return await read_reports(store)

    return anyio.run(read)


class Producer(threading.Thread):
    """Publishes 1 KiB messages to one topic until stopped."""

    def __init__(self, service_url: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.client = make_client(service_url)
        self.producer = self.client.create_producer(topic, batching_enabled=False)
        self.stopping = threading.Event()
        self.sent = 0

    def run(self) -> None:
        while not self.stopping.is_set():
            self.producer.send(b"x" * 1024)
            self.sent += 1
            time.sleep(0.002)

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)
        self.client.close()


def wait_for(condition: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_three_brokers_report_their_own_load_and_a_killed_one_drops_out(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(CONF)
    with cluster_process(tmp_path / "run", "--config", str(conf)) as cluster:
        brokers = cluster.ready["brokers"]
        ids = sorted(b["broker_id"] for b in brokers)
        metadata_url = cluster.ready["metadata_url"]
        # Every broker registered before it served, and each lists them all.
        for broker in brokers:
            assert listed(broker["admin_url"]) == ids
        shown = admin(brokers[0]["admin_url"], "brokers", "list")
        assert (shown.returncode, json.loads(shown.stdout)) == (0, ids), shown.stderr
        registered = reports(metadata_url)
        assert sorted(registered) == ids
        for broker in brokers:
            report = registered[broker["broker_id"]]
            assert report.web_service_url == broker["admin_url"]
            assert report.pulsar_service_url == broker["service_url"]
            assert report.cpu.limit == 100.0  # emubrokerAvailableProcessors=1
            assert report.memory.limit == 4096.0
            assert 5 < report.memory.usage < 4096  # the process's own RSS in MiB
            assert report.bandwidth_in.limit == 1000.0  # 0.001 Gbit/s in kbit/s

        # Traffic on one broker shows in its report only.
        topic = f"persistent://public/default/load-{uuid.uuid4().hex[:8]}"
        target = brokers[1]
        producer = Producer(target["service_url"], topic)
        producer.start()
        try:
            status, lookup = rest_call(
                target["admin_url"], "GET", "/lookup/v2/topic/" + topic.replace("://", "/")
            )
            assert status == 200, lookup
            [owner] = [b for b in brokers if b["service_url"] == lookup["brokerUrl"]]

            def owner_busy() -> dict[str, LocalBrokerData] | None:
                current = reports(metadata_url)
                busy = current[owner["broker_id"]]
                ok = busy.msg_rate_in > 10 and busy.bandwidth_in.percent_usage() > 1
                return current if ok else None

            current = wait_for(owner_busy, 30, "the owner's report never showed the traffic")
            busy = current[owner["broker_id"]]
            assert busy.msg_throughput_in > 10_000  # ~1 KiB per message
            assert busy.num_producers >= 1
            [bundle] = [b for b in busy.bundles if b.startswith("public/default/")]
            assert busy.last_stats[bundle].producer_count == 1
            for other in brokers:
                if other is not owner:
                    quiet = current[other["broker_id"]]
                    assert quiet.msg_rate_in == 0.0
                    assert bundle not in quiet.bundles
            # The owner's own REST view and CLI say the same.
            shown = admin(owner["admin_url"], "broker-stats", "load-report")
            assert shown.returncode == 0, shown.stderr
            assert bundle in shown.stdout
            namespaces = admin(
                brokers[0]["admin_url"],
                "brokers",
                "namespaces",
                "standalone",
                "--url",
                owner["broker_id"],
            )
            assert namespaces.returncode == 0, namespaces.stderr
            assert bundle in namespaces.stdout  # answered by the owner (redirect)
        finally:
            producer.stop()

        health = admin(brokers[2]["admin_url"], "brokers", "healthcheck")
        assert (health.returncode, health.stdout.strip()) == (0, "ok"), health.stderr

        # kill -9: the node goes with the broker's metadata session.
        victim = brokers[2]
        killed = cluster.cli("kill", victim["broker_id"], "--signal", "KILL")
        assert killed.returncode == 0, killed.stderr
        began = time.monotonic()
        cluster.wait_event("broker-died")
        survivors = [b["broker_id"] for b in brokers if b is not victim]
        wait_for(
            lambda: listed(brokers[0]["admin_url"]) == sorted(survivors),
            SESSION_TIMEOUT + SLACK,
            "the killed broker is still listed",
        )
        gone_after = time.monotonic() - began
        assert gone_after < SESSION_TIMEOUT + SLACK, gone_after
        assert sorted(reports(metadata_url)) == sorted(survivors)
