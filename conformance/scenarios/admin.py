"""Admin REST: tenants and namespaces, and each namespace policy's GET/POST/DELETE.

Each policy is read unset, written (a good body, then bad ones: wrong type, out of range, not
JSON), read back, deleted and read again, so status codes and bodies are compared at each step.
"""

from __future__ import annotations

from typing import Any

from conformance.probe import Probe, normalise
from conformance.scenarios.registry import scenario

NOT_JSON = object()  # a body that is not JSON at all


def _post(probe: Probe, path: str, body: Any) -> dict[str, Any]:
    if body is NOT_JSON:
        answer = probe.session.post(
            probe.target.admin_url.rstrip("/") + path, data="{not json",
            headers={"Content-Type": "application/json"}, timeout=10,
        )  # fmt: skip
        return {"status": answer.status_code}
    return probe.rest("POST", path, body)


def _cycle(
    probe: Probe, namespace: str, segment: str, good: Any, bad: dict[str, Any]
) -> dict[str, Any]:
    base = f"/admin/v2/namespaces/public/{namespace}"
    path = f"{base}/{segment}"
    record = {"create": probe.rest("PUT", base), "get_unset": probe.rest("GET", path)}
    record["set"] = _post(probe, path, good)
    record["get"] = probe.rest("GET", path)
    for name, body in bad.items():
        record[f"bad_{name}"] = _post(probe, path, body)
    record["get_after_bad"] = probe.rest("GET", path)
    record["delete"] = probe.rest("DELETE", path)
    record["get_deleted"] = probe.rest("GET", path)
    record["missing_namespace"] = probe.rest(
        "GET", f"/admin/v2/namespaces/public/cf-nowhere/{segment}"
    )
    return record


_INT_BADS = {"negative": -3, "text": "abc", "not_json": NOT_JSON}


def _rate(msgs: Any = 10, byte_rate: Any = -1, period: Any = 1) -> dict[str, Any]:
    return {
        "dispatchThrottlingRateInMsg": msgs,
        "dispatchThrottlingRateInByte": byte_rate,
        "ratePeriodInSecond": period,
        "relativeToPublishRate": False,
    }


_RATE_BADS = {"below_minus_one": _rate(-2), "zero_period": _rate(period=0),
              "text_rate": _rate(msgs="x"), "not_json": NOT_JSON}  # fmt: skip


@scenario("admin")
def policy_message_ttl(probe: Probe) -> dict[str, Any]:
    """messageTTL: a bare integer of seconds."""
    return _cycle(probe, "cf-pol-ttl", "messageTTL", 60, _INT_BADS)


@scenario("admin")
def policy_deduplication(probe: Probe) -> dict[str, Any]:
    """deduplication: a bare boolean."""
    return _cycle(
        probe, "cf-pol-dedup", "deduplication", True, {"text": "yes", "not_json": NOT_JSON}
    )


@scenario("admin")
def policy_retention(probe: Probe) -> dict[str, Any]:
    """retention: RetentionPolicies, with Pulsar's rules on limits."""
    return _cycle(
        probe, "cf-pol-retention", "retention",
        {"retentionTimeInMinutes": 10, "retentionSizeInMB": 5},
        {
            "one_zero": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 5},
            "below_minus_one": {"retentionTimeInMinutes": -2, "retentionSizeInMB": 5},
            "not_json": NOT_JSON,
        },
    )  # fmt: skip


@scenario("admin")
def policy_max_producers(probe: Probe) -> dict[str, Any]:
    """MaxProducersPerTopic."""
    return _cycle(probe, "cf-pol-maxprod", "maxProducersPerTopic", 5, _INT_BADS)


@scenario("admin")
def policy_max_consumers_per_topic(probe: Probe) -> dict[str, Any]:
    """MaxConsumersPerTopic."""
    return _cycle(probe, "cf-pol-maxcons", "maxConsumersPerTopic", 5, _INT_BADS)


@scenario("admin")
def policy_max_consumers_per_subscription(probe: Probe) -> dict[str, Any]:
    """MaxConsumersPerSubscription."""
    return _cycle(probe, "cf-pol-maxconsub", "maxConsumersPerSubscription", 5, _INT_BADS)


@scenario("admin")
def policy_max_subscriptions(probe: Probe) -> dict[str, Any]:
    """MaxSubscriptionsPerTopic."""
    return _cycle(probe, "cf-pol-maxsubs", "maxSubscriptionsPerTopic", 5, _INT_BADS)


