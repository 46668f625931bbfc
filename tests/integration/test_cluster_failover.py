"""The official client on a three-broker ``emubroker cluster`` through unloads and kills.

One cluster (processes: the stub and three brokers), 100 topics in a namespace of 8 bundles,
spread over every broker by the leader. Producers keep sending while every bundle is unloaded
in turn, then while a follower and then the leader are killed with SIGKILL. At the end every
acknowledged message has been received, in order per topic, by consumers that were never left
stuck, and a new leader took over within the session timeout.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest

from emubroker.admin_cli import AdminClient
from tests.integration.conftest import make_client
from tests.integration.test_cluster import (
    FAILOVER_SLACK,
    SESSION_TIMEOUT,
    wait_for_leader,
)
from tests.support.cluster import ClusterProcess, cluster_process

pytestmark = pytest.mark.integration

TOPICS = 100
BUNDLES = 8
NAMESPACE = "public/failover"


class Traffic:
    """Producers and consumers of every topic, and what each side saw."""

    def __init__(self, client: pulsar.Client, topics: list[str]) -> None:
        self.topics = topics
        self.acked: dict[str, set[int]] = defaultdict(set)
        self.received: dict[str, list[int]] = defaultdict(list)
        self._lock = threading.Lock()
        self._next = dict.fromkeys(topics, 0)
        self.consumers = [
            client.subscribe(
                topic,
                "acceptance",
                consumer_type=pulsar.ConsumerType.Failover,
                message_listener=self._on_message,
            )
            for topic in topics
        ]
        self.producers = {
            topic: client.create_producer(
                topic, batching_enabled=False, block_if_queue_full=True, send_timeout_millis=60_000
            )
            for topic in topics
        }

    def _on_message(self, consumer: Any, message: Any) -> None:
        topic, _, seq = message.data().decode().rpartition(":")
        with self._lock:
            self.received[topic].append(int(seq))
        consumer.acknowledge(message)

    def send_round(self, per_topic: int) -> None:
        """Send ``per_topic`` more messages to every topic, asynchronously."""
        for topic, producer in self.producers.items():
            for _ in range(per_topic):
                seq = self._next[topic]
                self._next[topic] = seq + 1

                def done(result: Any, _id: Any, topic: str = topic, seq: int = seq) -> None:
                    if result == pulsar.Result.Ok:
                        with self._lock:
                            self.acked[topic].add(seq)

                producer.send_async(f"{topic}:{seq}".encode(), done)

    def flush(self) -> None:
        for producer in self.producers.values():
            producer.flush()

    def wait_delivered(self, within: float) -> None:
        """Until every acknowledged message was received (none is left with a consumer stuck)."""
        deadline = time.monotonic() + within
        while True:
            with self._lock:
                missing = {
                    t: sorted(self.acked[t] - set(self.received[t]))[:5]
                    for t in self.topics
                    if self.acked[t] - set(self.received[t])
                }
            if not missing:
                return
            assert time.monotonic() < deadline, f"acknowledged but never received: {missing}"
            time.sleep(0.1)

    def check_order(self) -> None:
        """Per topic, first deliveries come in send order (redeliveries may repeat a suffix)."""
        with self._lock:
            for topic in self.topics:
                seen: set[int] = set()
                firsts = []
                for seq in self.received[topic]:
                    if seq not in seen:
                        seen.add(seq)
                        firsts.append(seq)
                assert firsts == sorted(firsts), (topic, firsts)


def unload(admin: AdminClient, bundle: str) -> None:
    admin.call("PUT", f"/admin/v2/namespaces/{NAMESPACE}/{bundle}/unload")


def owners(brokers: list[dict[str, Any]]) -> dict[str, str]:
    """Bundle -> broker id, from every broker's ownedNamespaces."""
    found = {}
    for broker in brokers:
        admin = AdminClient(str(broker["admin_url"]))
        owned = admin.call(
            "GET", f"/admin/v2/brokers/standalone/{broker['broker_id']}/ownedNamespaces"
        )
        for name in owned:
            if name.startswith(NAMESPACE + "/"):
                found[name.rsplit("/", 1)[1]] = str(broker["broker_id"])
    return found


def leader_admin_url(brokers: list[dict[str, Any]], leader_id: str) -> str:
    return str(next(b for b in brokers if b["broker_id"] == leader_id)["admin_url"])


@contextlib.contextmanager
def failover_cluster(tmp_path: Path) -> Iterator[tuple[ClusterProcess, str, AdminClient]]:
    """Three brokers with a short session timeout and NAMESPACE.

    Yields the cluster, the leader's id and an admin client of the first broker.
    """
    conf = tmp_path / "broker.conf"
    conf.write_text(f"metadataStoreSessionTimeoutMillis={int(SESSION_TIMEOUT * 1000)}\n")
    with cluster_process(tmp_path / "run", "--config", str(conf)) as cluster:
        brokers = cluster.ready["brokers"]
        leader_id = wait_for_leader(brokers[0])
        admin = AdminClient(str(brokers[0]["admin_url"]))
        admin.call("PUT", f"/admin/v2/namespaces/{NAMESPACE}", {"bundles": {"numBundles": BUNDLES}})
        yield cluster, leader_id, admin


