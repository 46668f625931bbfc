"""Admin REST on topics and subscriptions: lifecycle, messages, cursors, topic policies."""

from __future__ import annotations

import time
from typing import Any

import pulsar

from conformance.probe import Probe, normalise
from conformance.scenarios.registry import TIMEOUT_MS, T, scenario

A = "/admin/v2/persistent/public/default/"


def _publish(probe: Probe, name: str, count: int, subscribe: str | None = "s") -> list[Any]:
    with probe.client() as client:
        if subscribe:
            client.subscribe(T + name, subscribe).close()
        producer = client.create_producer(T + name, batching_enabled=False)
        return [producer.send(f"m{i}".encode(), properties={"i": str(i)}) for i in range(count)]


def _backlog(probe: Probe, name: str, sub: str = "s") -> Any:
    stats = probe.rest("GET", A + name + "/stats")["body"]
    return (
        stats.get("subscriptions", {}).get(sub, {}).get("msgBacklog")
        if isinstance(stats, dict)
        else stats
    )


@scenario("topics")
def topic_lifecycle(probe: Probe) -> dict[str, Any]:
    """Create, create again, list, delete, delete again a non-partitioned topic."""
    path = A + "cf-life"
    record: dict[str, Any] = {
        "create": probe.rest("PUT", path),
        "create_again": probe.rest("PUT", path),
    }
    record["listed"] = T + "cf-life" in probe.rest("GET", A.rstrip("/"))["body"]
    record["listed_partitioned"] = T + "cf-life" in probe.rest("GET", A + "partitioned")["body"]
    record["partitions_of_plain"] = probe.rest("GET", path + "/partitions")
    record["delete"] = probe.rest("DELETE", path)
    record["delete_again"] = probe.rest("DELETE", path)
    record["bad_name_create"] = probe.rest("PUT", A + "bad%2Fname%2F")["status"]
    return record


@scenario("topics")
def topic_delete_in_use(probe: Probe) -> dict[str, Any]:
    """Deleting a topic with a connected producer, with ?force, and a partitioned one."""
    with probe.client() as client:
        client.create_producer(T + "cf-inuse")
        record = {
            "delete_connected": probe.rest("DELETE", A + "cf-inuse"),
            "delete_forced": probe.rest("DELETE", A + "cf-inuse?force=true")["status"],
        }
    probe.rest("PUT", A + "cf-inuse-p/partitions", 2)
    record["delete_partitioned_by_plain_path"] = probe.rest("DELETE", A + "cf-inuse-p")
    record["delete_partitioned"] = probe.rest("DELETE", A + "cf-inuse-p/partitions")
    record["delete_partitioned_again"] = probe.rest("DELETE", A + "cf-inuse-p/partitions")
    return record


@scenario("topics")
def partitions_admin(probe: Probe) -> dict[str, Any]:
    """Partitioned topics: bad counts, growth, partitioned stats, a partition's own stats."""
    path = A + "cf-parts"
    record = {
        "create_zero": probe.rest("PUT", path + "/partitions", 0),
        "create_text": probe.rest("PUT", path + "/partitions", "x")["status"],
        "create": probe.rest("PUT", path + "/partitions", 2),
        "grow": probe.rest("POST", path + "/partitions", 4),
        "metadata": probe.rest("GET", path + "/partitions"),
        "create_plain_over_it": probe.rest("PUT", path),
        "create_partition_by_name": probe.rest("PUT", path + "-partition-1")["status"],
    }
    stats = probe.rest("GET", path + "/partitioned-stats")
    record["partitioned_stats_status"] = stats["status"]
    record["partitioned_stats_metadata"] = stats["body"].get("metadata")
    record["partitioned_stats_partitions"] = sorted(stats["body"].get("partitions", {}))
    record["per_partition_false"] = sorted(
        probe.rest("GET", path + "/partitioned-stats?perPartition=false")["body"].get(
            "partitions", {}
        )
    )
    record["plain_topic_partitioned_stats"] = probe.rest("GET", A + "cf-never/partitioned-stats")
    return record


