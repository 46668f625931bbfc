"""The official client with ``pulsar.Client("http://host:admin-port")`` (spec §13).

Lookups, partition counts and regex topic lists then go over the admin REST API, while producers
and consumers still talk the binary protocol to the looked-up broker URL.
"""

from __future__ import annotations

import re
import urllib.request
import uuid
from collections.abc import Iterator

import pulsar
import pytest

from emubroker.testing import RunningBroker, run_broker_in_thread
from tests.integration.conftest import make_client

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def running() -> Iterator[RunningBroker]:
    with run_broker_in_thread() as broker:
        yield broker


@pytest.fixture
def http_client(running: RunningBroker) -> Iterator[pulsar.Client]:
    client = make_client(running.admin_url)
    try:
        yield client
    finally:
        client.close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def rest(running: RunningBroker, method: str, path: str, body: bytes | None = None) -> int:
    request = urllib.request.Request(
        running.admin_url + path,
        data=body,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        status: int = response.status
        return status


def test_produce_and_consume_through_an_http_service_url(http_client: pulsar.Client) -> None:
    topic = f"persistent://public/default/{unique('http')}"
    consumer = http_client.subscribe(topic, "sub")
    producer = http_client.create_producer(topic)
    for i in range(5):
        producer.send(b"m%d" % i)
    for i in range(5):
        message = consumer.receive(5000)
        assert message.data() == b"m%d" % i
        consumer.acknowledge(message)
    assert http_client.get_topic_partitions(topic) == [topic]


def test_partitioned_topic_created_over_rest(
    running: RunningBroker, http_client: pulsar.Client
) -> None:
    name = unique("parted")
    topic = f"persistent://public/default/{name}"
    assert (
        rest(running, "PUT", f"/admin/v2/persistent/public/default/{name}/partitions", b"3") == 204
    )
    assert http_client.get_topic_partitions(topic) == [f"{topic}-partition-{i}" for i in range(3)]
    consumer = http_client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = http_client.create_producer(topic)
    for i in range(6):
        producer.send(b"p%d" % i)
    got = sorted(consumer.receive(5000).data() for _ in range(6))
    assert got == sorted(b"p%d" % i for i in range(6))


def test_regex_subscription_lists_topics_over_rest(http_client: pulsar.Client) -> None:
    prefix = unique("rx")
    producers = [
        http_client.create_producer(f"persistent://public/default/{prefix}-{i}") for i in range(2)
    ]
    consumer = http_client.subscribe(
        re.compile(f"persistent://public/default/{prefix}-.*"),
        "sub",
        initial_position=pulsar.InitialPosition.Earliest,
    )
    for i, producer in enumerate(producers):
        producer.send(b"r%d" % i)
    got = sorted(consumer.receive(5000).data() for _ in range(2))
    assert got == [b"r0", b"r1"]


def test_unknown_namespace_fails_over_http(http_client: pulsar.Client) -> None:
    with pytest.raises(pulsar.PulsarException):
        http_client.create_producer("persistent://nobody/nothing/t")
