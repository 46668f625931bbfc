"""Admin REST: the further namespace and topic policies, set, read, refused and removed.

Each namespace policy is read unset, written with a good body and with bad ones, read back (and
in the namespace's ``Policies``), deleted and read again; each topic policy the same on a topic
that exists, plus one call on a topic that does not.
"""

from __future__ import annotations

import time
from typing import Any

from conformance.probe import Probe
from conformance.scenarios.registry import scenario

_NS_POLICIES: dict[str, tuple[str, Any, dict[str, Any], str]] = {
    # segment: (write method, good body, bad bodies, the Policies field it shows in)
    "autoTopicCreation": (
        "POST",
        {"allowAutoTopicCreation": True, "topicType": "non-partitioned"},
        {
            "partitions_on_non_partitioned": {
                "allowAutoTopicCreation": True,
                "topicType": "non-partitioned",
                "defaultNumPartitions": 3,
            },
            "partitioned_without_count": {
                "allowAutoTopicCreation": True,
                "topicType": "partitioned",
            },
        },
        "autoTopicCreationOverride",
    ),
    "autoSubscriptionCreation": (
        "POST",
        {"allowAutoSubscriptionCreation": False},
        {},
        "autoSubscriptionCreationOverride",
    ),
    "subscriptionExpirationTime": (
        "POST",
        60,
        {"negative": -60},
        "subscription_expiration_time_minutes",
    ),
    "maxTopicsPerNamespace": ("POST", 100, {"negative": -1}, "max_topics_per_namespace"),
    "compactionThreshold": ("PUT", 1048576, {"negative": -1}, "compaction_threshold"),
    "persistence": (
        "POST",
        {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 1, "bookkeeperAckQuorum": 1},
        {
            "quorums_out_of_order": {
                "bookkeeperEnsemble": 1,
                "bookkeeperWriteQuorum": 2,
                "bookkeeperAckQuorum": 1,
            },
        },
        "persistence",
    ),
    "offloadDeletionLagMs": ("PUT", 1000, {}, "offload_policies"),
}


@scenario("admin")
def namespace_policies_more(probe: Probe) -> dict[str, Any]:
    """AutoTopicCreation ... offloadDeletionLagMs: each one's cycle, and the Policies shown."""
    base = "/admin/v2/namespaces/public/cf-pol-more"
    record: dict[str, Any] = {"create": probe.rest("PUT", base)}
    for segment, (method, good, bads, field) in _NS_POLICIES.items():
        path = f"{base}/{segment}"
        steps = {"get_unset": probe.rest("GET", path), "set": probe.rest(method, path, good)}
        steps["get"] = probe.rest("GET", path)
        steps["in_policies"] = probe.rest("GET", base)["body"].get(field)
        for name, body in bads.items():
            steps[f"bad_{name}"] = probe.rest(method, path, body)
        steps["delete"] = probe.rest("DELETE", path)
        steps["get_deleted"] = probe.rest("GET", path)
        record[segment] = steps
    record["offload_thresholds"] = {
        "get_bytes": probe.rest("GET", f"{base}/offloadThreshold"),
        "get_seconds": probe.rest("GET", f"{base}/offloadThresholdInSeconds"),
        "set_seconds": probe.rest("PUT", f"{base}/offloadThresholdInSeconds", 60),
        "get_seconds_after": probe.rest("GET", f"{base}/offloadThresholdInSeconds"),
    }
    props = f"{base}/properties"
    record["properties"] = {
        "get_unset": probe.rest("GET", props),
        "set": probe.rest("PUT", props, {"a": "1", "b": "2"}),
        "merge": probe.rest("PUT", props, {"b": "3"}),
        "get": probe.rest("GET", props),
        "clear": probe.rest("DELETE", props),
        "get_cleared": probe.rest("GET", props),
    }
    record["delete"] = probe.rest("DELETE", base)
    return record


_TOPIC_POLICIES: dict[str, tuple[Any, dict[str, Any]]] = {
    # segment: (good body, bad bodies)
    "retention": (
        {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10},
        {
            "single_zero": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 10},
        },
    ),
    "subscribeRate": ({"subscribeThrottlingRatePerConsumer": 10, "ratePeriodInSecond": 60}, {}),
    "publishRate": ({"publishThrottlingRateInMsg": 5}, {}),
    "maxMessageSize": (1048576, {"negative": -1, "above_broker": 6 * 1024 * 1024}),
    "maxUnackedMessagesOnConsumer": (1000, {"negative": -1}),
    "maxUnackedMessagesOnSubscription": (1000, {"negative": -1}),
    "deduplicationSnapshotInterval": (1000, {"negative": -1}),
    "schemaValidationEnforced": (True, {}),
    "autoSubscriptionCreation": ({"allowAutoSubscriptionCreation": True}, {}),
    "delayedDelivery": ({"tickTime": 2000, "active": True, "maxDeliveryDelayInMillis": 0}, {}),
    "replication": (["standalone"], {"empty": [], "other_cluster": ["cf-elsewhere"]}),
}


@scenario("admin")
def topic_policies_more(probe: Probe) -> dict[str, Any]:
    """Retention ... replication on a topic: each one's cycle, and a topic that does not exist."""
    topic = "/admin/v2/persistent/public/default/cf-topic-policies"
    record: dict[str, Any] = {"create": probe.rest("PUT", topic)}
    for segment, (good, bads) in _TOPIC_POLICIES.items():
        path = f"{topic}/{segment}"
        steps = {"get_unset": probe.rest("GET", path), "set": probe.rest("POST", path, good)}
        time.sleep(0.5)  # Pulsar applies topic policies through its system topic
        steps["get"] = probe.rest("GET", path)
        for name, body in bads.items():
            steps[f"bad_{name}"] = probe.rest("POST", path, body)
        steps["delete"] = probe.rest("DELETE", path)
        time.sleep(0.5)
        steps["get_deleted"] = probe.rest("GET", path)
        steps["missing_topic"] = probe.rest(
            "POST", f"/admin/v2/persistent/public/default/cf-nowhere/{segment}", good
        )
        record[segment] = steps
    ttl = f"{topic}/messageTTL"
    record["messageTTL"] = {
        "set": probe.rest("POST", f"{ttl}?messageTTL=600"),
        "negative": probe.rest("POST", f"{ttl}?messageTTL=-1"),
    }
    time.sleep(0.5)
    record["messageTTL"]["get"] = probe.rest("GET", ttl)
    record["delete"] = probe.rest("DELETE", f"{topic}?force=true")
    return record
