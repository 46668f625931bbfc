"""Dispatch throttling: deliveries per second under subscription, topic and broker rates.

Each scenario sets one rate (messages or bytes) at one level, publishes a backlog (all of it, in
full batches), waits ``IDLE_S``, attaches a consumer and counts what it receives in each second
of ``SECONDS``, all compared within 5 %. The idle wait fixes the limiter's phase: its bucket is
built with the subscription, before the backlog is published, and a consumer attached less than
a period after that left the start to chance (one run saw Pulsar deliver 200 in the first second
at 100/s); attached later, both brokers start from one full bucket. A slow consumer's cycle is
longer than a second, so it is compared per refill instead (``_bursts``). Both limiter
implementations of ``dispatchRateLimiterFactoryClassName`` are covered: the default
(AsyncTokenBucket) in the default profile, the classic one in the ``classic-limiter`` profile.
"""

from __future__ import annotations

import time
from typing import Any

import pulsar

from conformance.probe import Probe
from conformance.scenarios.registry import scenario

RATE = 100  # messages per second: 5 % of it is 5 messages, above a second's jitter
SECONDS = 5
PER_SECOND = {"first_second": 0.05, "per_second_after_first": 0.05}
PAYLOAD = 100  # bytes of each message's payload
IDLE_S = 1.5  # between the last receipt and the consumer's attach: more than one rate period
PAUSE_S = 0.4  # a pause this long between deliveries ends a refill's run (throttled: ~0.5 s)
REFILLS = 3  # refills compared for a slow consumer
PER_REFILL = {"per_refill": 0.05}


def _rate(msgs: int = -1, byte_rate: int = -1) -> dict[str, Any]:
    return {
        "dispatchThrottlingRateInMsg": msgs,
        "dispatchThrottlingRateInByte": byte_rate,
        "ratePeriodInSecond": 1,
        "relativeToPublishRate": False,
    }


def _drain(
    probe: Probe, topic: str, *, backlog: int, batching: bool = False, queue: int = 1000,
    per_message_s: float = 0.0, by_refill: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """Publish ``backlog`` messages to a subscription ``s``, then count deliveries.

    Every message is published (the producer blocks when its queue is full: a dropped
    ``send_async`` once left Pulsar, whose receipts are slower, a third of the backlog), and
    batches are always full (``backlog`` is a multiple of 10 and only the count closes a batch:
    a partial batch is a read entry carrying fewer messages, which moves the debt between
    seconds). The consumer attaches ``IDLE_S`` after the last receipt, so every limiter was built
    more than a period before its first read and starts with exactly one full bucket.
    """
    failures: list[object] = []
    with probe.client() as client:
        client.subscribe(topic, "s").close()  # the subscription holds the backlog
        producer = client.create_producer(
            topic, batching_enabled=batching, batching_max_messages=10,
            batching_max_publish_delay_ms=60_000, block_if_queue_full=True,
        )  # fmt: skip
        for i in range(backlog):
            producer.send_async(
                f"{i:<{PAYLOAD}}".encode(),
                lambda result, _id: failures.append(result) if result != pulsar.Result.Ok else None,
            )
        producer.flush()
        time.sleep(IDLE_S)
        consumer = client.subscribe(topic, "s", receiver_queue_size=queue)
        window = SECONDS + (2 if by_refill else 0)
        start = time.monotonic()
        arrivals: list[float] = []
        while (elapsed := time.monotonic() - start) < window:
            try:
                msg = consumer.receive(200)
            except pulsar.Timeout:
                continue
            arrivals.append(elapsed)
            if per_message_s:
                time.sleep(per_message_s)
            consumer.acknowledge(msg)
    record: dict[str, Any] = {"published": backlog - len(failures)}
    if by_refill:
        return record | {"per_refill": _bursts(arrivals)[:REFILLS]}
    seconds = [0] * SECONDS
    for at in arrivals:
        if at < SECONDS:
            seconds[int(at)] += 1
    return record | {"first_second": seconds[0], "per_second_after_first": seconds[1:]}


def _bursts(arrivals: list[float]) -> list[int]:
    """Deliveries per refill: runs of arrivals split by pauses of ``PAUSE_S``, the last dropped.

    A slow consumer drains each refill over half a second, so the limiter's cycle (one period
    after the throttled read, plus the drain) is about 1.5 s and falls on the seconds at a
    phase that changes run to run, on both brokers; a refill's deliveries do not.
    """
    runs: list[int] = []
    previous = -PAUSE_S
    for at in arrivals:
        if at - previous >= PAUSE_S or not runs:
            runs.append(0)
        runs[-1] += 1
        previous = at
    return runs[:-1]  # the last may be cut by the end of the window


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


@scenario("throttling", tolerances=PER_REFILL)
def throttle_slow_consumer(probe: Probe) -> dict[str, Any]:
    """A subscription rate in messages, a consumer with a queue of 10 taking 2 ms a message."""
    return _namespace_rate(
        probe, "cf-thr-slow", "subscriptionDispatchRate", _rate(RATE), queue=10,
        per_message_s=0.002, by_refill=True,
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


@scenario("throttling", profile="classic-limiter", tolerances=PER_REFILL)
def classic_throttle_broker_messages(probe: Probe) -> dict[str, Any]:
    """The classic limiter: the broker's dispatch rate in messages, a slow consumer."""
    return _broker_rate(
        probe, "cf-cthr-broker", "dispatchThrottlingRateInMsg", RATE, queue=10,
        per_message_s=0.002, by_refill=True,
    )  # fmt: skip
