"""The broker's protective limits as the official client sees them (docs/reliability.md)."""

from __future__ import annotations

import socket
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

import pulsar
import pytest

from emubroker.testing import run_broker_in_thread
from tests.integration.conftest import make_client
from tests.support.broker import standalone_process
from tests.support.rest import rest_call

pytestmark = pytest.mark.integration

MIB = 1024 * 1024


def new_topic(prefix: str = "lim") -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"


def test_a_client_over_broker_max_connections_cannot_connect() -> None:
    with run_broker_in_thread(brokerMaxConnections=1) as broker:
        first = make_client(broker.service_url)
        second = make_client(broker.service_url)
        try:
            producer = first.create_producer(new_topic())
            # Pulsar answers ERROR NotAllowedError "Reached the maximum number of connections"
            # before the client's CONNECT; the client cannot open its connection.
            with pytest.raises((pulsar.ConnectError, pulsar.Timeout, pulsar.NotAllowedError)):
                second.create_producer(new_topic())
            producer.send(b"still served")  # the admitted client is not disturbed
        finally:
            second.close()
            first.close()
        third = make_client(broker.service_url)  # the first one left: room again
        try:
            third.create_producer(new_topic()).send(b"x")
        finally:
            third.close()


def test_topics_per_namespace_refuses_a_new_topic_with_not_allowed() -> None:
    with run_broker_in_thread(maxTopicsPerNamespace=2) as broker:
        client = make_client(broker.service_url)
        try:
            client.create_producer(new_topic()).close()
            client.subscribe(new_topic(), "s").close()
            with pytest.raises(pulsar.NotAllowedError):
                client.create_producer(new_topic())
            with pytest.raises(pulsar.NotAllowedError):
                client.subscribe(new_topic(), "s")
        finally:
            client.close()


def test_a_consumer_of_large_messages_is_neither_dropped_nor_redelivered() -> None:
    # 100 MiB for a consumer that grants 1000 permits: dispatch waits while its connection is
    # over the high water mark, so the broker never gets near the outbound cap.
    with run_broker_in_thread() as broker:
        client = make_client(broker.service_url)
        try:
            topic = new_topic("large")
            consumer = client.subscribe(topic, "s", receiver_queue_size=1000)
            producer = client.create_producer(topic, batching_enabled=False)
            for i in range(100):
                producer.send_async(bytes([i]) * MIB, None)
            producer.flush()
            for i in range(100):
                message = consumer.receive(30_000)
                assert message.data()[:1] == bytes([i])
                assert message.redelivery_count() == 0
                consumer.acknowledge(message)
            path = topic.replace("://", "/")
            status, stats = rest_call(broker.admin_url, "GET", f"/admin/v2/{path}/stats")
            assert status == 200
            consumers = stats["subscriptions"]["s"]["consumers"]
            assert [c["msgOutCounter"] for c in consumers] == [100]  # one connection throughout
        finally:
            client.close()


def test_publishing_under_pending_publish_back_pressure_loses_nothing(tmp_path: Path) -> None:
    # A durable broker awaits its journal, so SENDs pile up; at 10 per connection it stops
    # reading the producer's connection until 5 are stored, and every message still arrives.
    conf = tmp_path / "broker.conf"
    conf.write_text("maxPendingPublishRequestsPerConnection=10\n")
    with standalone_process(
        "--config", str(conf), "--data-dir", str(tmp_path / "data"), "--fsync", "always"
    ) as broker:
        client = make_client(broker.service_url)
        try:
            topic = new_topic("pending")
            consumer = client.subscribe(topic, "s")
            producer = client.create_producer(
                topic, batching_enabled=False, max_pending_messages=1000, block_if_queue_full=True
            )
            ids = []
            for i in range(500):
                producer.send_async(b"%d" % i, lambda result, msg_id: ids.append(result))
            producer.flush()
            assert ids == [pulsar.Result.Ok] * 500
            received = [consumer.receive(10_000).data() for _ in range(500)]
            assert received == [b"%d" % i for i in range(500)]
        finally:
            client.close()


def test_http_max_request_size_refuses_larger_bodies() -> None:
    with run_broker_in_thread(httpMaxRequestSize=64) as broker:
        path = "/admin/v2/tenants/t1"
        small = {"allowedClusters": ["standalone"]}
        assert rest_call(broker.admin_url, "PUT", path, small)[0] == 204
        large = {"allowedClusters": ["standalone"], "adminRoles": ["r" * 100]}
        assert rest_call(broker.admin_url, "PUT", "/admin/v2/tenants/t2", large)[0] == 400


def test_connections_past_the_open_files_limit_do_not_take_the_broker_down() -> None:
    # A hostile client opens connections until the broker has no file descriptor left: its
    # accepts fail, and it must neither exit nor stop serving the connections it has; once they
    # go, it accepts again.
    with standalone_process(open_files=128) as broker:
        address = urlparse(broker.service_url)
        held: list[socket.socket] = []
        try:
            for _ in range(300):  # more than the broker has descriptors
                held.append(socket.create_connection((address.hostname, address.port), 5))
            # The broker's accept loop meets the limit meanwhile: wait for it to say so.
            deadline = time.monotonic() + 30
            while not any("cannot accept connections" in line for line in broker.output):
                if broker.proc.poll() is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.02)
            assert broker.proc.poll() is None, "".join(broker.output)
            assert any("cannot accept connections" in line for line in broker.output)
        finally:
            for sock in held:
                sock.close()
        client = make_client(broker.service_url)
        try:
            topic = new_topic("fds")
            consumer = client.subscribe(topic, "s")
            client.create_producer(topic).send(b"served again")
            assert consumer.receive(10_000).data() == b"served again"
        finally:
            client.close()
        assert broker.stop() == 0


def test_an_admin_connection_that_never_finishes_its_headers_is_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Jetty's idle timeout (30 s, shortened here): a slow-headers client cannot hold the
    # admin server's descriptors, while a request right after it is served.
    monkeypatch.setattr("emubroker.admin.app.HTTP_IDLE_TIMEOUT_SECONDS", 0.5)
    with run_broker_in_thread() as broker:
        address = urlparse(broker.admin_url)
        with socket.create_connection((address.hostname, address.port), 5) as slow:
            slow.sendall(b"GET /admin/v2/clusters HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            slow.settimeout(10)
            started = time.monotonic()
            assert slow.recv(1024) == b""  # closed by the broker, without an answer
            assert time.monotonic() - started < 5
        assert rest_call(broker.admin_url, "GET", "/admin/v2/clusters") == (200, ["standalone"])
