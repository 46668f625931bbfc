"""More topic policies over REST: Pulsar's shapes, statuses and reasons, kept with the topic."""

from __future__ import annotations

from typing import Any

import pytest

from emubroker.admin.routes_namespace_policies import OFFLOAD_DEFAULTS
from emubroker.app import Broker
from emubroker.naming import TopicName
from tests.emubroker.admin.conftest import Admin

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOPIC = "/admin/v2/persistent/public/default/policied"
PARTITIONED = "/admin/v2/persistent/public/default/policied-p"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# (segment, a body, what a GET answers)
POLICIES = [
    ("retention", {"retentionSizeInMB": 20480, "retentionTimeInMinutes": 1440}, None),
    (
        "subscribeRate",
        {"subscribeThrottlingRatePerConsumer": 10, "ratePeriodInSecond": 60},
        None,
    ),
    (
        "publishRate",
        {"publishThrottlingRateInMsg": 5},
        {
            "publishThrottlingRateInMsg": 5,
            "publishThrottlingRateInByte": -1,
        },
    ),
    (
        "replicatorDispatchRate",
        {
            "dispatchThrottlingRateInMsg": 10,
            "dispatchThrottlingRateInByte": 100,
            "ratePeriodInSecond": 1,
        },
        {
            "dispatchThrottlingRateInMsg": 10,
            "dispatchThrottlingRateInByte": 100,
            "relativeToPublishRate": False,
            "ratePeriodInSecond": 1,
        },
    ),
    (
        "offloadPolicies",
        {"managedLedgerOffloadDriver": "aws-s3", "managedLedgerOffloadThresholdInBytes": 1024},
        {  # an OffloadPoliciesImpl's defaults and driver flags shown too, as Pulsar 4.0.7
            **OFFLOAD_DEFAULTS,
            "managedLedgerOffloadDriver": "aws-s3",
            "managedLedgerOffloadThresholdInBytes": 1024,
            "s3Driver": True,
        },
    ),
    ("autoSubscriptionCreation", {"allowAutoSubscriptionCreation": True}, None),
    (
        "persistence",
        {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 1, "bookkeeperAckQuorum": 1},
        {
            "bookkeeperEnsemble": 1,
            "bookkeeperWriteQuorum": 1,
            "bookkeeperAckQuorum": 1,
            "managedLedgerMaxMarkDeleteRate": 0.0,
        },
    ),
    ("maxMessageSize", 1048576, None),
    ("maxUnackedMessagesOnConsumer", 1000, None),
    ("maxUnackedMessagesOnSubscription", 0, None),
    ("deduplicationSnapshotInterval", 1000, None),
    ("replication", ["standalone"], None),
    (
        "delayedDelivery",
        {"tickTime": 2000, "active": True, "maxDeliveryDelayInMillis": 0},
        None,
    ),
]


@pytest.mark.parametrize(("segment", "body", "shown"), POLICIES)
@pytest.mark.parametrize("topic", [TOPIC, PARTITIONED])
async def test_a_topic_policy_is_set_read_and_removed(
    admin: Admin, broker: Broker, topic: str, segment: str, body: Any, shown: Any
) -> None:
    await admin.ok("PUT", TOPIC)
    await admin.ok("PUT", f"{PARTITIONED}/partitions", json=2)
    path = f"{topic}/{segment}"
    # Unset: Pulsar's null, 200 without a body, but 204 for these two (as Pulsar 4.0.7 answers).
    unset = (204 if segment in ("maxMessageSize", "publishRate") else 200, None)
    assert await admin.get(path) == unset
    await admin.ok("POST", path, json=body)
    assert await admin.get(path) == (200, body if shown is None else shown)
    await admin.ok("DELETE", path)
    assert await admin.get(path) == unset
    # Removing the last policy leaves the topic without any policies.
    throttling = broker.topics.throttling
    assert throttling is not None
    assert (
        throttling.topic_policies(
            TopicName.parse(topic.replace("/admin/v2/persistent/", "persistent://"))
        )
        is None
    )


async def test_schema_validation_enforced_reads_false_and_has_no_delete(admin: Admin) -> None:
    await admin.ok("PUT", TOPIC)
    path = f"{TOPIC}/schemaValidationEnforced"
    assert await admin.get(path) == (200, False)
    await admin.ok("POST", path, json=True)
    assert await admin.get(path) == (200, True)
    await admin.fails("DELETE", path, 405, "")


async def test_message_ttl_is_a_query_parameter(admin: Admin) -> None:
    await admin.ok("PUT", TOPIC)
    path = f"{TOPIC}/messageTTL"
    assert await admin.get(path) == (200, None)
    await admin.ok("POST", f"{path}?messageTTL=600")
    assert await admin.get(path) == (200, 600)
    await admin.fails("POST", f"{path}?messageTTL=-1", 412, "Invalid value for message TTL")
    await admin.fails("POST", f"{path}?messageTTL=x", 400, "Invalid messageTTL")
    await admin.ok("DELETE", f"{path}?messageTTL=0")
    assert await admin.get(path) == (200, None)


