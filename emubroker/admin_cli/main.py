"""``emubroker admin``'s parser and run: the resources, the admin URL, the answer printed.

The package's docstring (``emubroker.admin_cli``) says what the command line is; the commands
of each resource are in their modules (``namespaces``, ``topics``, ``bundles``, ``placement``,
``security``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, Final

from emubroker.admin_cli.placement import (
    isolation_policy_commands,
)
from emubroker.admin_cli.security import (
    CliError,
    add_auth_options,
    client_credentials,
    tokens_commands,
)
from emubroker.adminclient import AdminClient, AdminError
from emubroker.auth import SecurityConfigError

if TYPE_CHECKING:
    from collections.abc import Sequence

from emubroker.admin_cli.args import (
    quote,
    relative_seconds,
)
from emubroker.admin_cli.namespaces import _clusters, _namespaces, _tenants
from emubroker.admin_cli.topics import _topics

__all__ = ["DEFAULT_ADMIN_URL", "add_parser", "main", "run"]

DEFAULT_ADMIN_URL: Final = "http://localhost:8080"


def _brokers(sub: Any) -> None:
    lst = sub.add_parser("list", help="list active brokers")
    lst.add_argument("cluster", nargs="?")
    lst.set_defaults(
        run=lambda c, a: c.call(
            "GET", "/admin/v2/brokers" + (f"/{quote(a.cluster)}" if a.cluster else "")
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
            f"/admin/v2/brokers/{quote(a.cluster)}/"
            f"{quote(a.url.removeprefix('http://').removeprefix('https://'))}/ownedNamespaces",
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
            f"/admin/v2/brokers/configuration/{quote(a.config)}/{quote(a.value)}",
        )
    )
    delete = sub.add_parser("delete-dynamic-config", help="remove a dynamic configuration value")
    delete.add_argument("--config", required=True)
    delete.set_defaults(
        run=lambda c, a: c.call("DELETE", f"/admin/v2/brokers/configuration/{quote(a.config)}")
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
        ("tokens", lambda sub: tokens_commands(sub, relative_seconds)),
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
