"""Dispatch throttling seen by the official client: delivered rates over several seconds.

Limits are set the way an operator does it: topic policies and namespace policies over REST, the
broker level through dynamic configuration. Rates are measured as a client sees them (receive
times, real clock) over a 4 s window after the first period, whose allowance goes out at once,
while the backlog lasts. Pulsar's own tests accept ±40 % over 5 s
(``DispatchRateLimiterOverconsumingTest``); these accept ±30 %.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pyarrow.parquet as pq
import pytest

from emubroker.testing import RunningBroker, run_broker_in_thread
from tests.integration.conftest import make_client
from tests.support.rest import rest_call

pytestmark = pytest.mark.integration

RATE = 20
MESSAGES = 120  # 20 at once, then 20 per second: the backlog lasts past the 4.5 s window
TOLERANCE = 0.3


@pytest.fixture
def broker() -> Iterator[RunningBroker]:
    with run_broker_in_thread() as running:
        yield running


def rest(broker: RunningBroker, method: str, path: str, body: Any = None) -> int:
    return rest_call(broker.admin_url, method, path, body)[0]


def topic_path(topic: str) -> str:
    return "/admin/v2/" + topic.replace("://", "/")


def new_topic() -> str:
    return f"persistent://public/default/thr-{uuid.uuid4().hex[:10]}"


def produce(client: pulsar.Client, topic: str, count: int, size: int = 10) -> None:
    # Blocking when the pending queue (1000 messages) is full: send_async fails otherwise.
    producer = client.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
    for i in range(count):
        producer.send_async(b"%d:" % i + b"x" * size, None)
    producer.flush()
    producer.close()


def drain(consumers: list[pulsar.Consumer], total: int, limit: float = 20.0) -> list[float]:
    """Receive ``total`` messages from the consumers; the receive time of each."""
    times: list[float] = []
    deadline = time.monotonic() + limit
    while len(times) < total and time.monotonic() < deadline:
        for consumer in consumers:
            try:
                message = consumer.receive(timeout_millis=20)
            except pulsar.Timeout:
                continue
            times.append(time.monotonic())
            consumer.acknowledge(message)
    assert len(times) == total, f"received {len(times)} of {total} in {limit} s"
    return times


def drain_paced(consumers: list[tuple[pulsar.Consumer, float]], total: int) -> list[float]:
    """``drain`` with each consumer in its own thread, working ``pace`` seconds per message.

    The consumer works on a message between receiving and acknowledging it, as an application
    does; the client groups the acks (100 ms) as it does by default.
    """
    times: list[float] = []
    lock = threading.Lock()
    deadline = time.monotonic() + 30.0

    def run(consumer: pulsar.Consumer, pace: float) -> None:
        while time.monotonic() < deadline:
            with lock:
                if len(times) >= total:
                    return
            try:
                message = consumer.receive(timeout_millis=50)
            except pulsar.Timeout:
                continue
            with lock:
                times.append(time.monotonic())
            time.sleep(pace)  # the application's work on the message
            consumer.acknowledge(message)

    threads = [threading.Thread(target=run, args=pair) for pair in consumers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(times) == total, f"received {len(times)} of {total}"
    return sorted(times)


def steady_rate(times: list[float], window: float = 4.0) -> float:
    """Messages per second received in ``window`` seconds after the first period.

    The window starts half a period after the first receipt (the first period's allowance goes
    out at once) and holds ``window`` refills, all while the backlog lasts.
    """
    start = min(times) + 0.5
    return sum(1 for t in times if start < t <= start + window) / window


def assert_rate(measured: float, expected: float) -> None:
    assert expected * (1 - TOLERANCE) <= measured <= expected * (1 + TOLERANCE), measured


def test_subscription_limit_set_over_rest_drains_backlog_at_rate(broker: RunningBroker) -> None:
    topic = new_topic()
    client = make_client(broker.service_url)
    try:
        consumer = client.subscribe(topic, "sub")
        status = rest(
            broker,
            "POST",
            topic_path(topic) + "/subscriptionDispatchRate",
            {"dispatchThrottlingRateInMsg": RATE, "dispatchThrottlingRateInByte": -1},
        )
        assert status == 204
        produce(client, topic, MESSAGES)
        assert_rate(steady_rate(drain([consumer], MESSAGES)), RATE)
    finally:
        client.close()


@pytest.mark.parametrize(
    ("policy", "rate", "paces"),
    [
        # 4 ms of work per message: a period's 200 messages are acked over 0.8 s, and no ack may
        # push the throttled read's retry further away (one retry per throttling episode).
        ("subscriptionDispatchRate", 200, {"sub": (0.004,)}),
        # Subscriptions with fast and slow consumers share a topic limit.
        ("dispatchRate", 100, {"fast": (0.0,), "slow": (0.006, 0.009)}),
    ],
)
def test_slow_and_fast_consumers_drain_a_backlog_at_the_limit(
    broker: RunningBroker, policy: str, rate: int, paces: dict[str, tuple[float, ...]]
) -> None:
    topic = new_topic()
    client = make_client(broker.service_url)
    try:
        consumers = [
            (client.subscribe(topic, sub, consumer_type=pulsar.ConsumerType.Shared), pace)
            for sub, sub_paces in paces.items()
            for pace in sub_paces
        ]
        body = {"dispatchThrottlingRateInMsg": rate}
        assert rest(broker, "POST", f"{topic_path(topic)}/{policy}", body) == 204
        count = 6 * rate // len(paces)  # every subscription reads every message: 6 periods
        produce(client, topic, count)
        assert_rate(steady_rate(drain_paced(consumers, count * len(paces))), rate)
    finally:
        client.close()


def test_byte_limit_drains_backlog_at_byte_rate(broker: RunningBroker) -> None:
    topic = new_topic()
    client = make_client(broker.service_url)
    size = 1000
    per_second = 5
    try:
        consumer = client.subscribe(topic, "sub")
        # Namespace level this time; the rate is in bytes (payload + metadata + checksum).
        status = rest(
            broker,
            "POST",
            "/admin/v2/namespaces/public/default/subscriptionDispatchRate",
            {"dispatchThrottlingRateInMsg": -1, "dispatchThrottlingRateInByte": per_second * size},
        )
        assert status == 204
        count = 30
        produce(client, topic, count, size=size)
        times = drain([consumer], count)
        # Entries are ~1.05 kB: ~5 per second, the debt of each overshoot carried forward.
        assert_rate(steady_rate(times) * size, per_second * size)
    finally:
        rest(broker, "DELETE", "/admin/v2/namespaces/public/default/subscriptionDispatchRate")
        client.close()


def test_topic_limit_is_shared_by_the_subscriptions(broker: RunningBroker) -> None:
    topic = new_topic()
    client = make_client(broker.service_url)
    try:
        consumers = [client.subscribe(topic, f"sub{i}") for i in range(2)]
        status = rest(
            broker,
            "POST",
            topic_path(topic) + "/dispatchRate",
            {"dispatchThrottlingRateInMsg": RATE},
        )
        assert status == 204
        per_sub = MESSAGES // 2
        produce(client, topic, per_sub)
        # Both subscriptions read the same 60 messages: 120 deliveries at 20/s in all.
        assert_rate(steady_rate(drain(consumers, 2 * per_sub)), RATE)
    finally:
        client.close()


def test_broker_limit_from_dynamic_config_applies_across_topics(broker: RunningBroker) -> None:
    topics = [new_topic(), new_topic()]
    client = make_client(broker.service_url)
    try:
        consumers = [client.subscribe(t, "sub") for t in topics]
        status = rest(
            broker, "POST", f"/admin/v2/brokers/configuration/dispatchThrottlingRateInMsg/{RATE}"
        )
        assert status == 200  # as Pulsar answers a dynamic-config update
        for t in topics:
            produce(client, t, MESSAGES // 2)
        assert_rate(steady_rate(drain(consumers, MESSAGES)), RATE)
    finally:
        rest(broker, "DELETE", "/admin/v2/brokers/configuration/dispatchThrottlingRateInMsg")
        client.close()


def test_bad_rates_are_rejected_with_pulsars_codes(broker: RunningBroker) -> None:
    base = "/admin/v2/namespaces/public/default/dispatchRate"
    assert rest(broker, "POST", base, {"dispatchThrottlingRateInMsg": -5}) == 412
    assert rest(broker, "POST", base, {"ratePeriodInSecond": 0}) == 412
    assert rest(broker, "POST", base, {"dispatchThrottlingRateInMsg": 2**40}) == 400
    assert rest(broker, "POST", base, {"dispatchThrottlingRateInMsg": "ten"}) == 400
    assert rest(broker, "POST", "/admin/v2/namespaces/public/nope/dispatchRate", {}) == 404
    missing = topic_path(new_topic()) + "/dispatchRate"
    assert rest(broker, "POST", missing, {"dispatchThrottlingRateInMsg": 1}) == 404


def test_the_broker_writes_a_dispatch_trace_when_configured(tmp_path: Path) -> None:
    with run_broker_in_thread(
        emubrokerDispatchTraceDir=str(tmp_path), dispatchThrottlingRatePerSubscriptionInMsg=1000
    ) as running:
        topic = new_topic()
        client = make_client(running.service_url)
        try:
            consumer = client.subscribe(topic, "sub")
            produce(client, topic, 30)
            drain([consumer], 30)
        finally:
            client.close()
    rows = pq.read_table(sorted(tmp_path.glob("dispatch-*.parquet"))).to_pylist()
    assert sum(r["messages"] for r in rows if r["subscription"] == "sub") == 30
    assert {r["subscription_msg_rate"] for r in rows} == {1000}
    assert {r["topic"] for r in rows} == {topic}
