"""Dispatch throttling: deliveries per second under subscription, topic and broker rates.

Each scenario publishes a backlog, sets one rate (messages or bytes) at one level, attaches a
consumer and counts what it receives in each second of ``SECONDS``. The first second holds the
limiter's start (its phase against the subscribe differs between runs), so it is recorded
apart; the seconds after it are compared within 5 %. Both limiter implementations of
``dispatchRateLimiterFactoryClassName`` are covered: the default (AsyncTokenBucket) in the
default profile, the classic one in the ``classic-limiter`` profile.
"""

from __future__ import annotations

import time
from typing import Any

import pulsar

from conformance.probe import Probe
from conformance.scenarios.registry import scenario

RATE = 100  # messages per second: 5 % of it is 5 messages, above a second's jitter
SECONDS = 5
PER_SECOND = {"per_second_after_first": 0.05}
PAYLOAD = 100  # bytes of each message's payload


def _rate(msgs: int = -1, byte_rate: int = -1) -> dict[str, Any]:
    return {
        "dispatchThrottlingRateInMsg": msgs,
        "dispatchThrottlingRateInByte": byte_rate,
        "ratePeriodInSecond": 1,
        "relativeToPublishRate": False,
    }


def _drain(
    probe: Probe, topic: str, *, backlog: int, batching: bool = False, queue: int = 1000,
    per_message_s: float = 0.0,
) -> dict[str, Any]:  # fmt: skip
    """Publish ``backlog`` messages to a subscription ``s``, then count deliveries per second."""
    with probe.client() as client:
        client.subscribe(topic, "s").close()  # the subscription holds the backlog
        producer = client.create_producer(
            topic, batching_enabled=batching, batching_max_messages=10,
            batching_max_publish_delay_ms=5,
        )  # fmt: skip
        for i in range(backlog):
            producer.send_async(f"{i:<{PAYLOAD}}".encode(), None)
        producer.flush()
        consumer = client.subscribe(topic, "s", receiver_queue_size=queue)
        start = time.monotonic()
        seconds = [0] * SECONDS
        while (elapsed := time.monotonic() - start) < SECONDS:
            try:
                msg = consumer.receive(200)
            except pulsar.Timeout:
                continue
            seconds[min(int(elapsed), SECONDS - 1)] += 1
            if per_message_s:
                time.sleep(per_message_s)
            consumer.acknowledge(msg)
        return {"first_second": seconds[0], "per_second_after_first": seconds[1:]}


def _namespace_rate(
    probe: Probe, name: str, policy: str, rate: dict[str, Any], **drain: Any
) -> dict[str, Any]:
    base = f"/admin/v2/namespaces/public/{name}"
    record = {
        "create": probe.rest("PUT", base),
        "set_rate": probe.rest("POST", f"{base}/{policy}", rate),
        "read_back": probe.rest("GET", f"{base}/{policy}"),
    }
    drain.setdefault("backlog", RATE * (SECONDS + 2))
    return record | _drain(probe, f"persistent://public/{name}/t", **drain)


def _broker_rate(probe: Probe, name: str, key: str, value: int, **drain: Any) -> dict[str, Any]:
    config = "/admin/v2/brokers/configuration"
    base = f"/admin/v2/namespaces/public/{name}"
    record = {"create": probe.rest("PUT", base)}
    record["set_rate"] = probe.rest("POST", f"{config}/{key}/{value}")
    try:
        record["read_back"] = probe.rest("GET", f"{config}/values")["body"].get(key)
        drain.setdefault("backlog", RATE * (SECONDS + 2))
        return record | _drain(probe, f"persistent://public/{name}/t", **drain)
    finally:  # the broker's limit would throttle every later scenario
        probe.rest("POST", f"{config}/{key}/0")


@scenario("throttling", tolerances=PER_SECOND)
def dispatch_throttling(probe: Probe) -> dict[str, Any]:
    """A namespace's subscription dispatch rate in messages, non-batch, a fast consumer."""
    return _namespace_rate(probe, "cf-throttle", "subscriptionDispatchRate", _rate(RATE))


