"""Admin REST on the cluster: brokers, clusters, isolation, failure domains, bundles, grants."""

from __future__ import annotations

from typing import Any

from conformance.probe import Probe, normalise, shape
from conformance.scenarios.registry import scenario

C = "/admin/v2/clusters/standalone"


@scenario("cluster")
def brokers_admin(probe: Probe) -> dict[str, Any]:
    """The broker list, health, readiness, leader, dynamic configuration names, a bad key."""
    config = "/admin/v2/brokers/configuration"
    return {
        "list": normalise(probe.rest("GET", "/admin/v2/brokers/standalone")),
        "list_unknown_cluster": probe.rest("GET", "/admin/v2/brokers/nowhere")["status"],
        "health": probe.rest("GET", "/admin/v2/brokers/health"),
        "ready": probe.rest("GET", "/admin/v2/brokers/ready"),
        "leader_keys": shape(probe.rest("GET", "/admin/v2/brokers/leaderBroker")["body"]),
        "version_status": probe.rest("GET", "/admin/v2/brokers/version")["status"],
        "dynamic_names_include": {
            key: key in probe.rest("GET", config)["body"]
            for key in (
                "dispatchThrottlingRateInMsg",
                "dispatchThrottlingRatePerTopicInMsg",
                "loadBalancerEnabled",
                "brokerShutdownTimeoutMs",
            )
        },
        "set_unknown_key": probe.rest("POST", f"{config}/notAKey/1"),
        "set_bad_value": probe.rest("POST", f"{config}/dispatchThrottlingRateInMsg/abc")["status"],
        "runtime_status": probe.rest("GET", f"{config}/runtime")["status"],
    }


@scenario("cluster")
def clusters_admin(probe: Probe) -> dict[str, Any]:
    """The cluster list and data, creating, updating, deleting another cluster."""
    other = "/admin/v2/clusters/cf-other"
    data = {"serviceUrl": "http://127.0.0.1:1", "brokerServiceUrl": "pulsar://127.0.0.1:2"}
    return {
        "list": probe.rest("GET", "/admin/v2/clusters"),
        "get_keys": sorted(probe.rest("GET", C)["body"]),
        "get_missing": probe.rest("GET", "/admin/v2/clusters/nowhere"),
        "create": probe.rest("PUT", other, data),
        "create_again": probe.rest("PUT", other, data),
        "get_created": normalise(probe.rest("GET", other)),
        "update": probe.rest("POST", other, {**data, "serviceUrl": "http://127.0.0.1:3"}),
        "bad_name": probe.rest("PUT", "/admin/v2/clusters/bad%20name", data)["status"],
        "delete": probe.rest("DELETE", other),
        "delete_again": probe.rest("DELETE", other),
    }


@scenario("cluster")
def isolation_policies(probe: Probe) -> dict[str, Any]:
    """Namespace isolation policies: set, read, list, the brokers' view, bad bodies, delete."""
    base = f"{C}/namespaceIsolationPolicies"
    policy = {
        "namespaces": ["public/cf-iso.*"],
        "primary": ["cf-nohost"],
        "secondary": [],
        "auto_failover_policy": {
            "policy_type": "min_available",
            "parameters": {"min_limit": "1", "usage_threshold": "80"},
        },
    }
    return {
        "list_empty": probe.rest("GET", base),
        "get_missing": probe.rest("GET", base + "/p1"),
        "set": probe.rest("POST", base + "/p1", policy),
        "get": probe.rest("GET", base + "/p1"),
        "list": probe.rest("GET", base),
        "bad_body": probe.rest("POST", base + "/p2", {"namespaces": "x"})["status"],
        "bad_regex": probe.rest("POST", base + "/p3", {**policy, "namespaces": ["(unclosed"]})[
            "status"
        ],
        "brokers_status": probe.rest("GET", base + "/brokers")["status"],
        "delete": probe.rest("DELETE", base + "/p1"),
        "delete_again": probe.rest("DELETE", base + "/p1"),
        # Pulsar 4.0.7 stores a policy whose regex does not compile, and then no namespace can
        # be placed: whatever the answer, it must not outlive the scenario.
        "delete_bad_regex": probe.rest("DELETE", base + "/p3")["status"],
        "list_at_end": probe.rest("GET", base),
    }


@scenario("cluster")
def failure_domains(probe: Probe) -> dict[str, Any]:
    """Failure domains: set, read, list, a broker in two domains, delete."""
    base = f"{C}/failureDomains"
    return {
        "list_empty": probe.rest("GET", base),
        "set": probe.rest("POST", base + "/d1", {"brokers": ["b1:8080"]}),
        "get": probe.rest("GET", base + "/d1"),
        "list": probe.rest("GET", base),
        "same_broker_elsewhere": probe.rest("POST", base + "/d2", {"brokers": ["b1:8080"]}),
        "get_missing": probe.rest("GET", base + "/nope"),
        "bad_body": probe.rest("POST", base + "/d3", {"brokers": "x"})["status"],
        "delete": probe.rest("DELETE", base + "/d1"),
        "delete_again": probe.rest("DELETE", base + "/d1"),
        "missing_cluster": probe.rest("GET", "/admin/v2/clusters/nowhere/failureDomains")["status"],
    }