@scenario("topics")
def subscriptions_admin(probe: Probe) -> dict[str, Any]:
    """Create, list, create again, delete subscriptions over REST; a connected one."""
    path = A + "cf-subs"
    probe.rest("PUT", path)
    record: dict[str, Any] = {
        "create": probe.rest("PUT", path + "/subscription/a"),
        "create_again": probe.rest("PUT", path + "/subscription/a"),
        "create_at_earliest": probe.rest(
            "PUT", path + "/subscription/b", {"ledgerId": -1, "entryId": -1}
        ),
        "create_on_missing_topic": probe.rest("PUT", A + "cf-subs-missing/subscription/a"),
    }
    record["list"] = sorted(probe.rest("GET", path + "/subscriptions")["body"])
    with probe.client() as client:
        client.subscribe(T + "cf-subs", "c")
        record["delete_connected"] = probe.rest("DELETE", path + "/subscription/c")
        record["delete_connected_forced"] = probe.rest(
            "DELETE", path + "/subscription/c?force=true"
        )["status"]
    record["delete"] = probe.rest("DELETE", path + "/subscription/a")
    record["delete_again"] = probe.rest("DELETE", path + "/subscription/a")
    record["list_after"] = sorted(probe.rest("GET", path + "/subscriptions")["body"])
    record["list_missing_topic"] = probe.rest("GET", A + "cf-subs-missing/subscriptions")
    return record


def _peek(probe: Probe, path: str) -> dict[str, Any]:
    answer = probe.session.get(probe.target.admin_url.rstrip("/") + path, timeout=10)
    headers = {k: v for k, v in answer.headers.items() if k.lower().startswith("x-pulsar")}
    return {
        "status": answer.status_code,
        "headers": sorted(headers),
        "property": headers.get("X-Pulsar-PROPERTY"),
        "batch": headers.get("X-Pulsar-num-batch-message"),
        "body": answer.content.decode(errors="replace") if answer.ok else answer.text,
    }


@scenario("topics")
def peek_and_examine(probe: Probe) -> dict[str, Any]:
    """Peek the n-th message of a subscription, examine, get by id, last message id."""
    ids = _publish(probe, "cf-peek", 3)
    first = ids[0]
    last = probe.rest("GET", A + "cf-peek/lastMessageId")
    if isinstance(last["body"], dict):
        last["body"]["ledgerId"] = probe.ledger(last["body"]["ledgerId"])
    return {
        "peek_1": _peek(probe, A + "cf-peek/subscription/s/position/1"),
        "peek_3": _peek(probe, A + "cf-peek/subscription/s/position/3"),
        "peek_past_end": _peek(probe, A + "cf-peek/subscription/s/position/4")["status"],
        "examine_earliest": _peek(
            probe, A + "cf-peek/examinemessage?initialPosition=earliest&messagePosition=1"
        ),
        "examine_latest": _peek(
            probe, A + "cf-peek/examinemessage?initialPosition=latest&messagePosition=1"
        ),
        "by_id": _peek(probe, A + f"cf-peek/ledger/{first.ledger_id()}/entry/{first.entry_id()}"),
        "last_message_id": last,
        "last_message_id_missing": probe.rest("GET", A + "cf-peek-missing/lastMessageId"),
        "peek_missing_topic": _peek(probe, A + "cf-peek-missing/subscription/s/position/1")[
            "status"
        ],
    }


@scenario("topics")
def skip_and_clear(probe: Probe) -> dict[str, Any]:
    """Skip n messages, skip all, on a subscription, and on a missing one."""
    _publish(probe, "cf-skip", 5)
    record = {"backlog_before": _backlog(probe, "cf-skip")}
    record["skip_2"] = probe.rest("POST", A + "cf-skip/subscription/s/skip/2")
    record["backlog_after_skip"] = _backlog(probe, "cf-skip")
    record["skip_all"] = probe.rest("POST", A + "cf-skip/subscription/s/skip_all")
    record["backlog_after_skip_all"] = _backlog(probe, "cf-skip")
    record["skip_missing_sub"] = probe.rest("POST", A + "cf-skip/subscription/nope/skip/1")
    record["skip_all_missing_sub"] = probe.rest("POST", A + "cf-skip/subscription/nope/skip_all")
    return record


