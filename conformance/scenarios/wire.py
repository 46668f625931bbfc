"""Wire answers: client errors the broker causes, receipts, redeliveries, dead letters, acks."""

from __future__ import annotations

import time
from typing import Any

import pulsar

from conformance import javaprobe
from conformance.probe import Probe, outcome
from conformance.scenarios.registry import TIMEOUT_MS, T, scenario

Kinds = pulsar.ConsumerType
Modes = pulsar.ProducerAccessMode


def _ok(call: Any) -> Any:
    return outcome(lambda: call() and "ok")


@scenario("wire")
def producer_exclusive_fenced(probe: Probe) -> dict[str, Any]:
    """Producers beside an Exclusive one: Exclusive, Shared, WaitForExclusive after it closed."""
    topic = T + "cf-exclusive"
    with probe.client() as client:
        first = client.create_producer(topic, access_mode=Modes.Exclusive)
        record = {
            "second_exclusive": _ok(
                lambda: client.create_producer(topic, access_mode=Modes.Exclusive)
            ),
            "shared": _ok(lambda: client.create_producer(topic)),
        }
        first.close()
        record["exclusive_after_close"] = _ok(
            lambda: client.create_producer(topic, access_mode=Modes.Exclusive)
        )
        return record


@scenario("wire")
def bad_subscription_names(probe: Probe) -> dict[str, Any]:
    """Subscribe with reserved or odd subscription names."""
    topic = T + "cf-subnames"
    with probe.client() as client:
        return {
            name or "<empty>": _ok(lambda name=name: client.subscribe(topic, name))
            for name in ("", "__compaction", "with space", "a/b", "ünï")
        }


@scenario("wire")
def consumer_busy(probe: Probe) -> dict[str, Any]:
    """A second consumer on an Exclusive subscription, and readers beside consumers."""
    topic = T + "cf-busy"
    with probe.client() as client:
        client.subscribe(topic, "x", consumer_type=Kinds.Exclusive)
        client.subscribe(topic, "f", consumer_type=Kinds.Failover)
        return {
            "exclusive_again": _ok(lambda: client.subscribe(topic, "x")),
            "failover_then_exclusive": _ok(lambda: client.subscribe(topic, "f")),
            "failover_then_shared": _ok(
                lambda: client.subscribe(topic, "f", consumer_type=Kinds.Shared)
            ),
            "reader": _ok(lambda: client.create_reader(topic, pulsar.MessageId.earliest)),
        }


@scenario("wire")
def topic_terminated(probe: Probe) -> dict[str, Any]:
    """Terminate a topic over REST, then publish to it and subscribe to it."""
    topic = T + "cf-terminated"
    path = "/admin/v2/persistent/public/default/cf-terminated"
    with probe.client() as client:
        producer = client.create_producer(topic)
        producer.send(b"before")
        terminated = probe.rest("POST", path + "/terminate")
        body = terminated["body"]
        if isinstance(body, dict) and "ledgerId" in body:
            body = {**body, "ledgerId": probe.ledger(body["ledgerId"])}
        return {
            "terminate": {"status": terminated["status"], "body": body},
            "send_after": _ok(lambda: producer.send(b"after")),
            "new_producer": _ok(lambda: client.create_producer(topic)),
            "consumer": _ok(
                lambda: client.subscribe(
                    topic, "s", initial_position=pulsar.InitialPosition.Earliest
                )
            ),
        }


@scenario("wire")
def message_too_large(probe: Probe) -> dict[str, Any]:
    """Payloads around the broker's maxMessageSize (5 MiB), without batching."""
    topic = T + "cf-large"
    with probe.client() as client:
        producer = client.create_producer(topic, batching_enabled=False)
        return {
            "one_mib": _ok(lambda: producer.send(b"x" * (1 << 20))),
            "five_mib": _ok(lambda: producer.send(b"x" * (5 << 20))),
            "six_mib": _ok(lambda: producer.send(b"x" * (6 << 20))),
        }


@scenario("wire")
def batch_receipts(probe: Probe) -> dict[str, Any]:
    """Receipts and received ids of messages sent in one batch."""
    topic = T + "cf-batch-ids"
    with probe.client() as client:
        consumer = client.subscribe(topic, "s")
        producer = client.create_producer(
            topic, batching_enabled=True, batching_max_messages=5,
            batching_max_publish_delay_ms=1000,
        )  # fmt: skip
        receipts: list[Any] = []
        for i in range(5):
            producer.send_async(f"m{i}".encode(), lambda _r, mid: receipts.append(mid))
        producer.flush()
        received = [consumer.receive(TIMEOUT_MS) for _ in range(5)]
        for msg in received:
            consumer.acknowledge(msg)
        return {
            "receipts": sorted((probe.message_id(m) for m in receipts), key=str),
            "received": [probe.message_id(m.message_id()) for m in received],
        }