@scenario("cluster")
def bundles_admin(probe: Probe) -> dict[str, Any]:
    """Bundles of a namespace: split one (range_equally_divide), unload one, unload all."""
    base = "/admin/v2/namespaces/public/cf-bundles"
    created = probe.rest("PUT", base)
    bundles = probe.rest("GET", base + "/bundles")
    with probe.client() as client:  # a bundle splits where it is owned: load a topic in it
        client.create_producer("persistent://public/cf-bundles/t")
    owned = probe.rest("GET", "/lookup/v2/topic/persistent/public/cf-bundles/t/bundle")["body"]
    rng = owned if isinstance(owned, str) else "?"  # the bundle's range, as text
    split = probe.rest(
        "PUT", f"{base}/{rng}/split?unload=false&splitAlgorithmName=range_equally_divide"
    )
    unowned = probe.rest("GET", base + "/bundles")["body"]["boundaries"][:2]
    return {
        "create": created,
        "bundles": bundles,
        "topic_bundle": owned,
        "split": split,
        "after_split": probe.rest("GET", base + "/bundles"),
        "split_missing_bundle": probe.rest("PUT", f"{base}/0x00000000_0x00000001/split")["status"],
        "split_bad_range": probe.rest("PUT", f"{base}/nonsense/split")["status"],
        "unload_bundle": probe.rest("PUT", f"{base}/{unowned[0]}_{unowned[1]}/unload"),
        "unload_namespace": probe.rest("PUT", base + "/unload"),
        "unload_missing_namespace": probe.rest(
            "PUT", "/admin/v2/namespaces/public/cf-nowhere/unload"
        )["status"],
    }


@scenario("cluster")
def permissions_admin(probe: Probe) -> dict[str, Any]:
    """Grant and revoke on a namespace, a topic, a subscription, with authorization off."""
    ns = "/admin/v2/namespaces/public/cf-perms"
    topic = "/admin/v2/persistent/public/cf-perms/t"
    created = probe.rest("PUT", ns)
    probe.rest("PUT", topic)

    def sets(answer: dict[str, Any]) -> dict[str, Any]:  # actions and roles are sets
        body = answer["body"]
        if isinstance(body, dict):
            body = {k: sorted(v, key=str) if isinstance(v, list) else v for k, v in body.items()}
        return {"status": answer["status"], "body": body}

    return {
        "create": created,
        "ns_get": probe.rest("GET", ns + "/permissions"),
        "ns_grant": probe.rest("POST", ns + "/permissions/role1", ["produce", "consume"]),
        "ns_get_after": sets(probe.rest("GET", ns + "/permissions")),
        "ns_grant_bad": probe.rest("POST", ns + "/permissions/role2", ["fly"])["status"],
        "sub_grant": probe.rest("POST", ns + "/permissions/subscription/sub1", ["role1"]),
        "sub_get": sets(probe.rest("GET", ns + "/permissions/subscription")),
        "topic_grant": probe.rest("POST", topic + "/permissions/role3", ["produce"]),
        "topic_get": sets(probe.rest("GET", topic + "/permissions")),
        "topic_revoke": probe.rest("DELETE", topic + "/permissions/role3"),
        "ns_revoke": probe.rest("DELETE", ns + "/permissions/role1"),
        "ns_get_end": sets(probe.rest("GET", ns + "/permissions")),
    }


@scenario("cluster")
def owned_namespaces(probe: Probe) -> dict[str, Any]:
    """The bundles a broker owns: a loaded topic's bundle, an unknown cluster.

    Only the topic's bundle is compared: Pulsar also loads the namespace's ``__change_events``
    system topic (in another bundle), and which system namespaces a broker has loaded by then is
    its own affair.
    """
    ns = "public/cf-owned"
    probe.rest("PUT", f"/admin/v2/namespaces/{ns}")
    with probe.client() as client:  # a bundle is owned once a topic in it is looked up
        client.create_producer(f"persistent://{ns}/t")
    bundle = probe.rest("GET", f"/lookup/v2/topic/persistent/{ns}/t/bundle")["body"]
    brokers = probe.rest("GET", "/admin/v2/brokers/standalone")["body"]
    broker = brokers[0] if isinstance(brokers, list) and brokers else "?"
    owned = probe.rest("GET", f"/admin/v2/brokers/standalone/{broker}/ownedNamespaces")
    body = owned["body"]
    return {
        "status": owned["status"],
        "topic_bundle": bundle,
        "topic_bundle_owned": body.get(f"{ns}/{bundle}") if isinstance(body, dict) else body,
        "unknown_cluster": probe.rest("GET", f"/admin/v2/brokers/nowhere/{broker}/ownedNamespaces")[
            "status"
        ],
        "delete_topic": probe.rest("DELETE", f"/admin/v2/persistent/{ns}/t")["status"],
        "delete": probe.rest("DELETE", f"/admin/v2/namespaces/{ns}")["status"],
    }
