"""More namespace policies over REST: stored in the Policies, Pulsar's shapes, statuses, reasons."""

from __future__ import annotations

from typing import Any

import pytest

from emubroker.admin.routes_namespace_policies import OFFLOAD_DEFAULTS
from tests.emubroker.admin.conftest import Admin

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

NS = "/admin/v2/namespaces/public/default"
MISSING_NS = "/admin/v2/namespaces/public/nope"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# (segment, write method, a value, what Pulsar serializes it as, its Policies field)
SIMPLE = [
    (
        "autoTopicCreation",
        "POST",
        {"allowAutoTopicCreation": True, "topicType": "non-partitioned"},
        {"allowAutoTopicCreation": True, "topicType": "non-partitioned"},
        "autoTopicCreationOverride",
    ),
    (
        "autoSubscriptionCreation",
        "POST",
        {"allowAutoSubscriptionCreation": True},
        {"allowAutoSubscriptionCreation": True},
        "autoSubscriptionCreationOverride",
    ),
    ("subscriptionExpirationTime", "POST", 60, 60, "subscription_expiration_time_minutes"),
    ("compactionThreshold", "PUT", 1048576, 1048576, "compaction_threshold"),
    (
        "persistence",
        "POST",
        {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 1, "bookkeeperAckQuorum": 1},
        {
            "bookkeeperEnsemble": 1,
            "bookkeeperWriteQuorum": 1,
            "bookkeeperAckQuorum": 1,
            "managedLedgerMaxMarkDeleteRate": 0.0,
        },
        "persistence",
    ),
]


@pytest.mark.parametrize(("segment", "method", "value", "shown", "field"), SIMPLE)
async def test_a_policy_is_set_read_shown_and_removed(
    admin: Admin, segment: str, method: str, value: Any, shown: Any, field: str
) -> None:
    path = f"{NS}/{segment}"
    assert await admin.get(path) == (200, None)  # Pulsar's null: 200 without a body
    await admin.ok(method, path, json=value)
    assert await admin.get(path) == (200, shown)
    assert (await admin.ok("GET", NS))[field] == shown  # `namespaces policies` shows it
    await admin.ok("DELETE", path)
    assert await admin.get(path) == (200, None)
    assert field not in await admin.ok("GET", NS)
    await admin.fails(
        method, f"{MISSING_NS}/{segment}", 404, "Namespace does not exist", json=value
    )


@pytest.mark.parametrize(
    ("segment", "method", "body", "status", "reason"),
    [
        (
            "subscriptionExpirationTime",
            "POST",
            -60,
            412,
            "Invalid value for subscription expiration time",
        ),
        ("maxTopicsPerNamespace", "POST", -1, 412, "maxTopicsPerNamespace must be 0 or more"),
        ("compactionThreshold", "PUT", -1, 412, "compactionThreshold must be 0 or more"),
        (
            "autoTopicCreation",
            "POST",
            {
                "allowAutoTopicCreation": True,
                "topicType": "non-partitioned",
                "defaultNumPartitions": 3,
            },
            412,
            "Invalid configuration for autoTopicCreationOverride. the detail is "
            "[defaultNumPartitions] is not allowed to be set when the type is non-partition.",
        ),
        (
            "autoTopicCreation",
            "POST",
            {"allowAutoTopicCreation": True, "topicType": "partitioned"},
            412,
            "Invalid configuration for autoTopicCreationOverride. the detail is "
            "[defaultNumPartitions] cannot be null when the type is partitioned.",
        ),
        (
            "autoTopicCreation",
            "POST",
            {"allowAutoTopicCreation": True, "topicType": "other"},
            412,
            "Invalid configuration for autoTopicCreationOverride. the detail is "
            "Unknown topic type [other]",
        ),
        (
            "persistence",
            "POST",
            {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 1},
            400,
            "Bookkeeper Ensemble (1) >= WriteQuorum (2) >= AckQuorum (1)",
        ),
        (
            "persistence",
            "POST",
            {"bookkeeperEnsemble": 0},
            400,
            "Bookkeeper-Ensemble must be <= 5 and > 0.",
        ),
    ],
)
async def test_bad_values_get_pulsars_answer(
    admin: Admin, segment: str, method: str, body: Any, status: int, reason: str
) -> None:
    await admin.fails(method, f"{NS}/{segment}", status, reason, json=body)
    assert (await admin.get(f"{NS}/{segment}"))[1] in (None, 0)  # nothing stored


async def test_disabling_auto_topic_creation_needs_no_type(admin: Admin) -> None:
    await admin.ok("POST", f"{NS}/autoTopicCreation", json={"allowAutoTopicCreation": False})
    assert await admin.get(f"{NS}/autoTopicCreation") == (200, {"allowAutoTopicCreation": False})