def test_every_acknowledged_message_survives_unloads_and_kills(tmp_path: Path) -> None:
    with failover_cluster(tmp_path) as (cluster, leader_id, admin):
        brokers = cluster.ready["brokers"]
        run = uuid.uuid4().hex[:6]
        topics = [f"persistent://{NAMESPACE}/t{run}-{i}" for i in range(TOPICS)]
        client = make_client(cluster.ready["service_url"])
        try:
            traffic = Traffic(client, topics)
            bundles = admin.call("GET", f"/admin/v2/namespaces/{NAMESPACE}/bundles")
            ranges = [f"{lo}_{hi}" for lo, hi in itertools.pairwise(bundles["boundaries"])]
            placed = owners(brokers)
            assert set(placed) == set(ranges)
            assert set(placed.values()) == {str(b["broker_id"]) for b in brokers}

            # Every bundle unloaded in turn while messages are in flight.
            for bundle in ranges:
                traffic.send_round(3)
                unload(admin, bundle)
            traffic.flush()
            traffic.wait_delivered(within=60)

            # SIGTERM: the broker hands its bundles over before it exits, so no lookup sends a
            # client to it afterwards (its locks did not wait for the session to expire).
            stopping = next(b for b in brokers if b["broker_id"] != leader_id)
            traffic.send_round(3)
            assert cluster.cli("kill", str(stopping["broker_id"])).returncode == 0
            assert cluster.wait_event("broker-died")["broker"] == stopping["index"]
            survivor_admin = AdminClient(str(leader_admin_url(brokers, leader_id)))
            for topic in topics[:20]:
                lookup = survivor_admin.call("GET", "/lookup/v2/topic/" + topic.replace("://", "/"))
                assert lookup["brokerUrl"] != stopping["service_url"], topic
            traffic.flush()
            traffic.wait_delivered(within=60)
            assert cluster.cli("start", str(stopping["index"])).returncode == 0

            # kill -9 a follower, then the leader, with messages in flight each time.
            follower = next(b for b in brokers if b["broker_id"] != leader_id)
            leader = next(b for b in brokers if b["broker_id"] == leader_id)
            for victim in (follower, leader):
                traffic.send_round(3)
                killed = cluster.cli("kill", str(victim["broker_id"]), "--signal", "KILL")
                assert killed.returncode == 0, killed.stderr
                began = time.monotonic()
                traffic.send_round(3)
                if victim is leader:
                    survivor = next(b for b in brokers if b is not leader and b is not follower)
                    wait_for_leader(
                        survivor, other_than=leader_id, within=SESSION_TIMEOUT + FAILOVER_SLACK
                    )
                    assert time.monotonic() - began < SESSION_TIMEOUT + FAILOVER_SLACK
                traffic.flush()
                traffic.wait_delivered(within=60)
            traffic.check_order()
            sent = sum(len(v) for v in traffic.acked.values())
            assert sent == TOPICS * 3 * (len(ranges) + 5)  # every send was acknowledged
        finally:
            client.close()


def test_a_frozen_owner_whose_session_expired_cannot_write(tmp_path: Path) -> None:
    with failover_cluster(tmp_path) as (cluster, leader_id, _):
        brokers = cluster.ready["brokers"]
        topics = [f"persistent://{NAMESPACE}/z{uuid.uuid4().hex[:6]}-{i}" for i in range(12)]
        client = make_client(cluster.ready["service_url"])
        try:
            traffic = Traffic(client, topics)
            traffic.send_round(5)
            traffic.flush()
            placed = owners(brokers)
            frozen = next(
                b
                for b in brokers
                if b["broker_id"] != leader_id and b["broker_id"] in placed.values()
            )
            # Frozen past its session timeout: its locks expire while its process lives on.
            assert cluster.cli("kill", str(frozen["broker_id"]), "--signal", "STOP").returncode == 0
            traffic.send_round(5)  # these reach the frozen broker's sockets and wait there
            # Its session expires: the leader stops listing it (its registration and its bundle
            # locks are ephemeral nodes of that session and go at the same point).
            leader = next(b for b in brokers if b["broker_id"] == leader_id)
            leader_admin = AdminClient(str(leader["admin_url"]))
            began = time.monotonic()
            while str(frozen["broker_id"]) in leader_admin.call(
                "GET", "/admin/v2/brokers/standalone"
            ):
                assert time.monotonic() - began < SESSION_TIMEOUT + FAILOVER_SLACK
                time.sleep(0.1)
            # A new client's lookups (through the leader: the frozen broker accepts connections
            # it never answers) place the frozen broker's bundles elsewhere, and their new owner
            # fences the topics' ledgers.
            reader = make_client(str(leader["service_url"]))
            try:
                for topic in topics:
                    reader.create_reader(topic, pulsar.MessageId.earliest).close()
            finally:
                reader.close()
            assert cluster.cli("kill", str(frozen["broker_id"]), "--signal", "CONT").returncode == 0
            traffic.send_round(5)
            traffic.flush()
            traffic.wait_delivered(within=60)
            traffic.check_order()
            # The woken broker serves none of the bundles it lost.
            after = owners(brokers)
            lost = [b for b, owner in placed.items() if owner == frozen["broker_id"]]
            assert lost
            assert all(after.get(b) != frozen["broker_id"] for b in lost if b in after), after
        finally:
            client.close()
