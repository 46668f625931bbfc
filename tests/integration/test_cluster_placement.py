"""Placement by load on ``emubroker cluster -n 3`` (real processes, the official client).

Two brokers carry steady traffic on one bundle each; the third owns three bundles without
traffic. A fresh namespace's topic, looked up by the official client, lands where the leader's
LeastLongTermMessageRate puts it: on the broker with the least long-term message rate (the one
owning the most bundles, where the fewest-bundles rule would not have put it).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import make_client
from tests.integration.test_cluster import wait_for_leader
from tests.integration.test_cluster_leader_tasks import node
from tests.integration.test_cluster_load_reports import Producer, wait_for
from tests.support.cluster import cluster_process
from tests.support.rest import rest_call

pytestmark = pytest.mark.integration

CONF = """\
loadBalancerReportUpdateMinIntervalMillis=200
loadBalancerHostUsageCheckIntervalMinutes=0.005
statsUpdateFrequencyInSecs=1
loadBalancerResourceQuotaUpdateIntervalMinutes=0.02
emubrokerResourceUsageSource=model
"""


def create_namespace(admin_url: str, name: str) -> None:
    status, body = rest_call(
        admin_url, "PUT", f"/admin/v2/namespaces/{name}", {"bundles": {"numBundles": 1}}
    )
    assert status == 204, body


def owner(admin_url: str, topic: str, *, authoritative: bool = False) -> str:
    """The ``brokerUrl`` of a topic's owner (an HTTP lookup; authoritative makes it take it)."""
    path = "/lookup/v2/topic/" + topic.replace("://", "/")
    if authoritative:
        path += "?authoritative=true"
    status, body = rest_call(admin_url, "GET", path)
    assert status == 200, body
    return str(body["brokerUrl"])


def test_a_fresh_namespace_lands_on_the_least_loaded_broker(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(CONF)
    with cluster_process(tmp_path / "run", "--config", str(conf)) as cluster:
        brokers: list[dict[str, Any]] = cluster.ready["brokers"]
        metadata_url = cluster.ready["metadata_url"]
        wait_for_leader(brokers[0])
        run = uuid.uuid4().hex[:6]
        busy, idle = brokers[:2], brokers[2]
        # The idle broker takes three bundles (authoritative lookups, as after the leader's
        # redirect); each busy broker takes one and gets steady traffic.
        for i in range(3):
            create_namespace(idle["admin_url"], f"public/idle-{run}-{i}")
            topic = f"persistent://public/idle-{run}-{i}/t"
            assert owner(idle["admin_url"], topic, authoritative=True) == idle["service_url"]
        producers = []
        for i, broker in enumerate(busy):
            create_namespace(broker["admin_url"], f"public/busy-{run}-{i}")
            topic = f"persistent://public/busy-{run}-{i}/t"
            assert owner(broker["admin_url"], topic, authoritative=True) == broker["service_url"]
            producers.append(Producer(broker["service_url"], topic))
        for producer in producers:
            producer.start()
        try:
            # Until the leader's time averages show the busy brokers' traffic.
            def busy_averages() -> bool:
                rates = []
                for broker in busy:
                    average = node(
                        metadata_url, f"/loadbalance/broker-time-average/{broker['broker_id']}"
                    )
                    rates.append(0.0 if average is None else average["longTermMsgRateIn"])
                return all(rate > 20 for rate in rates)

            wait_for(busy_averages, 60, "the leader never saw the busy brokers' traffic")

            create_namespace(brokers[0]["admin_url"], f"public/fresh-{run}")
            fresh = f"persistent://public/fresh-{run}/t"
            client = make_client(brokers[0]["service_url"])
            try:
                consumer = client.subscribe(fresh, "s")
                producer = client.create_producer(fresh)
                for i in range(10):
                    producer.send(b"m%d" % i)
                received = []
                for _ in range(10):
                    message = consumer.receive(timeout_millis=10_000)
                    received.append(message.data())
                    consumer.acknowledge(message)
                assert received == [b"m%d" % i for i in range(10)]
            finally:
                client.close()
            assert owner(brokers[1]["admin_url"], fresh) == idle["service_url"]
        finally:
            for producer in producers:
                producer.stop()