@scenario("wire")
def ack_timeout_redelivery(probe: Probe) -> dict[str, Any]:
    """Redelivery counts after the client's ack timeout (10 s, its minimum), Shared."""
    topic = T + "cf-ack-timeout"
    with probe.client() as client:
        consumer = client.subscribe(
            topic, "s", consumer_type=Kinds.Shared, unacked_messages_timeout_ms=10_000
        )
        client.create_producer(topic).send(b"late")
        first = consumer.receive(TIMEOUT_MS)
        again = consumer.receive(20_000)
        consumer.acknowledge(again)
        return {
            "first": first.redelivery_count(),
            "after_timeout": again.redelivery_count(),
            "same_id": first.message_id() == again.message_id(),
        }


@scenario("wire")
def dead_letter_topic(probe: Probe) -> dict[str, Any]:
    """A message negatively acked past max_redeliver_count moves to the dead-letter topic."""
    topic = T + "cf-dlq"
    dlq = T + "cf-dlq-DLQ"
    with probe.client() as client:
        consumer = client.subscribe(
            topic, "s", consumer_type=Kinds.Shared, negative_ack_redelivery_delay_ms=100,
            dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(
                max_redeliver_count=2, dead_letter_topic=dlq, initial_subscription_name="init"
            ),
        )  # fmt: skip
        client.create_producer(topic).send(b"poison", properties={"p": "1"})
        counts = []
        for _ in range(3):
            msg = consumer.receive(TIMEOUT_MS)
            counts.append(msg.redelivery_count())
            consumer.negative_acknowledge(msg)
        nothing = outcome(lambda: consumer.receive(1500) and "received")
        dead = client.subscribe(dlq, "init").receive(TIMEOUT_MS)
        props = dict(dead.properties())
        return {
            "counts": counts,
            "after_max": nothing,
            "dlq_data": dead.data().decode(),
            "dlq_property_keys": sorted(props),
            "dlq_user_property": props.get("p"),
            "dlq_real_topic": props.get("REAL_TOPIC"),
        }


@scenario("wire")
def ack_outcomes(probe: Probe) -> dict[str, Any]:
    """Double acks, cumulative acks on Shared and on Exclusive, and what comes back after."""
    topic = T + "cf-acks"
    path = "/admin/v2/persistent/public/default/cf-acks/stats"
    with probe.client() as client:
        shared = client.subscribe(topic, "sh", consumer_type=Kinds.Shared)
        excl = client.subscribe(topic, "ex")
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(4):
            producer.send(f"m{i}".encode())
        got = [shared.receive(TIMEOUT_MS) for _ in range(4)]
        shared.acknowledge(got[0])
        double = outcome(lambda: shared.acknowledge(got[0]) or "ok")
        cumulative_shared = outcome(lambda: shared.acknowledge_cumulative(got[3]) or "ok")
        ex = [excl.receive(TIMEOUT_MS) for _ in range(4)]
        cumulative_excl = outcome(lambda: excl.acknowledge_cumulative(ex[2]) or "ok")
        time.sleep(0.5)  # grouped acks go out every 100 ms
        shared.close()
        excl.close()
        stats = probe.rest("GET", path)["body"].get("subscriptions", {})
        again = client.subscribe(topic, "sh", consumer_type=Kinds.Shared)
        redelivered = sorted(again.receive(TIMEOUT_MS).data().decode() for _ in range(3))
        return {
            "double_ack": double,
            "cumulative_on_shared": cumulative_shared,
            "cumulative_on_exclusive": cumulative_excl,
            "backlog_shared": stats.get("sh", {}).get("msgBacklog"),
            "backlog_exclusive": stats.get("ex", {}).get("msgBacklog"),
            "redelivered_shared": redelivered,
        }


@scenario("wire")
def unsubscribe_answers(probe: Probe) -> dict[str, Any]:
    """Unsubscribe with another consumer attached, then alone, then subscribe again."""
    topic = T + "cf-unsub"
    with probe.client() as client:
        a = client.subscribe(topic, "s", consumer_type=Kinds.Shared)
        b = client.subscribe(topic, "s", consumer_type=Kinds.Shared)
        record = {"with_other": outcome(lambda: a.unsubscribe() or "ok")}
        b.close()
        record["alone"] = outcome(lambda: a.unsubscribe() or "ok")
        subs = probe.rest("GET", "/admin/v2/persistent/public/default/cf-unsub/subscriptions")
        record["subscriptions_after"] = subs
        return record


@scenario("wire")
def delayed_delivery(probe: Probe) -> dict[str, Any]:
    """deliver_after on Shared and on Exclusive subscriptions: which arrives first."""
    topic = T + "cf-delayed"
    with probe.client() as client:
        shared = client.subscribe(topic, "sh", consumer_type=Kinds.Shared)
        excl = client.subscribe(topic, "ex")
        producer = client.create_producer(topic, batching_enabled=False)
        producer.send(b"delayed", deliver_after=__import__("datetime").timedelta(seconds=2))
        producer.send(b"now")
        return {
            "shared_first": shared.receive(TIMEOUT_MS).data().decode(),
            "exclusive_first": excl.receive(TIMEOUT_MS).data().decode(),
            "shared_second": shared.receive(TIMEOUT_MS).data().decode(),
        }


