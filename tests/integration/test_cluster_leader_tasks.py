"""The leader's load-manager tasks on ``emubroker cluster -n 3`` (real processes).

The leader aggregates the brokers' reports, stores the bundle data and the brokers' time
averages at ``loadBalancerResourceQuotaUpdateIntervalMinutes`` (a fraction here), and runs its
shedding cycle, whose unload counters appear on its ``/metrics`` only.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from emubroker.metadata.remote import open_remote_metadata_store
from tests.integration.test_cluster import wait_for_leader
from tests.integration.test_cluster_load_reports import Producer, wait_for
from tests.support.cluster import cluster_process
from tests.support.rest import rest_call

pytestmark = pytest.mark.integration

CONF = """\
loadBalancerReportUpdateMinIntervalMillis=200
loadBalancerHostUsageCheckIntervalMinutes=0.005
statsUpdateFrequencyInSecs=1
loadBalancerResourceQuotaUpdateIntervalMinutes=0.02
loadBalancerSheddingIntervalMinutes=0.02
emubrokerResourceUsageSource=model
"""


def node(metadata_url: str, path: str) -> dict[str, Any] | None:
    async def read() -> dict[str, Any] | None:
        async with open_remote_metadata_store(metadata_url) as store:
            found = await store.get(path)
            return None if found is None else json.loads(found.value)

    return anyio.run(read)


def metrics(admin_url: str) -> str:
    with urllib.request.urlopen(f"{admin_url}/metrics", timeout=10) as response:
        return str(response.read().decode())


def test_the_leader_stores_bundle_data_and_runs_its_shedding_cycle(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(CONF)
    with cluster_process(tmp_path / "run", "--config", str(conf)) as cluster:
        brokers = cluster.ready["brokers"]
        metadata_url = cluster.ready["metadata_url"]
        leader_id = wait_for_leader(brokers[0])
        [leader] = [b for b in brokers if b["broker_id"] == leader_id]
        topic = f"persistent://public/default/leader-{uuid.uuid4().hex[:8]}"
        producer = Producer(brokers[0]["service_url"], topic)
        producer.start()
        try:
            status, lookup = rest_call(
                brokers[0]["admin_url"], "GET", "/lookup/v2/topic/" + topic.replace("://", "/")
            )
            assert status == 200, lookup
            [owner] = [b for b in brokers if b["service_url"] == lookup["brokerUrl"]]
            average_path = f"/loadbalance/broker-time-average/{owner['broker_id']}"

            def owner_average_moving() -> dict[str, Any] | None:
                average = node(metadata_url, average_path)
                busy = average is not None and average.get("shortTermMsgRateIn", 0) > 10
                return average if busy else None

            wait_for(owner_average_moving, 60, "the leader never stored the owner's averages")
            bundles = anyio.run(_children, metadata_url, "/loadbalance/bundle-data/public/default")
            assert bundles, "no bundle data stored for public/default"
            data = node(metadata_url, f"/loadbalance/bundle-data/public/default/{bundles[0]}")
            assert data is not None
            assert list(data) == ["shortTermData", "longTermData", "topics"]
            assert data["shortTermData"]["maxSamples"] == 10
            assert data["longTermData"]["maxSamples"] == 1000
        finally:
            producer.stop()

        # The leader ran shedding cycles over three brokers: its counters are on /metrics, with
        # nothing unloaded (the model usage is far from ThresholdShedder's threshold).
        def counters() -> str | None:
            text = metrics(leader["admin_url"])
            return text if "pulsar_lb_unload_bundle_total" in text else None

        text = wait_for(counters, 30, "the leader's unload counters never appeared")
        assert (
            'pulsar_lb_unload_bundle_total{cluster="standalone", metric="bundleUnloading"} 0'
            in (text)
        )
        for follower in (b for b in brokers if b is not leader):
            assert "pulsar_lb_unload_bundle_total" not in metrics(follower["admin_url"])


async def _children(metadata_url: str, path: str) -> list[str]:
    async with open_remote_metadata_store(metadata_url) as store:
        return await store.children(path)
