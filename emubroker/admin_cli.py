"""``emubroker admin ...``: a command line shaped like ``pulsar-admin`` over the admin REST API.

Resources and commands follow ``pulsar-admin`` (``clusters``, ``tenants``, ``namespaces``,
``topics``, ``brokers``, ``broker-stats``) with its flag names (``-p`` partitions, ``-s``
subscription, ``-m`` message id, ``-f`` force ...). Topic arguments take complete or short
names (``my-topic``, ``tenant/ns/my-topic``, ``non-persistent://tenant/ns/my-topic``). JSON
answers are printed pretty; successful writes print nothing. A failed call prints
``error: <status> <phrase>: <reason>`` to stderr and exits 1; usage errors exit 2.

It calls the admin API through ``emubroker.adminclient``'s synchronous client (``urllib``): the
CLI is a short synchronous process, so an event loop would add nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.parse
from typing import TYPE_CHECKING, Any, Final

from emubroker.admin_cli_bundles import split_bundle_command
from emubroker.admin_cli_placement import (
    anti_affinity_commands,
    failure_domain_commands,
    isolation_policy_commands,
)
from emubroker.admin_cli_security import (
    CliError,
    add_auth_options,
    client_credentials,
    permission_commands,
    tokens_commands,
)
from emubroker.adminclient import AdminClient, AdminError, dispatch_rate_path
from emubroker.adminclient.paths import path as admin_path
from emubroker.auth import SecurityConfigError
from emubroker.naming import InvalidNameError, NamespaceName, TopicName
from protocol.clock import AnyioClock

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "AdminClient",
    "AdminError",
    "add_parser",
    "main",
    "namespace_admin_path",
    "run",
    "topic_admin_path",
]

DEFAULT_ADMIN_URL: Final = "http://localhost:8080"
# pulsar-admin's RelativeTimeUtil: a signed count, then an optional unit (seconds by default).
_DURATION: Final = re.compile(r"([+-]?\d+)([smhdwy]?)", re.IGNORECASE)
_UNIT_SECONDS: Final = {
    "": 1,
    "s": 1,
    "m": 60,
    "h": 3600,
    "d": 86400,
    "w": 7 * 86400,
    "y": 365 * 86400,
}


# ---- argument helpers ---------------------------------------------------------------------------


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def topic_admin_path(name: str) -> str:
    """``/admin/v2/{domain}/{tenant}/{namespace}/{topic}`` of a complete or short topic name."""
    try:
        topic = TopicName.parse(name)
    except InvalidNameError as exc:
        raise AdminError(f"invalid topic name: {exc}") from None
    return admin_path("topic", topic=str(topic))


def namespace_admin_path(name: str) -> str:
    """``/admin/v2/namespaces/{tenant}/{namespace}`` of ``tenant/namespace``."""
    try:
        namespace = NamespaceName.parse(name)
    except InvalidNameError as exc:
        raise AdminError(f"invalid namespace name: {exc}") from None
    return admin_path("namespace", namespace=str(namespace))


def _namespace_name(name: str) -> str:
    namespace_admin_path(name)  # refuses an invalid name
    return str(NamespaceName.parse(name))


def _csv(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def _relative_seconds(text: str) -> int:
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise AdminError(f"invalid time '{text}': use a number and a unit s, m, h, d, w or y")
    return int(match[1]) * _UNIT_SECONDS[match[2].lower()]


def _relative_ms(text: str) -> int:
    return _relative_seconds(text) * 1000


def _position(text: str) -> Any:
    lowered = text.strip().lower()
    if lowered in ("latest", "earliest"):
        return lowered
    ledger, sep, entry = lowered.partition(":")
    if not (sep and ledger.lstrip("-").isdigit() and entry.lstrip("-").isdigit()):
        raise AdminError(f"invalid message id '{text}': use latest, earliest or ledgerId:entryId")
    return {"ledgerId": int(ledger), "entryId": int(entry)}


# ---- commands -----------------------------------------------------------------------------------


def _clusters(sub: Any) -> None:
    sub.add_parser("list", help="list clusters").set_defaults(
        run=lambda c, a: c.call("GET", "/admin/v2/clusters")
    )
    get = sub.add_parser("get", help="show a cluster's data")
    get.add_argument("cluster")
    get.set_defaults(run=lambda c, a: c.call("GET", f"/admin/v2/clusters/{_quote(a.cluster)}"))
    for verb, method in (("create", "PUT"), ("update", "POST")):
        cmd = sub.add_parser(verb, help=f"{verb} a cluster")
        cmd.add_argument("cluster")
        cmd.add_argument("--url", help="web service URL (http://host:port)")
        cmd.add_argument("--broker-url", help="broker service URL (pulsar://host:port)")
        cmd.set_defaults(
            run=lambda c, a, m=method: c.call(
                m,
                f"/admin/v2/clusters/{_quote(a.cluster)}",
                {"serviceUrl": a.url, "brokerServiceUrl": a.broker_url},
            )
        )
    delete = sub.add_parser("delete", help="delete a cluster")
    delete.add_argument("cluster")
    delete.set_defaults(
        run=lambda c, a: c.call("DELETE", f"/admin/v2/clusters/{_quote(a.cluster)}")
    )
    failure_domain_commands(sub)


def _tenant_info(client: AdminClient, args: argparse.Namespace) -> dict[str, Any]:
    # pulsar-admin: without --allowed-clusters a new tenant may use every cluster.
    clusters = _csv(args.allowed_clusters) or client.call("GET", "/admin/v2/clusters")
    return {"adminRoles": _csv(args.admin_roles), "allowedClusters": clusters}


def _updated_tenant_info(client: AdminClient, args: argparse.Namespace) -> dict[str, Any]:
    # pulsar-admin's update keeps what an option leaves out (roles, clusters) as it is.
    current = client.call("GET", f"/admin/v2/tenants/{_quote(args.tenant)}") or {}
    roles = current.get("adminRoles", []) if args.admin_roles is None else _csv(args.admin_roles)
    clusters = (
        current.get("allowedClusters", [])
        if args.allowed_clusters is None
        else _csv(args.allowed_clusters)
    )
    return {"adminRoles": roles, "allowedClusters": clusters}


def _tenants(sub: Any) -> None:
    sub.add_parser("list", help="list tenants").set_defaults(
        run=lambda c, a: c.call("GET", "/admin/v2/tenants")
    )
    get = sub.add_parser("get", help="show a tenant")
    get.add_argument("tenant")
    get.set_defaults(run=lambda c, a: c.call("GET", f"/admin/v2/tenants/{_quote(a.tenant)}"))
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
                m, f"/admin/v2/tenants/{_quote(a.tenant)}", info(c, a)
            )
        )
    delete = sub.add_parser("delete", help="delete an empty tenant")
    delete.add_argument("tenant")
    delete.set_defaults(run=lambda c, a: c.call("DELETE", f"/admin/v2/tenants/{_quote(a.tenant)}"))


def _namespaces(sub: Any) -> None:
    lst = sub.add_parser("list", help="list a tenant's namespaces")
    lst.add_argument("tenant")
    lst.set_defaults(run=lambda c, a: c.call("GET", f"/admin/v2/namespaces/{_quote(a.tenant)}"))
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
    return client.call("PUT", f"{path}/{_quote(args.bundle)}/unload{query}")


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
            "POST", namespace_admin_path(a.namespace) + "/messageTTL", _relative_seconds(a.ttl)
        )
    )
    _get_and_remove_commands(sub, "message-ttl", "/messageTTL")


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
                dispatch_rate_path(scope, _namespace_name(a.namespace)),
                {
                    "dispatchThrottlingRateInMsg": a.msg_dispatch_rate,
                    "dispatchThrottlingRateInByte": a.byte_dispatch_rate,
                    "ratePeriodInSecond": a.dispatch_rate_period,
                    "relativeToPublishRate": a.relative_to_publish_rate,
                },
            )
        )
        _get_and_remove_commands(sub, kind, suffix)


def _topic_command(sub: Any, verb: str, help_text: str, method: str, suffix: str = "") -> Any:
    cmd = sub.add_parser(verb, help=help_text)
    cmd.add_argument("topic")
    cmd.set_defaults(run=lambda c, a: c.call(method, topic_admin_path(a.topic) + suffix))
    return cmd


def _topics(sub: Any) -> None:
    lst = sub.add_parser("list", help="list a namespace's topics (both domains)")
    lst.add_argument("namespace", help="tenant/namespace")
    lst.set_defaults(run=_list_topics)
    _topic_command(sub, "create", "create a non-partitioned topic", "PUT")
    _topic_command(sub, "get-partitioned-topic-metadata", "partition count", "GET", "/partitions")
    _topic_command(sub, "stats", "topic statistics", "GET", "/stats")
    _topic_command(sub, "stats-internal", "managed ledger statistics", "GET", "/internalStats")
    _topic_command(sub, "subscriptions", "list subscriptions", "GET", "/subscriptions")
    _topic_command(sub, "unload", "unload a topic", "PUT", "/unload")
    _topic_command(sub, "last-message-id", "the id of the last message", "GET", "/lastMessageId")
    lookup = sub.add_parser("lookup", help="the service URL of the broker serving a topic")
    lookup.add_argument("topic")
    lookup.set_defaults(run=_lookup)
    _message_commands(sub)
    for verb, suffix in (("delete", ""), ("delete-partitioned-topic", "/partitions")):
        cmd = sub.add_parser(verb, help=f"{verb.replace('-', ' ')}")
        cmd.add_argument("topic")
        cmd.add_argument("-f", "--force", action="store_true", help="disconnect clients first")
        cmd.set_defaults(
            run=lambda c, a, s=suffix: c.call(
                "DELETE", topic_admin_path(a.topic) + s + ("?force=true" if a.force else "")
            )
        )
    for verb, method in (("create-partitioned-topic", "PUT"), ("update-partitioned-topic", "POST")):
        cmd = sub.add_parser(verb, help=verb.replace("-", " "))
        cmd.add_argument("topic")
        cmd.add_argument("-p", "--partitions", type=int, required=True)
        cmd.set_defaults(
            run=lambda c, a, m=method: c.call(
                m, topic_admin_path(a.topic) + "/partitions", a.partitions
            )
        )
    stats = sub.add_parser("partitioned-stats", help="partitioned topic statistics")
    stats.add_argument("topic")
    stats.add_argument("--per-partition", action="store_true", help="include every partition")
    stats.set_defaults(
        run=lambda c, a: c.call(
            "GET",
            topic_admin_path(a.topic)
            + f"/partitioned-stats?perPartition={'true' if a.per_partition else 'false'}",
        )
    )
    _subscription_commands(sub)
    permission_commands(sub, topic_admin_path, "topic")


def _message_commands(sub: Any) -> None:
    peek = sub.add_parser("peek-messages", help="show messages a subscription has not acked")
    peek.add_argument("topic")
    peek.add_argument("-s", "--subscription", required=True)
    peek.add_argument("-n", "--count", type=int, default=1, help="how many (default 1)")
    peek.set_defaults(run=_peek)
    examine = sub.add_parser("examine-message", help="show the n-th message from either end")
    examine.add_argument("topic")
    examine.add_argument("-i", "--initial-position", choices=["latest", "earliest"])
    examine.add_argument("-m", "--message-position", type=int, default=1)
    examine.set_defaults(
        run=lambda c, a: _show(
            c.message(
                topic_admin_path(a.topic)
                + f"/examinemessage?initialPosition={a.initial_position or 'latest'}"
                + f"&messagePosition={a.message_position}"
            )
        )
    )
    by_id = sub.add_parser("get-message-by-id", help="show the message at ledger:entry")
    by_id.add_argument("topic")
    by_id.add_argument("-l", "--ledger-id", type=int, required=True)
    by_id.add_argument("-e", "--entry-id", type=int, required=True)
    by_id.set_defaults(
        run=lambda c, a: _show(
            c.message(topic_admin_path(a.topic) + f"/ledger/{a.ledger_id}/entry/{a.entry_id}")
        )
    )


def _peek(client: AdminClient, args: argparse.Namespace) -> str:
    # Like pulsar-admin: positions 1..n after the subscription's acknowledged position.
    shown: list[str] = []
    for position in range(1, args.count + 1):
        try:
            message = client.message(_subscription_path(args) + f"/position/{position}")
        except AdminError:
            if shown:
                break  # fewer unacknowledged messages than asked for
            raise
        shown.append(_show(message))
    return "\n\n".join(shown)


def _show(message: tuple[dict[str, str], bytes]) -> str:
    """A stored message as text: its id and headers, a blank line, then its payload."""
    headers, payload = message
    lines = [f"Message ID: {headers.get('X-Pulsar-Message-ID', '?')}"]
    lines += [f"{k}: {v}" for k, v in headers.items() if k != "X-Pulsar-Message-ID"]
    try:
        body = payload.decode("utf-8")
    except UnicodeDecodeError:
        body = payload.hex(" ")
    return "\n".join([*lines, "", body])


def _lookup(client: AdminClient, args: argparse.Namespace) -> str:
    # pulsar-admin's lookups().lookupTopic: the HTTP lookup's brokerUrl, or its brokerUrlTls
    # when the admin URL is https and the broker has one.
    path = topic_admin_path(args.topic).replace("/admin/v2/", "/lookup/v2/topic/", 1)
    data = client.call("GET", path)
    if not isinstance(data, dict) or "brokerUrl" not in data:
        raise AdminError(f"unexpected lookup answer: {data!r}")
    tls = str(data.get("brokerUrlTls") or "")
    if client.base_url.startswith("https://") and tls.strip():
        return tls
    return str(data["brokerUrl"])


def _list_topics(client: AdminClient, args: argparse.Namespace) -> Any:
    # pulsar-admin lists persistent and non-persistent topics together.
    namespace = namespace_admin_path(args.namespace).removeprefix("/admin/v2/namespaces/")
    found: list[str] = []
    for domain in ("persistent", "non-persistent"):
        found.extend(client.call("GET", f"/admin/v2/{domain}/{namespace}") or [])
    return found


def _subscription_path(args: argparse.Namespace) -> str:
    return topic_admin_path(args.topic) + "/subscription/" + _quote(args.subscription)


def _reset(client: AdminClient, args: argparse.Namespace) -> Any:
    if args.message_id is not None:
        return client.call(
            "POST", _subscription_path(args) + "/resetcursor", _position(args.message_id)
        )
    now_ms = AnyioClock().wall_ms()
    return client.call(
        "POST", _subscription_path(args) + f"/resetcursor/{now_ms - _relative_ms(args.time)}"
    )


def _expire_time(text: str) -> int:
    seconds = _relative_seconds(text)
    if seconds < 0:
        # pulsar-admin takes a negative --expireTime as "not given" (its default is -1).
        raise AdminError(
            "Either time (--expireTime) or message position (--position) has to be provided"
            " to expire messages"
        )
    return seconds


def _expire_time_option(cmd: Any) -> None:
    cmd.add_argument(
        "-t",
        "--expireTime",
        dest="expire_time",
        required=True,
        help="expire messages older than this: seconds, or with a unit: 100m, 3h, 2d, 5w",
    )


def _subscription_commands(sub: Any) -> None:
    def command(verb: str, help_text: str) -> Any:
        cmd = sub.add_parser(verb, help=help_text)
        cmd.add_argument("topic")
        cmd.add_argument("-s", "--subscription", required=True)
        return cmd

    create = command("create-subscription", "create a subscription at a position")
    create.add_argument("-m", "--message-id", default="latest", help="latest|earliest|ledger:entry")
    create.set_defaults(
        run=lambda c, a: c.call("PUT", _subscription_path(a), _position(a.message_id))
    )
    unsubscribe = command("unsubscribe", "delete a subscription")
    unsubscribe.add_argument("-f", "--force", action="store_true", help="disconnect consumers")
    unsubscribe.set_defaults(
        run=lambda c, a: c.call(
            "DELETE", _subscription_path(a) + ("?force=true" if a.force else "")
        )
    )
    skip = command("skip", "skip messages of a subscription")
    skip.add_argument("-n", "--count", type=int, required=True)
    skip.set_defaults(run=lambda c, a: c.call("POST", _subscription_path(a) + f"/skip/{a.count}"))
    clear = command("clear-backlog", "skip every message of a subscription")
    clear.set_defaults(run=lambda c, a: c.call("POST", _subscription_path(a) + "/skip_all"))
    reset = command("reset-cursor", "move a subscription to a time or a message id")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("-t", "--time", help="how long ago, e.g. 10m, 1h, 2d")
    target.add_argument("-m", "--message-id", help="latest|earliest|ledger:entry")
    reset.set_defaults(run=_reset)
    expire = command("expire-messages", "expire a subscription's messages older than a time")
    _expire_time_option(expire)
    expire.set_defaults(
        run=lambda c, a: c.call(
            "POST", _subscription_path(a) + f"/expireMessages/{_expire_time(a.expire_time)}"
        )
    )
    expire_all = sub.add_parser(
        "expire-messages-all-subscriptions",
        help="expire every subscription's messages older than a time",
    )
    expire_all.add_argument("topic")
    _expire_time_option(expire_all)
    expire_all.set_defaults(
        run=lambda c, a: c.call(
            "POST",
            topic_admin_path(a.topic)
            + f"/all_subscription/expireMessages/{_relative_seconds(a.expire_time)}",
        )
    )


def _brokers(sub: Any) -> None:
    lst = sub.add_parser("list", help="list active brokers")
    lst.add_argument("cluster", nargs="?")
    lst.set_defaults(
        run=lambda c, a: c.call(
            "GET", "/admin/v2/brokers" + (f"/{_quote(a.cluster)}" if a.cluster else "")
        )
    )
    namespaces = sub.add_parser("namespaces", help="list the bundles a broker owns")
    namespaces.add_argument("cluster")
    namespaces.add_argument(
        "-u", "--url", required=True, help="the broker (its id host:port, or its web service URL)"
    )
    namespaces.set_defaults(
        run=lambda c, a: c.call(
            "GET",
            f"/admin/v2/brokers/{_quote(a.cluster)}/"
            f"{_quote(a.url.removeprefix('http://').removeprefix('https://'))}/ownedNamespaces",
        )
    )
    health = sub.add_parser("healthcheck", help="check the broker's health")
    health.add_argument(
        "-tv", "--topic-version", choices=("V1", "V2"), help="heartbeat topic version (V1)"
    )
    health.set_defaults(
        run=lambda c, a: c.call(
            "GET",
            "/admin/v2/brokers/health"
            + (f"?topicVersion={a.topic_version}" if a.topic_version else ""),
        )
    )
    for verb, path, help_text in (
        ("leader-broker", "/leaderBroker", "show the leader broker"),
        ("list-dynamic-config", "/configuration", "list dynamic configuration names"),
        ("get-all-dynamic-config", "/configuration/values", "show dynamic configuration values"),
        ("get-runtime-config", "/configuration/runtime", "show the whole runtime configuration"),
    ):
        sub.add_parser(verb, help=help_text).set_defaults(
            run=lambda c, a, p=path: c.call("GET", "/admin/v2/brokers" + p)
        )
    update = sub.add_parser("update-dynamic-config", help="set a dynamic configuration value")
    update.add_argument("--config", required=True, help="the broker.conf key")
    update.add_argument("--value", required=True)
    update.set_defaults(
        run=lambda c, a: c.call(
            "POST",
            f"/admin/v2/brokers/configuration/{_quote(a.config)}/{_quote(a.value)}",
        )
    )
    delete = sub.add_parser("delete-dynamic-config", help="remove a dynamic configuration value")
    delete.add_argument("--config", required=True)
    delete.set_defaults(
        run=lambda c, a: c.call("DELETE", f"/admin/v2/brokers/configuration/{_quote(a.config)}")
    )


def _broker_stats(sub: Any) -> None:
    sub.add_parser("load-report", help="show this broker's load report").set_defaults(
        run=lambda c, a: c.call("GET", "/admin/v2/broker-stats/load-report")
    )


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add the ``admin`` command to a CLI's subparsers (``emubroker admin ...``)."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "admin", help="administer a running broker over its REST API (like pulsar-admin)"
    )
    parser.add_argument(
        "--admin-url",
        default=DEFAULT_ADMIN_URL,
        help=f"the broker's admin URL (default {DEFAULT_ADMIN_URL})",
    )
    add_auth_options(parser)
    resources = parser.add_subparsers(dest="resource", required=True, metavar="RESOURCE")
    for name, build in (
        ("clusters", _clusters),
        ("ns-isolation-policy", isolation_policy_commands),
        ("tenants", _tenants),
        ("namespaces", _namespaces),
        ("topics", _topics),
        ("brokers", _brokers),
        ("broker-stats", _broker_stats),
        ("tokens", lambda sub: tokens_commands(sub, _relative_seconds)),
    ):
        resource = resources.add_parser(name, help=f"manage {name}")
        build(resource.add_subparsers(dest="action", required=True, metavar="COMMAND"))
    return parser


def run(args: argparse.Namespace) -> int:
    """Execute a parsed ``admin`` command; returns the exit code."""
    try:
        headers, context = client_credentials(args)
        client = AdminClient(args.admin_url, headers=headers, ssl_context=context)
        result = args.run(client, args)
    except (AdminError, CliError, SecurityConfigError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    if isinstance(result, str):
        sys.stdout.write(result.rstrip("\n") + "\n")
    elif result is not None:
        sys.stdout.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m emubroker.admin_cli ...``: the same as ``emubroker admin ...``."""
    parser = argparse.ArgumentParser(prog="emubroker")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(["admin", *(sys.argv[1:] if argv is None else argv)]))


if __name__ == "__main__":
    sys.exit(main())