@pytest.mark.parametrize(
    ("segment", "body", "status", "reason"),
    [
        (
            "maxMessageSize",
            -1,
            412,
            "topic-level maxMessageSize must be greater than or equal to 0 and must be smaller "
            "than that in the broker-level",
        ),
        ("maxMessageSize", 5 * 1024 * 1024 + 1, 412, "topic-level maxMessageSize"),
        ("maxUnackedMessagesOnConsumer", -1, 412, "maxUnackedNum must be 0 or more"),
        ("maxUnackedMessagesOnSubscription", -1, 412, "maxUnackedNum must be 0 or more"),
        ("deduplicationSnapshotInterval", -1, 412, "interval must be 0 or more"),
        ("replication", [], 412, "ClusterIds should not be null or empty"),
        ("replication", ["standalone", "global"], 412, "Cannot specify global"),
        ("replication", ["other"], 412, "Can not remove local cluster"),
        (
            "retention",
            {"retentionSizeInMB": 10, "retentionTimeInMinutes": 0},
            400,
            "Invalid retention policy",
        ),
        (
            "persistence",
            {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 1},
            400,
            "Bookkeeper Ensemble (1) >= WriteQuorum (2) >= AckQuorum (1)",
        ),
        ("maxMessageSize", "big", 400, ""),
        ("schemaValidationEnforced", 3, 400, ""),
    ],
)
async def test_bad_values_get_pulsars_answer(
    admin: Admin, segment: str, body: Any, status: int, reason: str
) -> None:
    await admin.ok("PUT", TOPIC)
    await admin.fails("POST", f"{TOPIC}/{segment}", status, reason, json=body)
    assert (await admin.get(f"{TOPIC}/{segment}"))[1] in (None, False)  # nothing stored


@pytest.mark.parametrize(("segment", "body"), [p[:2] for p in POLICIES])
async def test_a_missing_topic_is_404(admin: Admin, segment: str, body: Any) -> None:
    reason = "Topic persistent://public/default/policied not found"
    await admin.fails("POST", f"{TOPIC}/{segment}", 404, reason, json=body)
    await admin.fails("GET", f"{TOPIC}/{segment}", 404, reason)


async def test_policies_are_kept_together(admin: Admin) -> None:
    await admin.ok("PUT", TOPIC)
    await admin.ok("POST", f"{TOPIC}/maxMessageSize", json=10)
    await admin.ok("POST", f"{TOPIC}/maxProducers", json=2)
    await admin.ok("DELETE", f"{TOPIC}/maxProducers")
    assert await admin.get(f"{TOPIC}/maxMessageSize") == (200, 10)


@pytest.mark.parametrize(
    "body",
    [
        {"managedLedgerOffloadThresholdInBytes": "x"},
        {"managedLedgerOffloadMaxThreads": 2**31},
        {"managedLedgerExtraConfigurations": ["x"]},
        "x",
    ],
)
async def test_offload_policies_of_the_wrong_types_are_refused(admin: Admin, body: Any) -> None:
    await admin.ok("PUT", TOPIC)
    path = f"{TOPIC}/offloadPolicies"
    await admin.fails("POST", path, 400, "policy", json=body)
    assert await admin.get(path) == (200, None)


async def test_offload_policies_ignore_unknown_keys_and_flag_the_driver(admin: Admin) -> None:
    await admin.ok("PUT", TOPIC)
    path = f"{TOPIC}/offloadPolicies"
    await admin.ok("POST", path, json={"managedLedgerOffloadDriver": "filesystem", "nope": 1})
    status, shown = await admin.get(path)
    assert (status, shown["fileSystemDriver"], shown["s3Driver"]) == (200, True, False)
    assert "nope" not in shown


async def test_topic_schema_compatibility_strategy_is_served_and_applied(admin: Admin) -> None:
    # The Go admin client's TestSchemaCompatibilityStrategy; the schema checks obey it.
    await admin.ok("PUT", TOPIC)
    path = f"{TOPIC}/schemaCompatibilityStrategy"
    namespace = "/admin/v2/namespaces/public/default/schemaCompatibilityStrategy"
    schema = "/admin/v2/schemas/public/default/policied/schema"
    await admin.ok("PUT", namespace, data='"ALWAYS_INCOMPATIBLE"')
    assert await admin.get(path) == (200, None)
    assert await admin.get(f"{path}?applied=true") == (200, "ALWAYS_INCOMPATIBLE")
    await admin.ok("PUT", path, json="ALWAYS_COMPATIBLE")
    assert await admin.get(path) == (200, "ALWAYS_COMPATIBLE")
    assert await admin.get(f"{path}?applied=true") == (200, "ALWAYS_COMPATIBLE")
    await admin.ok("POST", schema, json={"type": "STRING", "schema": ""})
    await admin.ok("POST", schema, json={"type": "BOOLEAN", "schema": ""})
    await admin.fails("PUT", path, 400, "Invalid schema compatibility strategy", json="NOPE")
    await admin.ok("DELETE", path)
    assert await admin.get(path) == (200, None)
    assert await admin.get(f"{path}?applied=true") == (200, "ALWAYS_INCOMPATIBLE")
    await admin.fails("POST", schema, 409, "", json={"type": "INT32", "schema": ""})
    await admin.ok("PUT", path, json="FULL")
    await admin.ok("PUT", path, json="UNDEFINED")  # unsets, as in Pulsar
    assert await admin.get(path) == (200, None)