async def test_offload_settings_live_in_offload_policies(admin: Admin) -> None:
    # Defaults: the legacy fields' -1, and no deletion lag (null).
    assert await admin.get(f"{NS}/offloadThreshold") == (200, -1)
    assert await admin.get(f"{NS}/offloadThresholdInSeconds") == (200, -1)
    assert await admin.get(f"{NS}/offloadDeletionLagMs") == (200, None)
    # Pulsar answers this one 200 (an async resource), the others 204.
    assert await admin.call("PUT", f"{NS}/offloadThresholdInSeconds", json=60) == (200, None)
    await admin.ok("PUT", f"{NS}/offloadDeletionLagMs", json=0)
    await admin.ok("PUT", f"{NS}/offloadThreshold", json=1024)
    assert await admin.get(f"{NS}/offloadThresholdInSeconds") == (200, 60)
    assert await admin.get(f"{NS}/offloadDeletionLagMs") == (200, 0)
    assert await admin.get(f"{NS}/offloadThreshold") == (200, 1024)
    policies = await admin.ok("GET", NS)
    assert policies["offload_policies"] == {
        **OFFLOAD_DEFAULTS,  # a new OffloadPoliciesImpl's, as Pulsar shows them
        "managedLedgerOffloadThresholdInSeconds": 60,
        "managedLedgerOffloadDeletionLagInMillis": 0,
        "managedLedgerOffloadThresholdInBytes": 1024,
    }
    await admin.ok("DELETE", f"{NS}/offloadDeletionLagMs")
    assert await admin.get(f"{NS}/offloadDeletionLagMs") == (200, None)
    # Pulsar has no DELETE for the thresholds.
    await admin.fails("DELETE", f"{NS}/offloadThreshold", 405, "")


async def test_max_topics_per_namespace_reads_0_while_unset(admin: Admin) -> None:
    path = f"{NS}/maxTopicsPerNamespace"
    assert await admin.get(path) == (200, 0)  # Pulsar's answer, not null
    await admin.ok("POST", path, json=100)
    assert await admin.get(path) == (200, 100)
    assert (await admin.ok("GET", NS))["max_topics_per_namespace"] == 100
    await admin.ok("DELETE", path)
    assert await admin.get(path) == (200, 0)
    assert "max_topics_per_namespace" not in await admin.ok("GET", NS)


async def test_max_topics_per_namespace_is_enforced(admin: Admin) -> None:
    await admin.ok("POST", f"{NS}/maxTopicsPerNamespace", json=1)
    await admin.ok("PUT", "/admin/v2/persistent/public/default/first")
    await admin.fails(
        "PUT",
        "/admin/v2/persistent/public/default/second",
        412,
        "Exceed maximum number of topics in namespace.",
    )
    await admin.ok("DELETE", f"{NS}/maxTopicsPerNamespace")
    await admin.ok("PUT", "/admin/v2/persistent/public/default/second")


async def test_properties_merge_read_and_clear(admin: Admin) -> None:
    assert await admin.get(f"{NS}/properties") == (200, {})
    await admin.ok("PUT", f"{NS}/properties", json={"a": "1", "b": "2"})
    await admin.ok("PUT", f"{NS}/properties", json={"b": "3"})
    assert await admin.get(f"{NS}/properties") == (200, {"a": "1", "b": "3"})
    assert (await admin.ok("GET", NS))["properties"] == {"a": "1", "b": "3"}
    await admin.ok("PUT", f"{NS}/property/c/4")
    assert await admin.get(f"{NS}/property/c") == (200, "4")
    assert await admin.call("DELETE", f"{NS}/property/a") == (200, "1")
    assert await admin.get(f"{NS}/property/a") == (200, None)
    await admin.ok("DELETE", f"{NS}/properties")
    assert await admin.get(f"{NS}/properties") == (200, {})


async def test_bookie_affinity_lives_in_local_policies(admin: Admin) -> None:
    path = f"{NS}/persistence/bookieAffinity"
    # Pulsar 4.0.7 answers a namespace without a group 204 (where other unset policies are 200).
    assert await admin.get(path) == (204, None)
    group = {
        "bookkeeperAffinityGroupPrimary": "primary-group",
        "bookkeeperAffinityGroupSecondary": "secondary-group",
    }
    await admin.ok("POST", path, json=group)
    assert await admin.get(path) == (200, group)
    assert "bookieAffinityGroup" not in await admin.ok("GET", NS)  # not in the Policies
    await admin.ok("DELETE", path)
    assert await admin.get(path) == (204, None)
    await admin.fails("GET", f"{MISSING_NS}/persistence/bookieAffinity", 404, "")


async def test_the_publish_rate_is_kept_per_cluster(admin: Admin) -> None:
    # `pulsar-admin namespaces set-publish-rate / get-publish-rate`: Pulsar keeps the rate under
    # the broker's cluster in publishMaxMessageRate; a missing one reads 200 without a body.
    path = f"{NS}/publishRate"
    (cluster,) = await admin.ok("GET", "/admin/v2/clusters")
    assert await admin.get(path) == (200, None)
    rate = {"publishThrottlingRateInMsg": 1000, "publishThrottlingRateInByte": 1048576}
    await admin.ok("POST", path, json=rate)
    assert await admin.get(path) == (200, rate)
    assert (await admin.ok("GET", NS))["publishMaxMessageRate"] == {cluster: rate}
    await admin.fails("POST", path, 400, "", json={"publishThrottlingRateInMsg": "many"})
    await admin.ok("DELETE", path)
    assert await admin.get(path) == (200, None)
    assert not (await admin.ok("GET", NS)).get("publishMaxMessageRate")
    await admin.fails(
        "POST", f"{MISSING_NS}/publishRate", 404, "Namespace does not exist", json=rate
    )
