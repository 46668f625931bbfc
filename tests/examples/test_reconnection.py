"""A consumer keeps receiving while its topic moves between brokers."""

from __future__ import annotations

import pulsar


def test_consumer_follows_its_topic_across_brokers(pulsar_cluster):
    client = pulsar.Client(pulsar_cluster.service_url, operation_timeout_seconds=5)
    topic = "persistent://public/default/orders"
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "billing")

    producer.send(b"first")
    assert consumer.receive(timeout_millis=5000).data() == b"first"
    owner = pulsar_cluster.owner_of(topic)

    # Move the topic's bundle to another broker, as the load balancer would.
    target = next(b for b in pulsar_cluster.brokers if b != owner)
    pulsar_cluster.unload(topic, to=target)

    # The client reconnects by itself; the application just keeps going.
    producer.send(b"second")
    received = consumer.receive(timeout_millis=5000)
    while received.data() != b"second":  # at-least-once: "first" may come again
        received = consumer.receive(timeout_millis=5000)
    assert pulsar_cluster.wait_until_owned(topic, by=target) == target
    client.close()
