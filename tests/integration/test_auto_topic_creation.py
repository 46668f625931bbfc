"""The namespace's ``autoTopicCreation`` override as the official client sees it, on a process.

``emubroker standalone`` runs as a subprocess; the override is set over REST while it runs and
the official client's next producer obeys it: refused with ``TopicNotFound`` (Pulsar's client
reports the broker's PARTITIONED_METADATA failure so) where the override says false and the
broker allows, accepted where it says true (partitioned, with its count) and the broker does
not; once removed, the broker's key decides again.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest

from tests.integration.conftest import make_client
from tests.support.broker import StandaloneProcess, standalone_process
from tests.support.rest import rest_call

pytestmark = pytest.mark.integration

BROKER_KEY = "/admin/v2/brokers/configuration/allowAutoTopicCreation"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    conf: Path = tmp_path_factory.mktemp("conf") / "broker.conf"
    conf.write_text("allowAutoTopicCreation=false\n")
    with standalone_process("--config", str(conf)) as proc:
        yield proc


def rest(broker: StandaloneProcess, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    return rest_call(broker.admin_url, method, path, body)


def new_namespace(broker: StandaloneProcess) -> str:
    namespace = f"public/auto-{uuid.uuid4().hex[:8]}"
    assert rest(broker, "PUT", f"/admin/v2/namespaces/{namespace}")[0] == 204
    return namespace


def override(broker: StandaloneProcess, namespace: str, body: Any) -> None:
    path = f"/admin/v2/namespaces/{namespace}/autoTopicCreation"
    status, _ = rest(broker, "DELETE" if body is None else "POST", path, body)
    assert status == 204


def refused(client: pulsar.Client, topic: str) -> bool:
    try:
        client.create_producer(topic).close()
    except pulsar.TopicNotFound:
        return True
    return False


def test_the_override_decides_over_the_broker_key_until_removed(
    broker: StandaloneProcess,
) -> None:
    client = make_client(broker.service_url)
    try:
        allowing = new_namespace(broker)
        assert refused(client, f"persistent://{allowing}/before")  # the broker's key: false
        override(
            broker,
            allowing,
            {"allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 3},
        )
        topic = f"persistent://{allowing}/made"
        producer = client.create_producer(topic)
        assert client.get_topic_partitions(topic) == [f"{topic}-partition-{i}" for i in range(3)]
        assert {producer.send(f"m{i}".encode()).partition() for i in range(6)} == {0, 1, 2}
        producer.close()
        override(broker, allowing, None)
        assert refused(client, f"persistent://{allowing}/after")

        refusing = new_namespace(broker)
        assert rest(broker, "POST", f"{BROKER_KEY}/true")[0] == 200  # the broker allows now
        override(broker, refusing, {"allowAutoTopicCreation": False})
        assert refused(client, f"persistent://{refusing}/t")
        override(broker, refusing, None)
        client.create_producer(f"persistent://{refusing}/t").close()
    finally:
        client.close()
        rest(broker, "DELETE", BROKER_KEY)
