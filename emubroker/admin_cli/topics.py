"""``emubroker admin topics ...``: pulsar-admin's topic, subscription and message commands."""

from __future__ import annotations

import argparse
from typing import Any

from emubroker.admin_cli.args import (
    namespace_admin_path,
    position_of,
    quote,
    relative_ms,
    relative_seconds,
    topic_admin_path,
)
from emubroker.admin_cli.security import (
    permission_commands,
)
from emubroker.adminclient import AdminClient, AdminError
from protocol.clock import AnyioClock


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
    _property_commands(sub)
    permission_commands(sub, topic_admin_path, "topic")


def _key_value(text: str) -> tuple[str, str]:
    # pulsar-admin's -p KEY=VALUE: split at the first '=', the value may hold more.
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _property_commands(sub: Any) -> None:
    # pulsar-admin's get-properties, update-properties and remove-properties: the topic's own
    # properties (GET/PUT/DELETE TOPIC/properties), not a subscription's.
    get = sub.add_parser("get-properties", help="show a topic's properties")
    get.add_argument("topic")
    get.set_defaults(run=_get_properties)
    update = sub.add_parser("update-properties", help="add or replace properties of a topic")
    update.add_argument("topic")
    update.add_argument(
        "-p",
        "--property",
        dest="properties",
        action="append",
        type=_key_value,
        default=[],
        metavar="KEY=VALUE",
        help="a property to set (repeat for more)",
    )
    update.set_defaults(
        run=lambda c, a: c.call(
            "PUT", topic_admin_path(a.topic) + "/properties", dict(a.properties)
        )
    )
    remove = sub.add_parser("remove-properties", help="remove a property of a topic")
    remove.add_argument("topic")
    remove.add_argument("-k", "--key", help="the property to remove")
    remove.set_defaults(
        run=lambda c, a: c.call(
            "DELETE",
            topic_admin_path(a.topic)
            + "/properties"
            + (f"?key={quote(a.key)}" if a.key is not None else ""),
        )
    )


def _get_properties(client: AdminClient, args: argparse.Namespace) -> Any:
    found = client.call("GET", topic_admin_path(args.topic) + "/properties")
    # A partitioned topic created without properties answers an empty body (Pulsar's null map),
    # which pulsar-admin prints as null.
    return "null" if found is None else found


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
    return topic_admin_path(args.topic) + "/subscription/" + quote(args.subscription)


def _reset(client: AdminClient, args: argparse.Namespace) -> Any:
    if args.message_id is not None:
        return client.call(
            "POST", _subscription_path(args) + "/resetcursor", position_of(args.message_id)
        )
    now_ms = AnyioClock().wall_ms()
    return client.call(
        "POST", _subscription_path(args) + f"/resetcursor/{now_ms - relative_ms(args.time)}"
    )


def _expire_time(text: str) -> int:
    seconds = relative_seconds(text)
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
        run=lambda c, a: c.call("PUT", _subscription_path(a), position_of(a.message_id))
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
            + f"/all_subscription/expireMessages/{relative_seconds(a.expire_time)}",
        )
    )