@scenario("topics")
def expire_messages(probe: Probe) -> dict[str, Any]:
    """ExpireMessages on one subscription and on all, after the messages aged 2 s."""
    _publish(probe, "cf-expire", 4)
    probe.rest("PUT", A + "cf-expire/subscription/t")
    time.sleep(2.2)
    record = {
        "expire_not_old_enough": probe.rest(
            "POST", A + "cf-expire/subscription/s/expireMessages/60"
        ),
        "backlog_kept": _backlog(probe, "cf-expire"),
        "expire_1s": probe.rest("POST", A + "cf-expire/subscription/s/expireMessages/1"),
    }
    time.sleep(0.3)
    record["backlog_after"] = _backlog(probe, "cf-expire")
    record["expire_all"] = probe.rest("POST", A + "cf-expire/all_subscription/expireMessages/1")
    time.sleep(0.3)
    record["backlog_t_after"] = _backlog(probe, "cf-expire", "t")
    record["expire_missing_sub"] = probe.rest(
        "POST", A + "cf-expire/subscription/nope/expireMessages/1"
    )
    record["expire_missing_topic"] = probe.rest(
        "POST", A + "cf-gone/subscription/s/expireMessages/1"
    )
    return record


@scenario("topics")
def reset_cursor(probe: Probe) -> dict[str, Any]:
    """Reset a subscription's cursor to a message id and to a time; what is delivered next."""
    ids = _publish(probe, "cf-reset", 5)
    with probe.client() as client:
        consumer = client.subscribe(T + "cf-reset", "s")
        for _ in range(5):
            consumer.acknowledge(consumer.receive(TIMEOUT_MS))
        time.sleep(0.3)
        consumer.close()
    record = {"backlog_acked": _backlog(probe, "cf-reset")}
    record["reset_to_id_2"] = probe.rest(
        "POST", A + "cf-reset/subscription/s/resetcursor",
        {"ledgerId": ids[2].ledger_id(), "entryId": ids[2].entry_id()},
    )  # fmt: skip
    record["backlog_after_id"] = _backlog(probe, "cf-reset")
    with probe.client() as client:
        consumer = client.subscribe(T + "cf-reset", "s")
        record["next_after_id"] = consumer.receive(TIMEOUT_MS).data().decode()
        consumer.close()
    record["reset_to_time_0"] = probe.rest("POST", A + "cf-reset/subscription/s/resetcursor/0")
    record["backlog_after_time_0"] = _backlog(probe, "cf-reset")
    future = int(time.time() * 1000) + 60_000
    record["reset_to_future"] = probe.rest(
        "POST", A + f"cf-reset/subscription/s/resetcursor/{future}"
    )
    record["backlog_after_future"] = _backlog(probe, "cf-reset")
    record["reset_missing_sub"] = probe.rest("POST", A + "cf-reset/subscription/nope/resetcursor/0")
    record["reset_bad_body"] = probe.rest(
        "POST", A + "cf-reset/subscription/s/resetcursor", {"ledgerId": "x"}
    )["status"]
    return record


@scenario("topics")
def compaction_admin(probe: Probe) -> dict[str, Any]:
    """Trigger compaction, poll its status, read the compacted view."""
    with probe.client() as client:
        producer = client.create_producer(T + "cf-compact", batching_enabled=False)
        for key, value in [("a", "1"), ("b", "1"), ("a", "2"), ("c", "1"), ("b", "")]:
            producer.send(value.encode(), partition_key=key)
    record: dict[str, Any] = {"status_before": probe.rest("GET", A + "cf-compact/compaction")}
    record["trigger"] = probe.rest("PUT", A + "cf-compact/compaction")
    deadline = time.monotonic() + 20
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = probe.rest("GET", A + "cf-compact/compaction")
        if isinstance(status["body"], dict) and status["body"].get("status") != "RUNNING":
            break
        time.sleep(0.2)
    record["status_after"] = status
    with probe.client() as client:
        reader = client.create_reader(
            T + "cf-compact", __import__("pulsar").MessageId.earliest, is_read_compacted=True
        )
        seen = []
        while reader.has_message_available():
            msg = reader.read_next(TIMEOUT_MS)
            seen.append((msg.partition_key(), msg.data().decode()))
    record["compacted_view"] = seen
    record["trigger_missing"] = probe.rest("PUT", A + "cf-compact-missing/compaction")
    return record