@scenario("wire")
def non_persistent_topic(probe: Probe) -> dict[str, Any]:
    """A non-persistent topic: receipts, delivery to a consumer, nothing kept for a later one."""
    topic = "non-persistent://public/default/cf-np"
    with probe.client() as client:
        consumer = client.subscribe(topic, "s")
        producer = client.create_producer(topic, batching_enabled=False)
        receipt = probe.message_id(producer.send(b"np"))
        got = consumer.receive(TIMEOUT_MS).data().decode()
        late = client.subscribe(topic, "late", initial_position=pulsar.InitialPosition.Earliest)
        return {
            "receipt": receipt,
            "received": got,
            "late_subscriber": outcome(lambda: late.receive(500) and "received"),
            "last_message_id": outcome(
                lambda: client.create_reader(
                    topic, pulsar.MessageId.earliest
                ).has_message_available()
            ),
        }


_FAILOVER_DELAY_MS = 500  # activeConsumerFailoverDelayTimeMillis in conformance/broker.conf
# On cf-failover-events the ring makes c2 active when it joins and keeps it when c3 joins; on
# cf-failover-c3 each join changes the active consumer. A non-persistent topic counts as
# partition 0: c1, first by name, stays active until it leaves.
_STEPS = "+c1,+c2,+c3,-active,-active"
_FAILOVER = {
    name: javaprobe.job(f"failover-{name}", f"failover {topic} {_FAILOVER_DELAY_MS} {steps}")
    for name, topic, steps in [
        ("persistent", T + "cf-failover-events", _STEPS),
        ("every_join_changes", T + "cf-failover-c3", _STEPS),
        ("non_persistent", "non-persistent://public/default/cf-failover-np", "+c1,+c2,+c3,-c1"),
    ]
}


@scenario("wire")
def failover_active_consumer_events(probe: Probe) -> dict[str, Any]:
    """ACTIVE_CONSUMER_CHANGE as the Java client's ConsumerEventListener hears it, Failover.

    Consumers c1, c2, c3 join one subscription, then the active one leaves (twice): who is told
    what, in which order, with the SUBSCRIBE's (or CLOSE_CONSUMER's) answer or the broker's
    delay later; on two persistent topics and a non-persistent one.
    """
    return {name: javaprobe.observe(probe.target, job) for name, job in _FAILOVER.items()}


@scenario("wire")
def batch_partly_acked_redelivery(probe: Probe) -> dict[str, Any]:
    """A batch of 5, two acked, three negatively acked: what comes back (Shared).

    acknowledgmentAtBatchIndexLevelEnabled is false (Pulsar 4.0's default): with and without the
    client's batch-index acks.
    """
    topic = T + "cf-batch-partial-ack"
    with probe.client() as client:
        consumers = {
            flag: client.subscribe(
                topic, f"index-acks-{str(flag).lower()}", consumer_type=Kinds.Shared,
                negative_ack_redelivery_delay_ms=100, batch_index_ack_enabled=flag,
            )
            for flag in (False, True)
        }  # fmt: skip
        producer = client.create_producer(
            topic, batching_enabled=True, batching_max_messages=5,
            batching_max_publish_delay_ms=1000,
        )  # fmt: skip
        for i in range(5):
            producer.send_async(f"m{i}".encode(), None)
        producer.flush()
        record: dict[str, Any] = {}
        for flag, consumer in consumers.items():
            got = [consumer.receive(TIMEOUT_MS) for _ in range(5)]
            for msg in got[:2]:
                consumer.acknowledge(msg)
            for msg in got[2:]:
                consumer.negative_acknowledge(msg)
            again: list[list[Any]] = []
            while True:
                try:  # the first redelivery 100 ms after the negative acks, the rest with it
                    msg = consumer.receive(500 if again else TIMEOUT_MS)
                except pulsar.Timeout:
                    break
                again.append([msg.data().decode(), msg.redelivery_count()])
                consumer.acknowledge(msg)
            record[f"client_index_acks_{str(flag).lower()}"] = {
                "first": [m.data().decode() for m in got],
                "redelivered": sorted(again),
            }
        return record


_TRANSACTIONS = javaprobe.job("transactions", "transactions")


@scenario("wire")
def transactions_disabled(probe: Probe) -> dict[str, Any]:
    """A Java client with transactions enabled, against a broker without a coordinator.

    Both brokers run without one (Pulsar's transactionCoordinatorEnabled=false, the default).
    """
    return javaprobe.observe(probe.target, _TRANSACTIONS)  # type: ignore[no-any-return]