@scenario("throttling", tolerances=PER_SECOND)
def throttle_subscription_bytes(probe: Probe) -> dict[str, Any]:
    """A subscription dispatch rate in bytes (about 50 messages a second), non-batch."""
    return _namespace_rate(
        probe, "cf-thr-sub-bytes", "subscriptionDispatchRate", _rate(byte_rate=RATE * 60)
    )


@scenario("throttling", tolerances=PER_SECOND)
def throttle_topic_messages(probe: Probe) -> dict[str, Any]:
    """A namespace's per-topic dispatch rate in messages, non-batch."""
    return _namespace_rate(probe, "cf-thr-topic", "dispatchRate", _rate(RATE))


@scenario("throttling", tolerances=PER_SECOND)
def throttle_topic_bytes(probe: Probe) -> dict[str, Any]:
    """A namespace's per-topic dispatch rate in bytes, non-batch."""
    return _namespace_rate(probe, "cf-thr-topic-bytes", "dispatchRate", _rate(byte_rate=RATE * 60))


@scenario("throttling", tolerances=PER_SECOND)
def throttle_broker_messages(probe: Probe) -> dict[str, Any]:
    """The broker's dispatch rate in messages (a dynamic key), non-batch."""
    return _broker_rate(probe, "cf-thr-broker", "dispatchThrottlingRateInMsg", RATE)


@scenario("throttling", tolerances=PER_SECOND)
def throttle_broker_bytes(probe: Probe) -> dict[str, Any]:
    """The broker's dispatch rate in bytes (a dynamic key), non-batch."""
    return _broker_rate(probe, "cf-thr-broker-bytes", "dispatchThrottlingRateInByte", RATE * 60)


# Batches: a read may take as many entries as there are message tokens, so a limit of 100
# messages lets 100 batches of 10 out at once and then stays in debt for 9 s. A limit of 1000
# messages a second, one read's worth, shows a rate per second instead.
BATCH_RATE = RATE * 10


@scenario("throttling", tolerances=PER_SECOND)
def throttle_batches(probe: Probe) -> dict[str, Any]:
    """A subscription rate of 1000 messages a second over batches of 10 messages."""
    return _namespace_rate(
        probe, "cf-thr-batch", "subscriptionDispatchRate", _rate(BATCH_RATE), batching=True,
        backlog=BATCH_RATE * (SECONDS + 2),
    )  # fmt: skip


@scenario("throttling", tolerances=PER_SECOND)
def throttle_slow_consumer(probe: Probe) -> dict[str, Any]:
    """A subscription rate in messages, a consumer with a queue of 10 taking 5 ms a message."""
    return _namespace_rate(
        probe, "cf-thr-slow", "subscriptionDispatchRate", _rate(RATE), queue=10,
        per_message_s=0.005,
    )  # fmt: skip


@scenario("throttling", profile="classic-limiter", tolerances=PER_SECOND)
def classic_throttle_subscription_messages(probe: Probe) -> dict[str, Any]:
    """The classic limiter: a subscription rate in messages, non-batch."""
    return _namespace_rate(probe, "cf-cthr-sub", "subscriptionDispatchRate", _rate(RATE))


@scenario("throttling", profile="classic-limiter", tolerances=PER_SECOND)
def classic_throttle_topic_bytes(probe: Probe) -> dict[str, Any]:
    """The classic limiter: a topic rate in bytes, non-batch."""
    return _namespace_rate(probe, "cf-cthr-topic-bytes", "dispatchRate", _rate(byte_rate=RATE * 60))


@scenario("throttling", profile="classic-limiter", tolerances=PER_SECOND)
def classic_throttle_batches(probe: Probe) -> dict[str, Any]:
    """The classic limiter: a subscription rate of 1000 messages a second over batches of 10."""
    return _namespace_rate(
        probe, "cf-cthr-batch", "subscriptionDispatchRate", _rate(BATCH_RATE), batching=True,
        backlog=BATCH_RATE * (SECONDS + 2),
    )  # fmt: skip


@scenario("throttling", profile="classic-limiter", tolerances=PER_SECOND)
def classic_throttle_broker_messages(probe: Probe) -> dict[str, Any]:
    """The classic limiter: the broker's dispatch rate in messages, a slow consumer."""
    return _broker_rate(
        probe, "cf-cthr-broker", "dispatchThrottlingRateInMsg", RATE, queue=10,
        per_message_s=0.005,
    )  # fmt: skip
