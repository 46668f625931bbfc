"""The cluster handle beyond the controls: bad input, async callers on any loop, processes.

Bad input gets its own exception with a message naming what was wrong; ``cluster.aio`` runs
the controls without blocking the caller's loop, on asyncio and trio (pytest's anyio plugin and
pytest-trio); ``mode="processes"`` runs the same controls against real broker processes.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import anyio
import pulsar
import pytest

from emubroker.config import ConfigError
from emubroker.testing import (
    BrokerHandle,
    ClusterAdminError,
    ClusterStoppedError,
    ClusterTimeoutError,
    PulsarCluster,
    UnknownBrokerError,
    run_pulsar_cluster,
)
from tests.integration.conftest import make_client

pytestmark = pytest.mark.integration


@pytest.fixture
def topic() -> str:
    return f"persistent://public/default/handle-{uuid.uuid4().hex[:12]}"


# ---- bad input --------------------------------------------------------------------------------


def test_a_handle_used_after_its_cluster_stopped() -> None:
    with run_pulsar_cluster(1) as cluster:
        broker = cluster.brokers[0]
    for use in (
        lambda: cluster.brokers,
        lambda: cluster.service_url,
        lambda: cluster.kill(broker),
        lambda: cluster.unload("public/default"),
        lambda: cluster.storage.inject(latency=1),
        lambda: cluster.wait_for_leader(),
    ):
        with pytest.raises(ClusterStoppedError, match="has stopped"):
            use()


def test_unknown_brokers_are_named(pulsar_cluster: PulsarCluster) -> None:
    stranger = BrokerHandle(index=0, id="127.0.0.1:1", service_url="", admin_url="")
    for ref in (3, -1, "127.0.0.1:1", "pulsar://10.0.0.1:6650", stranger):
        with pytest.raises(UnknownBrokerError, match=r"no broker .* its brokers are 0 \("):
            pulsar_cluster.kill(ref)
    with pytest.raises(UnknownBrokerError):
        pulsar_cluster.stop(True)  # a bool is not an index
    # By index, id and either URL, the same broker.
    second = pulsar_cluster.brokers[1]
    for ref in (1, second.id, second.service_url, second.admin_url):
        assert pulsar_cluster.broker(ref) == second


def test_a_broker_that_is_down_cannot_be_killed_or_stopped(pulsar_cluster: PulsarCluster) -> None:
    pulsar_cluster.kill(2)
    for action in (pulsar_cluster.kill, pulsar_cluster.stop):
        with pytest.raises(UnknownBrokerError, match=r"broker 2 \(.*\): it is not running"):
            action(2)
    pulsar_cluster.restart(2)
    assert pulsar_cluster.brokers[2] in pulsar_cluster.running


def test_waits_that_time_out_say_what_they_waited_for(
    pulsar_cluster: PulsarCluster, topic: str
) -> None:
    # Nobody looked the topic up: nobody owns it.
    with pytest.raises(ClusterTimeoutError, match=f"{topic} was not owned by a running broker"):
        pulsar_cluster.wait_until_owned(topic, timeout=0.2)
    for broker in pulsar_cluster.brokers:
        pulsar_cluster.stop(broker)
    with pytest.raises(ClusterTimeoutError, match="did not agree on a running leader"):
        pulsar_cluster.wait_for_leader(timeout=0.1)
    with pytest.raises(UnknownBrokerError, match="no broker of this cluster is running"):
        pulsar_cluster.unload("public/default")


def test_bad_names_and_arguments(pulsar_cluster: PulsarCluster, topic: str) -> None:
    with pytest.raises(ValueError, match="not a topic, namespace or bundle name"):
        pulsar_cluster.unload("a/b/c/d")
    with pytest.raises(ValueError, match="is not a bundle"):
        pulsar_cluster.split("public/default")
    with pytest.raises(ValueError, match="needs the namespace or topic"):
        pulsar_cluster.set_dispatch_rate("topic", messages=1)
    with pytest.raises(ValueError, match="no namespace-level dispatch rate for"):
        pulsar_cluster.set_dispatch_rate("namespace", topic, messages=1)
    with pytest.raises(ValueError, match="latency must be >= 0"):
        pulsar_cluster.storage.inject(latency=-1)
    with pytest.raises(ClusterAdminError, match=r"PUT /admin/v2/namespaces/nope/ns/unload .*404"):
        pulsar_cluster.unload("nope/ns")


def test_bad_cluster_options() -> None:
    with pytest.raises(ValueError, match="at least one broker"), run_pulsar_cluster(0):
        pass
    with pytest.raises(ValueError, match="unknown cluster mode"), run_pulsar_cluster(mode="vms"):  # type: ignore[arg-type]
        pass
    with pytest.raises(ConfigError, match="noSuchKey"), run_pulsar_cluster(config={"noSuchKey": 1}):
        pass


# ---- async tests, any loop ---------------------------------------------------------------------


async def drive_asynchronously(cluster: PulsarCluster, topic: str) -> None:
    """Unload to another broker, kill the owner, inject latency: all awaited, loop never blocked."""
    client = make_client(cluster.service_url)
    try:
        producer = client.create_producer(topic)
        consumer = client.subscribe(topic, "sub")
        producer.send(b"0")
        owner = await cluster.aio.wait_until_owned(topic)
        other = next(b for b in cluster.brokers if b != owner)
        await cluster.aio.unload(topic, to=other)
        producer.send(b"1")
        assert await cluster.aio.wait_until_owned(topic, by=other) == other
        await cluster.aio.kill(other)
        assert await cluster.aio.leader() in cluster.running
        producer.send(b"2")
        assert await cluster.aio.owner_of(topic) not in (None, other)
        await cluster.aio.storage.inject(latency=0)
        assert (await cluster.aio.storage.statistics()).faults.failed == 0
        seen: set[bytes] = set()
        while not seen >= {b"0", b"1", b"2"}:  # a redelivery may come in between
            message = consumer.receive(5000)
            consumer.acknowledge(message)
            seen.add(message.data())

        # While a control waits, the caller's loop runs its other tasks: the wait for a topic of
        # a namespace no client used (ownership is per bundle) lasts until this task makes it
        # owned, after its own sleeps.
        fresh = "persistent://public/default-2/" + topic.rsplit("/", 1)[1]
        owned = anyio.Event()

        async def wait_for_owner() -> None:
            await cluster.aio.wait_until_owned(fresh, timeout=60)
            owned.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_for_owner)
            for _ in range(5):
                await anyio.sleep(0.01)
            assert not owned.is_set()
            client.create_producer(fresh).close()
            with anyio.fail_after(60):
                await owned.wait()
    finally:
        client.close()


@pytest.mark.anyio
async def test_async_controls_with_the_anyio_plugin(
    pulsar_cluster: PulsarCluster, topic: str
) -> None:
    await drive_asynchronously(pulsar_cluster, topic)


@pytest.mark.trio
async def test_async_controls_with_pytest_trio(pulsar_cluster: PulsarCluster, topic: str) -> None:
    await drive_asynchronously(pulsar_cluster, topic)


# ---- real processes -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def process_cluster() -> Iterator[PulsarCluster]:
    with run_pulsar_cluster(3, mode="processes") as cluster:
        yield cluster


def test_processes_kill_with_sigkill_and_pending_sends_complete(
    process_cluster: PulsarCluster, topic: str
) -> None:
    cluster = process_cluster
    assert cluster.mode == "processes"
    assert cluster.wait_for_leader() in cluster.running
    client = make_client(cluster.service_url)
    try:
        producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=30_000)
        consumer = client.subscribe(topic, "sub")
        producer.send(b"warm-up")
        owner = cluster.wait_until_owned(topic)
        count, results, done = 50, [], threading.Event()

        def sent(result: pulsar.Result, _msg_id: pulsar.MessageId) -> None:
            results.append(result)
            if len(results) == count:
                done.set()

        for i in range(count):
            producer.send_async(str(i).encode(), sent)
            if i == 10:
                cluster.kill(owner)
        assert done.wait(60), f"{len(results)} of {count} sends completed"
        assert set(results) == {pulsar.Result.Ok}
        assert cluster.wait_until_owned(topic, timeout=30) != owner
        received = set()
        while len(received) < count + 1:
            message = consumer.receive(10_000)
            consumer.acknowledge(message)
            received.add(message.data())
        cluster.restart(owner)
        assert owner in cluster.running
        cluster.unload(topic, to=owner)
        producer.send(b"back")
        assert cluster.wait_until_owned(topic, by=owner, timeout=30) == owner
    finally:
        client.close()
