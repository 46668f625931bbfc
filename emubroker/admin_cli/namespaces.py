"""``emubroker admin clusters|tenants|namespaces ...``: pulsar-admin's commands of those names."""

from __future__ import annotations

import argparse
import urllib.parse
from typing import Any

from emubroker.admin_cli.args import (
    csv_list,
    namespace_admin_path,
    namespace_name,
    quote,
    relative_seconds,
)
from emubroker.admin_cli.bundles import split_bundle_command
from emubroker.admin_cli.placement import (
    anti_affinity_commands,
    failure_domain_commands,
)
from emubroker.admin_cli.security import (
    permission_commands,
)
from emubroker.adminclient import AdminClient, AdminError, dispatch_rate_path


def _clusters(sub: Any) -> None:
    sub.add_parser("list", help="list clusters").set_defaults(
        run=lambda c, a: c.call("GET", "/admin/v2/clusters")
    )
    get = sub.add_parser("get", help="show a cluster's data")
    get.add_argument("cluster")
    get.set_defaults(run=lambda c, a: c.call("GET", f"/admin/v2/clusters/{quote(a.cluster)}"))
    for verb, method in (("create", "PUT"), ("update", "POST")):
        cmd = sub.add_parser(verb, help=f"{verb} a cluster")
        cmd.add_argument("cluster")
        cmd.add_argument("--url", help="web service URL (http://host:port)")
        cmd.add_argument("--broker-url", help="broker service URL (pulsar://host:port)")
        cmd.set_defaults(
            run=lambda c, a, m=method: c.call(
                m,
                f"/admin/v2/clusters/{quote(a.cluster)}",
                {"serviceUrl": a.url, "brokerServiceUrl": a.broker_url},
            )
        )
    delete = sub.add_parser("delete", help="delete a cluster")
    delete.add_argument("cluster")
    delete.set_defaults(run=lambda c, a: c.call("DELETE", f"/admin/v2/clusters/{quote(a.cluster)}"))
    failure_domain_commands(sub)


def _tenant_info(client: AdminClient, args: argparse.Namespace) -> dict[str, Any]:
    # pulsar-admin: without --allowed-clusters a new tenant may use every cluster.
    clusters = csv_list(args.allowed_clusters) or client.call("GET", "/admin/v2/clusters")
    return {"adminRoles": csv_list(args.admin_roles), "allowedClusters": clusters}


def _updated_tenant_info(client: AdminClient, args: argparse.Namespace) -> dict[str, Any]:
    # pulsar-admin's update keeps what an option leaves out (roles, clusters) as it is.
    current = client.call("GET", f"/admin/v2/tenants/{quote(args.tenant)}") or {}
    roles = (
        current.get("adminRoles", []) if args.admin_roles is None else csv_list(args.admin_roles)
    )
    clusters = (
        current.get("allowedClusters", [])
        if args.allowed_clusters is None
        else csv_list(args.allowed_clusters)
    )
    return {"adminRoles": roles, "allowedClusters": clusters}


def _tenants(sub: Any) -> None:
    sub.add_parser("list", help="list tenants").set_defaults(
        run=lambda c, a: c.call("GET", "/admin/v2/tenants")
    )
    get = sub.add_parser("get", help="show a tenant")
    get.add_argument("tenant")
    get.set_defaults(run=lambda c, a: c.call("GET", f"/admin/v2/tenants/{quote(a.tenant)}"))
    for verb, method, info in (
        ("create", "PUT", _tenant_info),
        ("update", "POST", _updated_tenant_info),
    ):
        cmd = sub.add_parser(verb, help=f"{verb} a tenant")
        cmd.add_argument("tenant")
        cmd.add_argument("-c", "--allowed-clusters", help="comma-separated clusters")
        cmd.add_argument("-r", "--admin-roles", help="comma-separated admin roles")
        cmd.set_defaults(
            run=lambda c, a, m=method, info=info: c.call(
                m, f"/admin/v2/tenants/{quote(a.tenant)}", info(c, a)
            )
        )
    delete = sub.add_parser("delete", help="delete an empty tenant")
    delete.add_argument("tenant")
    delete.set_defaults(run=lambda c, a: c.call("DELETE", f"/admin/v2/tenants/{quote(a.tenant)}"))


