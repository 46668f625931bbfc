"""A producer's send times out while storage hangs; the application's retry gets it through."""

from __future__ import annotations

import pulsar
import pytest


def send_with_retries(producer, payload, attempts=10):
    """The application code under test: retry a send that timed out."""
    for _ in range(attempts - 1):
        try:
            return producer.send(payload)
        except pulsar.Timeout:
            continue
    return producer.send(payload)


def test_send_timeout_while_storage_stalls(pulsar_cluster):
    client = pulsar.Client(pulsar_cluster.service_url, operation_timeout_seconds=5)
    topic = "persistent://public/default/audit"
    producer = client.create_producer(topic, send_timeout_millis=300, batching_enabled=False)
    producer.send(b"before")

    pulsar_cluster.storage.inject(stall=1.0)  # the bookies stop answering for a second
    with pytest.raises(pulsar.Timeout):
        producer.send(b"during")

    # Still stalled: the retries time out until the stall is over, then one succeeds.
    assert send_with_retries(producer, b"after") is not None
    client.close()