@scenario("admin")
def policy_dispatch_rate(probe: Probe) -> dict[str, Any]:
    """DispatchRate (the per-topic rate): DispatchRate JSON."""
    return _cycle(probe, "cf-pol-rate", "dispatchRate", _rate(), _RATE_BADS)


@scenario("admin")
def policy_subscription_dispatch_rate(probe: Probe) -> dict[str, Any]:
    """subscriptionDispatchRate: DispatchRate JSON."""
    return _cycle(probe, "cf-pol-subrate", "subscriptionDispatchRate", _rate(), _RATE_BADS)


@scenario("admin")
def policy_schema_compatibility(probe: Probe) -> dict[str, Any]:
    """schemaCompatibilityStrategy: PUT of a quoted strategy name, bad names, and the policies."""
    base = "/admin/v2/namespaces/public/cf-pol-schema"
    path = base + "/schemaCompatibilityStrategy"
    return {
        "create": probe.rest("PUT", base),
        "get_default": probe.rest("GET", path),
        "set": probe.rest("PUT", path, "BACKWARD"),
        "get": probe.rest("GET", path),
        "bad_name": probe.rest("PUT", path, "SIDEWAYS")["status"],
        "policies_field": probe.rest("GET", base)["body"].get("schema_compatibility_strategy"),
    }


@scenario("admin")
def tenant_update_and_bad_bodies(probe: Probe) -> dict[str, Any]:
    """Tenant update (POST), bodies of the wrong shape, a missing tenant's namespaces."""
    path = "/admin/v2/tenants/cf-tenant-up"
    info = {"adminRoles": ["a"], "allowedClusters": ["standalone"]}
    record = {
        "create": probe.rest("PUT", path, info),
        "update": probe.rest(
            "POST", path, {"adminRoles": ["b"], "allowedClusters": ["standalone"]}
        ),
        "get": probe.rest("GET", path),
        "update_missing": probe.rest("POST", "/admin/v2/tenants/cf-nobody", info),
        "bad_body": probe.rest("PUT", "/admin/v2/tenants/cf-tenant-bad", {"adminRoles": "a"})[
            "status"
        ],
        "namespaces_of_missing": probe.rest("GET", "/admin/v2/namespaces/cf-nobody"),
        "namespaces_of_new": probe.rest("GET", "/admin/v2/namespaces/cf-tenant-up"),
        "delete": probe.rest("DELETE", path),
        "delete_missing": probe.rest("DELETE", path),
    }
    return record


@scenario("admin")
def namespace_topics_and_bundles(probe: Probe) -> dict[str, Any]:
    """A namespace's topic list, bundles, backlog quotas, and its policies document."""
    base = "/admin/v2/namespaces/public/cf-ns-topics"
    created = probe.rest("PUT", base)
    with probe.client() as client:
        client.create_producer("persistent://public/cf-ns-topics/a")
        client.create_producer("non-persistent://public/cf-ns-topics/b")
    return {
        "create": created,
        "topics": probe.rest("GET", base + "/topics"),
        "persistent_list": probe.rest("GET", "/admin/v2/persistent/public/cf-ns-topics"),
        "non_persistent_list": probe.rest("GET", "/admin/v2/non-persistent/public/cf-ns-topics"),
        "bundles": probe.rest("GET", base + "/bundles"),
        "backlog_quota": probe.rest("GET", base + "/backlogQuotaMap"),
        "policies": normalise(probe.rest("GET", base)),
        "delete_with_topics": probe.rest("DELETE", base)["status"],
    }