def _namespaces(sub: Any) -> None:
    lst = sub.add_parser("list", help="list a tenant's namespaces")
    lst.add_argument("tenant")
    lst.set_defaults(run=lambda c, a: c.call("GET", f"/admin/v2/namespaces/{quote(a.tenant)}"))
    create = sub.add_parser("create", help="create a namespace")
    create.add_argument("namespace", help="tenant/namespace")
    create.add_argument("-b", "--bundles", type=int, help="number of bundles")
    create.set_defaults(
        run=lambda c, a: c.call(
            "PUT",
            namespace_admin_path(a.namespace),
            {"bundles": {"numBundles": a.bundles}} if a.bundles else None,
        )
    )
    for verb, suffix, help_text in (
        ("delete", "", "delete an empty namespace"),
        ("policies", "", "show a namespace's policies"),
        ("bundles", "/bundles", "show a namespace's bundles"),
        ("topics", "/topics", "list a namespace's topics"),
    ):
        cmd = sub.add_parser(verb, help=help_text)
        cmd.add_argument("namespace", help="tenant/namespace")
        method = "DELETE" if verb == "delete" else "GET"
        cmd.set_defaults(
            run=lambda c, a, m=method, s=suffix: c.call(m, namespace_admin_path(a.namespace) + s)
        )
    unload = sub.add_parser("unload", help="unload a namespace, or one of its bundles")
    unload.add_argument("namespace", help="tenant/namespace")
    unload.add_argument("-b", "--bundle", help="the bundle's range, e.g. 0x00000000_0x40000000")
    unload.add_argument(
        "-d", "--destinationBroker", help="broker id (host:port) to place the bundle on"
    )
    unload.set_defaults(run=_unload_namespace)
    dedup = sub.add_parser("set-deduplication", help="enable or disable deduplication")
    dedup.add_argument("namespace", help="tenant/namespace")
    switch = dedup.add_mutually_exclusive_group(required=True)
    switch.add_argument("-e", "--enable", action="store_true")
    switch.add_argument("-d", "--disable", action="store_true")
    dedup.set_defaults(
        run=lambda c, a: c.call(
            "POST", namespace_admin_path(a.namespace) + "/deduplication", a.enable
        )
    )
    split_bundle_command(sub, namespace_admin_path)
    anti_affinity_commands(sub, namespace_admin_path)
    _dispatch_rate_commands(sub)
    _count_limit_commands(sub)
    _message_ttl_commands(sub)
    _auto_topic_creation_commands(sub)
    permission_commands(sub, namespace_admin_path, "namespace")


def _unload_namespace(client: AdminClient, args: Any) -> Any:
    path = namespace_admin_path(args.namespace)
    if args.bundle is None:
        if args.destinationBroker:
            raise AdminError("--destinationBroker needs --bundle")
        return client.call("PUT", f"{path}/unload")
    query = ""
    if args.destinationBroker:
        query = "?destinationBroker=" + urllib.parse.quote(args.destinationBroker, safe="")
    return client.call("PUT", f"{path}/{quote(args.bundle)}/unload{query}")


def _get_and_remove_commands(sub: Any, kind: str, suffix: str) -> None:
    # pulsar-admin namespaces get-<kind> / remove-<kind>: GET / DELETE of the policy's path.
    for verb, method in (("get", "GET"), ("remove", "DELETE")):
        cmd = sub.add_parser(f"{verb}-{kind}", help=f"{verb} the namespace's {kind}")
        cmd.add_argument("namespace", help="tenant/namespace")
        cmd.set_defaults(
            run=lambda c, a, m=method, s=suffix: c.call(m, namespace_admin_path(a.namespace) + s)
        )


def _message_ttl_commands(sub: Any) -> None:
    # pulsar-admin namespaces {set,get,remove}-message-ttl; -ttl takes pulsar-admin's time forms.
    cmd = sub.add_parser("set-message-ttl", help="set the namespace's message TTL")
    cmd.add_argument("namespace", help="tenant/namespace")
    cmd.add_argument(
        "-ttl",
        "--messageTTL",
        dest="ttl",
        required=True,
        help="seconds, or with a unit: 100m, 3h, 2d, 5w; 0 disables the TTL",
    )
    cmd.set_defaults(
        run=lambda c, a: c.call(
            "POST", namespace_admin_path(a.namespace) + "/messageTTL", relative_seconds(a.ttl)
        )
    )
    _get_and_remove_commands(sub, "message-ttl", "/messageTTL")


