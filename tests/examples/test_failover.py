"""Sends in flight when the owning broker crashes still complete."""

from __future__ import annotations

import threading

import pulsar


def test_pending_sends_survive_a_broker_crash(pulsar_cluster):
    client = pulsar.Client(pulsar_cluster.service_url, operation_timeout_seconds=5)
    topic = "persistent://public/default/payments"
    producer = client.create_producer(topic, send_timeout_millis=30_000)
    producer.send(b"warm-up")
    owner = pulsar_cluster.owner_of(topic)

    results = []
    all_done = threading.Event()

    def on_sent(result, message_id):
        results.append(result)
        if len(results) == 100:
            all_done.set()

    for i in range(100):
        producer.send_async(f"payment-{i}".encode(), on_sent)
        if i == 20:
            pulsar_cluster.kill(owner)  # abrupt: no hand-over, connections drop

    assert all_done.wait(timeout=30)
    assert set(results) == {pulsar.Result.Ok}
    assert pulsar_cluster.wait_until_owned(topic) != owner  # another broker took over
    client.close()