@scenario("topics")
def unload_and_lookup(probe: Probe) -> dict[str, Any]:
    """Unload a topic (a producer reconnects), lookup over HTTP, and a missing topic's."""
    with probe.client() as client:
        producer = client.create_producer(T + "cf-unload")
        producer.send(b"before")
        unloaded = probe.rest("PUT", A + "cf-unload/unload")
        after = probe.message_id(producer.send(b"after"))
    lookup = normalise(probe.rest("GET", "/lookup/v2/topic/persistent/public/default/cf-unload"))
    return {
        "unload": unloaded,
        "send_after_unload_entry": after["entry"],
        "unload_missing": probe.rest("PUT", A + "cf-unload-missing/unload"),
        "lookup": lookup,
        "lookup_bundle": probe.rest(
            "GET", "/lookup/v2/topic/persistent/public/default/cf-unload/bundle"
        ),
        "lookup_missing_namespace": probe.rest(
            "GET", "/lookup/v2/topic/persistent/public/cf-nowhere/t"
        )["status"],
    }


@scenario("topics")
def topic_policies(probe: Probe) -> dict[str, Any]:
    """Topic-level count limits and dispatch rates: unset, set, applied, bad, delete."""
    path = A + "cf-tpol"
    probe.rest("PUT", path)
    rate = {"dispatchThrottlingRateInMsg": 7, "dispatchThrottlingRateInByte": -1,
            "ratePeriodInSecond": 1, "relativeToPublishRate": False}  # fmt: skip
    record: dict[str, Any] = {}
    for segment, good, bad in [
        ("maxProducers", 3, -1), ("maxConsumers", 3, -1),
        ("maxConsumersPerSubscription", 3, -1), ("maxSubscriptionsPerTopic", 3, -1),
        ("dispatchRate", rate, {**rate, "ratePeriodInSecond": 0}),
        ("subscriptionDispatchRate", rate, {**rate, "dispatchThrottlingRateInMsg": -5}),
    ]:  # fmt: skip
        p = f"{path}/{segment}"
        record[segment] = {
            "get_unset": probe.rest("GET", p),
            "set": probe.rest("POST", p, good),
            "bad": probe.rest("POST", p, bad),
            "missing_topic": probe.rest("POST", A + f"cf-tpol-missing/{segment}", good)["status"],
        }
        time.sleep(0.5)  # Pulsar applies topic policies through its system topic
        record[segment]["get"] = probe.rest("GET", p)
        record[segment]["delete"] = probe.rest("DELETE", p)
    return record


@scenario("topics")
def message_id_by_time(probe: Probe) -> dict[str, Any]:
    """The message id at a publish time: before all, at each, after all; bad and missing topics."""
    name = "cf-msgid-time"
    with probe.client() as client:
        producer = client.create_producer(T + name, batching_enabled=False)
        for i in range(3):
            producer.send(f"m{i}".encode())
            time.sleep(0.01)  # distinct publish times
        reader = client.create_reader(T + name, pulsar.MessageId.earliest)
        times = [reader.read_next(TIMEOUT_MS).publish_timestamp() for _ in range(3)]

    def at(timestamp: Any, topic: str = A + name) -> dict[str, Any]:
        answer = probe.rest("GET", f"{topic}/messageid/{timestamp}")
        body = answer["body"]
        if isinstance(body, dict) and isinstance(body.get("ledgerId"), int):
            body = {**body, "ledgerId": probe.ledger(body["ledgerId"])}
        return {"status": answer["status"], "body": body}

    probe.rest("PUT", A + "cf-msgid-parts/partitions", 2)
    return {
        "before_all": at(0),
        "at_each": [at(t) for t in times],
        "after_all": at(times[-1] + 60_000),
        "not_a_number": at("abc")["status"],
        "missing_topic": at(0, A + "cf-nowhere")["status"],
        "partitioned": at(0, A + "cf-msgid-parts")["status"],
        "partition": at(0, A + "cf-msgid-parts-partition-0"),
    }