def _auto_topic_creation_commands(sub: Any) -> None:
    # pulsar-admin namespaces {set,get,remove}-auto-topic-creation, its flags and its checks.
    cmd = sub.add_parser(
        "set-auto-topic-creation", help="override the broker's topic auto-creation here"
    )
    cmd.add_argument("namespace", help="tenant/namespace")
    cmd.add_argument("-e", "--enable", action="store_true")
    cmd.add_argument("-d", "--disable", action="store_true")
    cmd.add_argument(
        "-t", "--type", default="non-partitioned", help="partitioned or non-partitioned"
    )
    cmd.add_argument("-n", "--num-partitions", dest="partitions", type=int)
    cmd.set_defaults(run=_set_auto_topic_creation)
    _get_and_remove_commands(sub, "auto-topic-creation", "/autoTopicCreation")


def _set_auto_topic_creation(client: AdminClient, args: Any) -> Any:
    kind = args.type.lower().strip()
    if args.enable == args.disable:
        raise AdminError("Need to specify either --enable or --disable")
    if args.enable and kind not in ("partitioned", "non-partitioned"):
        raise AdminError(
            "Must specify type of topic to be created. "
            "Possible values: (partitioned, non-partitioned)"
        )
    if args.enable and kind == "partitioned" and (args.partitions or 0) <= 0:
        raise AdminError(
            "Must specify num-partitions or num-partitions > 0 for partitioned topic type."
        )
    body: dict[str, Any] = {"allowAutoTopicCreation": args.enable, "topicType": kind}
    if args.partitions is not None:
        body["defaultNumPartitions"] = args.partitions
    return client.call("POST", namespace_admin_path(args.namespace) + "/autoTopicCreation", body)


def _count_limit_commands(sub: Any) -> None:
    # pulsar-admin namespaces {set,get,remove}-max-*: the value's flag as pulsar-admin's.
    for kind, flag, suffix in (
        ("producers-per-topic", "-p", "/maxProducersPerTopic"),
        ("consumers-per-topic", "-c", "/maxConsumersPerTopic"),
        ("consumers-per-subscription", "-c", "/maxConsumersPerSubscription"),
        ("subscriptions-per-topic", "-m", "/maxSubscriptionsPerTopic"),
    ):
        cmd = sub.add_parser(f"set-max-{kind}", help=f"set the namespace's max {kind}")
        cmd.add_argument("namespace", help="tenant/namespace")
        cmd.add_argument(flag, f"--max-{kind}", dest="limit", type=int, required=True)
        cmd.set_defaults(
            run=lambda c, a, s=suffix: c.call(
                "POST", namespace_admin_path(a.namespace) + s, a.limit
            )
        )
        _get_and_remove_commands(sub, f"max-{kind}", suffix)


def _dispatch_rate_commands(sub: Any) -> None:
    # pulsar-admin namespaces {set,get,remove}-{,subscription-}dispatch-rate, same flags.
    for kind, scope, suffix in (
        ("dispatch-rate", "namespace", "/dispatchRate"),
        ("subscription-dispatch-rate", "namespace_subscription", "/subscriptionDispatchRate"),
    ):
        cmd = sub.add_parser(f"set-{kind}", help=f"set the namespace's {kind.replace('-', ' ')}")
        cmd.add_argument("namespace", help="tenant/namespace")
        cmd.add_argument("-md", "--msg-dispatch-rate", type=int, default=-1)
        cmd.add_argument("-bd", "--byte-dispatch-rate", type=int, default=-1)
        cmd.add_argument("-dt", "--dispatch-rate-period", type=int, default=1)
        cmd.add_argument("-rp", "--relative-to-publish-rate", action="store_true")
        cmd.set_defaults(
            run=lambda c, a, scope=scope: c.call(
                "POST",
                dispatch_rate_path(scope, namespace_name(a.namespace)),
                {
                    "dispatchThrottlingRateInMsg": a.msg_dispatch_rate,
                    "dispatchThrottlingRateInByte": a.byte_dispatch_rate,
                    "ratePeriodInSecond": a.dispatch_rate_period,
                    "relativeToPublishRate": a.relative_to_publish_rate,
                },
            )
        )
        _get_and_remove_commands(sub, kind, suffix)