@scenario("admin")
def namespace_delete_after_topics(probe: Probe) -> dict[str, Any]:
    """A namespace's delete while it has topics, after they were deleted, and its re-creation.

    A persistent topic with a subscription and a topic policy (Pulsar keeps those in the
    namespace's __change_events topic), a partitioned topic, and a non-persistent topic whose
    producer left; then deletes of non-persistent topics that are not loaded.
    """
    base = "/admin/v2/namespaces/public/cf-ns-delete"
    topic = "/admin/v2/persistent/public/cf-ns-delete/"
    record: dict[str, Any] = {"create": probe.rest("PUT", base)["status"]}
    with probe.client() as client:
        client.subscribe("persistent://public/cf-ns-delete/a", "s").close()
        client.create_producer("persistent://public/cf-ns-delete/a").send(b"x")
        client.create_producer("non-persistent://public/cf-ns-delete/np").close()
    record["partitioned"] = probe.rest("PUT", topic + "p/partitions", 2)["status"]
    record["topic_policy"] = probe.rest("POST", topic + "a/messageTTL?messageTTL=60")["status"]
    record["delete_with_topics"] = probe.rest("DELETE", base)
    record["delete_a"] = probe.rest("DELETE", topic + "a")["status"]
    record["delete_p"] = probe.rest("DELETE", topic + "p/partitions")["status"]
    record["topics_left"] = probe.rest("GET", base + "/topics")
    record["delete"] = probe.rest("DELETE", base)
    record["get_after"] = probe.rest("GET", base)["status"]
    record["list_after"] = (
        "public/cf-ns-delete" in probe.rest("GET", "/admin/v2/namespaces/public")["body"]
    )
    record["delete_again"] = probe.rest("DELETE", base)
    record["recreate"] = probe.rest("PUT", base)["status"]
    record["topics_after_recreate"] = probe.rest("GET", base + "/topics")
    np = "/admin/v2/non-persistent/public/"
    record["delete_np_not_loaded"] = probe.rest("DELETE", np + "cf-ns-delete/np")
    record["delete_np_never_created"] = probe.rest("DELETE", np + "default/cf-np-never")
    record["delete_recreated"] = probe.rest("DELETE", base)
    return record


@scenario("admin")
def namespace_recreated_after_a_request_to_the_deleted_one(probe: Probe) -> dict[str, Any]:
    """A namespace deleted, a request naming it meanwhile, the namespace created again, deleted.

    The non-persistent topic's delete makes Pulsar look the deleted namespace's bundles up (no
    policies: one full bundle, cached); its twin is created with the default bundles.
    """
    base = "/admin/v2/namespaces/public/cf-ns-twin"
    np = "/admin/v2/non-persistent/public/cf-ns-twin/np"
    return {
        "create": probe.rest("PUT", base)["status"],
        "delete": probe.rest("DELETE", base)["status"],
        "delete_np_of_deleted": probe.rest("DELETE", np)["status"],
        "recreate": probe.rest("PUT", base)["status"],
        "bundles": probe.rest("GET", base + "/bundles"),
        "delete_recreated": probe.rest("DELETE", base),
        "exists_after": probe.rest("GET", base)["status"],
    }


@scenario("admin")
def partitioned_metadata_of_each_kind_of_topic(probe: Probe) -> dict[str, Any]:
    """``GET .../{topic}/partitions`` of each kind of topic, existing or not.

    A missing topic (with and without the client's ``checkAllowAutoCreation``), a
    non-partitioned topic, a partitioned one and its partitions, in both domains, and in a
    namespace that does not exist.
    """
    p = "/admin/v2/persistent/public/default/cf-pmeta"
    np = "/admin/v2/non-persistent/public/default/cf-pmeta"
    record: dict[str, Any] = {
        "missing": probe.rest("GET", p + "-missing/partitions"),
        "missing_np": probe.rest("GET", np + "-missing/partitions"),
        "missing_may_create": probe.rest(
            "GET", p + "-maybe/partitions?checkAllowAutoCreation=true"
        ),
        "missing_namespace": probe.rest(
            "GET", "/admin/v2/persistent/public/cf-nowhere/t/partitions"
        ),
        "partitioned": probe.rest("PUT", p + "-parts/partitions", 3)["status"],
    }
    record["parts"] = probe.rest("GET", p + "-parts/partitions")
    record["a_partition"] = probe.rest("GET", p + "-parts-partition-1/partitions")
    record["beyond_partitions"] = probe.rest("GET", p + "-parts-partition-7/partitions")
    with probe.client() as client:
        client.create_producer("persistent://public/default/cf-pmeta-single")
        client.create_producer("non-persistent://public/default/cf-pmeta-single")
        record["single"] = probe.rest("GET", p + "-single/partitions")
        record["single_np"] = probe.rest("GET", np + "-single/partitions")
    record["delete_partitioned"] = probe.rest("DELETE", p + "-parts/partitions")["status"]
    record["deleted"] = probe.rest("GET", p + "-parts/partitions")
    return record
