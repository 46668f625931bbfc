"""A consumer under a dispatch rate gets what the rate allows, and the rest once it is lifted."""

from __future__ import annotations

import pulsar
import pytest


def test_consumer_under_a_dispatch_rate(pulsar_cluster):
    client = pulsar.Client(pulsar_cluster.service_url, operation_timeout_seconds=5)
    topic = "persistent://public/default/reports"
    producer = client.create_producer(topic, batching_enabled=False)

    # Ten messages per minute for this topic, set before the consumer subscribes.
    pulsar_cluster.set_dispatch_rate("topic", topic, messages=10, period=60)
    consumer = client.subscribe(topic, "dashboard")
    for i in range(30):
        producer.send(f"report-{i}".encode())

    first = [consumer.receive(timeout_millis=5000) for _ in range(10)]
    with pytest.raises(pulsar.Timeout):  # the eleventh waits for the next minute
        consumer.receive(timeout_millis=500)
    for message in first:
        consumer.acknowledge(message)

    # What the broker counted: ten sent, twenty held back.
    stats = pulsar_cluster.admin("GET", "/admin/v2/persistent/public/default/reports/stats")
    assert stats["subscriptions"]["dashboard"]["msgOutCounter"] == 10

    pulsar_cluster.set_dispatch_rate("topic", topic, messages=-1)  # no limit
    rest = [consumer.receive(timeout_millis=5000) for _ in range(20)]
    assert rest[-1].data() == b"report-29"
    client.close()
