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
    "publishRate": (
        "POST",
        {"publishThrottlingRateInMsg": 1000, "publishThrottlingRateInByte": 1048576},
        {"string_rate": {"publishThrottlingRateInMsg": "many"}},
        "publishMaxMessageRate",
    ),
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


def _topic_policy_cycles(
    probe: Probe, topic: str, policies: dict[str, tuple[Any, dict[str, Any]]]
) -> dict[str, Any]:
    """Each policy's cycle on ``topic``: unset, set, read, bad bodies, delete, a missing topic."""
    record: dict[str, Any] = {}
    for segment, (good, bads) in policies.items():
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
    return record


@scenario("admin")
def topic_policies_more(probe: Probe) -> dict[str, Any]:
    """Retention ... replication on a topic: each one's cycle, and a topic that does not exist."""
    topic = "/admin/v2/persistent/public/default/cf-topic-policies"
    record: dict[str, Any] = {"create": probe.rest("PUT", topic)}
    record.update(_topic_policy_cycles(probe, topic, _TOPIC_POLICIES))
    ttl = f"{topic}/messageTTL"
    record["messageTTL"] = {
        "set": probe.rest("POST", f"{ttl}?messageTTL=600"),
        "negative": probe.rest("POST", f"{ttl}?messageTTL=-1"),
    }
    time.sleep(0.5)
    record["messageTTL"]["get"] = probe.rest("GET", ttl)
    record["delete"] = probe.rest("DELETE", f"{topic}?force=true")
    return record


@scenario("admin")
def namespace_affinity_groups(probe: Probe) -> dict[str, Any]:
    """The anti-affinity group and the bookie affinity group of a namespace: each one's cycle."""
    base = "/admin/v2/namespaces/public/cf-affinity"
    # Pulsar 4.0.7 writes an anti-affinity group even here: a name no other scenario uses.
    missing = "/admin/v2/namespaces/public/cf-affinity-nowhere"
    record: dict[str, Any] = {"create": probe.rest("PUT", base)}
    anti = f"{base}/antiAffinity"
    record["antiAffinity"] = {
        "get_unset": probe.rest("GET", anti),
        "set": probe.rest("POST", anti, text="cf-group"),
        "get": probe.rest("GET", anti),
        "bad_blank": probe.rest("POST", anti, text=" "),
        "delete": probe.rest("DELETE", anti),
        "get_deleted": probe.rest("GET", anti),
        "missing_namespace_get": probe.rest("GET", f"{missing}/antiAffinity")["status"],
        "missing_namespace_set": probe.rest("POST", f"{missing}/antiAffinity", text="g")["status"],
    }
    bookie = f"{base}/persistence/bookieAffinity"
    group = {"bookkeeperAffinityGroupPrimary": "g1", "bookkeeperAffinityGroupSecondary": "g2"}
    record["bookieAffinity"] = {
        "get_unset": probe.rest("GET", bookie),
        "set": probe.rest("POST", bookie, group),
        "get": probe.rest("GET", bookie),
        "bad_not_json": probe.rest("POST", bookie, text="{")["status"],
        "bad_type": probe.rest("POST", bookie, {"bookkeeperAffinityGroupPrimary": ["x"]})["status"],
        "delete": probe.rest("DELETE", bookie),
        "get_deleted": probe.rest("GET", bookie),
        "missing_namespace_get": probe.rest("GET", f"{missing}/persistence/bookieAffinity")[
            "status"
        ],
        "missing_namespace_set": probe.rest("POST", f"{missing}/persistence/bookieAffinity", group)[
            "status"
        ],
    }
    record["delete"] = probe.rest("DELETE", base)
    return record


_TOPIC_RATE_AND_OFFLOAD: dict[str, tuple[Any, dict[str, Any]]] = {
    "replicatorDispatchRate": (
        {
            "dispatchThrottlingRateInMsg": 10,
            "dispatchThrottlingRateInByte": 1000,
            "ratePeriodInSecond": 1,
            "relativeToPublishRate": False,
        },
        {"not_a_number": {"dispatchThrottlingRateInMsg": "x"}, "not_an_object": "x"},
    ),
    "offloadPolicies": (
        {
            "managedLedgerOffloadDriver": "aws-s3",
            "managedLedgerOffloadBucket": "cf-bucket",
            "managedLedgerOffloadRegion": "cf-region",
            "managedLedgerOffloadThresholdInBytes": 1048576,
        },
        {"not_a_number": {"managedLedgerOffloadThresholdInBytes": "x"}, "not_an_object": "x"},
    ),
}


@scenario("admin")
def topic_replicator_rate_and_offload(probe: Probe) -> dict[str, Any]:
    """ReplicatorDispatchRate and offloadPolicies on a topic: each one's cycle."""
    topic = "/admin/v2/persistent/public/default/cf-topic-rate-offload"
    record: dict[str, Any] = {"create": probe.rest("PUT", topic)}
    record.update(_topic_policy_cycles(probe, topic, _TOPIC_RATE_AND_OFFLOAD))
    record["delete"] = probe.rest("DELETE", f"{topic}?force=true")
    return record
