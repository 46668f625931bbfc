"""``emubroker admin`` commands for placement policies, as ``pulsar-admin`` spells them.

- ``ns-isolation-policy set CLUSTER NAME --namespaces R,.. --primary R,.. [--secondary R,..]
  --auto-failover-policy-type min_available --auto-failover-policy-params
  min_limit=1,usage_threshold=100``; ``get CLUSTER NAME``, ``list CLUSTER``, ``delete CLUSTER
  NAME``, ``brokers CLUSTER``, ``broker CLUSTER --broker HOST:PORT``
  (``pulsar-admin ns-isolation-policy``);
- ``namespaces set-anti-affinity-group NS --group G``, ``get-anti-affinity-group NS``,
  ``delete-anti-affinity-group NS``;
- ``clusters create-failure-domain|update-failure-domain CLUSTER --domain-name D
  [--broker-list B1,B2]``, ``get-failure-domain CLUSTER --domain-name D``,
  ``list-failure-domains CLUSTER``, ``delete-failure-domain CLUSTER --domain-name D``.
"""

from __future__ import annotations

import argparse
import urllib.parse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["anti_affinity_commands", "failure_domain_commands", "isolation_policy_commands"]


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _params(text: str) -> dict[str, str]:
    params = {}
    for pair in _csv(text):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise argparse.ArgumentTypeError(f"not key=value: {pair!r}")
        params[key.strip()] = value.strip()
    return params


def _policies_path(cluster: str) -> str:
    return f"/admin/v2/clusters/{_quote(cluster)}/namespaceIsolationPolicies"


def isolation_policy_commands(sub: Any) -> None:
    """Add the ``ns-isolation-policy`` commands (``set``, ``get``, ``list``, ``delete``, ...)."""
    put = sub.add_parser("set", help="create or replace a namespace isolation policy")
    put.add_argument("cluster")
    put.add_argument("policy")
    put.add_argument(
        "--namespaces", required=True, type=_csv, help="namespace regexes, comma-separated"
    )
    put.add_argument("--primary", required=True, type=_csv, help="primary broker host regexes")
    put.add_argument("--secondary", type=_csv, default=[], help="secondary broker host regexes")
    put.add_argument("--auto-failover-policy-type", default="min_available", help="min_available")
    put.add_argument(
        "--auto-failover-policy-params",
        type=_params,
        required=True,
        help="min_limit=N,usage_threshold=N",
    )

    def set_policy(client: Any, args: argparse.Namespace) -> Any:
        body = {
            "namespaces": args.namespaces,
            "primary": args.primary,
            "secondary": args.secondary,
            "auto_failover_policy": {
                "policy_type": args.auto_failover_policy_type,
                "parameters": args.auto_failover_policy_params,
            },
        }
        return client.call("POST", f"{_policies_path(args.cluster)}/{_quote(args.policy)}", body)

    put.set_defaults(run=set_policy)
    for verb, method, help_text in (
        ("get", "GET", "show a namespace isolation policy"),
        ("delete", "DELETE", "delete a namespace isolation policy"),
    ):
        cmd = sub.add_parser(verb, help=help_text)
        cmd.add_argument("cluster")
        cmd.add_argument("policy")
        cmd.set_defaults(
            run=lambda c, a, m=method: c.call(m, f"{_policies_path(a.cluster)}/{_quote(a.policy)}")
        )
    lst = sub.add_parser("list", help="show every namespace isolation policy of a cluster")
    lst.add_argument("cluster")
    lst.set_defaults(run=lambda c, a: c.call("GET", _policies_path(a.cluster)))
    brokers = sub.add_parser("brokers", help="every broker with the isolation policy on it")
    brokers.add_argument("cluster")
    brokers.set_defaults(run=lambda c, a: c.call("GET", f"{_policies_path(a.cluster)}/brokers"))
    broker = sub.add_parser("broker", help="one broker with the isolation policy on it")
    broker.add_argument("cluster")
    broker.add_argument("--broker", required=True, help="the broker's name (host:port)")
    broker.set_defaults(
        run=lambda c, a: c.call("GET", f"{_policies_path(a.cluster)}/brokers/{_quote(a.broker)}")
    )


def anti_affinity_commands(sub: Any, path_of: Callable[[str], str]) -> None:
    """Add the anti-affinity group commands to the ``namespaces`` subparsers.

    Args:
        sub: The ``namespaces`` subparsers.
        path_of: Turns ``tenant/namespace`` into its REST path.
    """
    put = sub.add_parser("set-anti-affinity-group", help="set the namespace's anti-affinity group")
    put.add_argument("namespace", help="tenant/namespace")
    put.add_argument("-g", "--group", required=True, help="the anti-affinity group")
    put.set_defaults(
        run=lambda c, a: c.call(
            "POST", f"{path_of(a.namespace)}/antiAffinity", raw=a.group.encode()
        )
    )
    for verb, method in (("get", "GET"), ("delete", "DELETE")):
        cmd = sub.add_parser(
            f"{verb}-anti-affinity-group", help=f"{verb} the namespace's anti-affinity group"
        )
        cmd.add_argument("namespace", help="tenant/namespace")
        cmd.set_defaults(
            run=lambda c, a, m=method: c.call(m, f"{path_of(a.namespace)}/antiAffinity")
        )


def _domain_path(cluster: str, domain: str | None = None) -> str:
    path = f"/admin/v2/clusters/{_quote(cluster)}/failureDomains"
    return path if domain is None else f"{path}/{_quote(domain)}"


def failure_domain_commands(sub: Any) -> None:
    """Add the failure domain commands to the ``clusters`` subparsers."""
    for verb, help_text in (
        ("create-failure-domain", "create a failure domain of a cluster"),
        ("update-failure-domain", "replace a failure domain's brokers (created if missing)"),
    ):
        put = sub.add_parser(verb, help=help_text)
        put.add_argument("cluster")
        put.add_argument("--domain-name", required=True)
        put.add_argument("--broker-list", type=_csv, help="brokers (host:port), comma-separated")
        put.set_defaults(
            run=lambda c, a: c.call(
                "POST",
                _domain_path(a.cluster, a.domain_name),
                {"brokers": a.broker_list} if a.broker_list else {},
            )
        )
    for verb, method, help_text in (
        ("get-failure-domain", "GET", "show a failure domain's brokers"),
        ("delete-failure-domain", "DELETE", "delete a failure domain"),
    ):
        cmd = sub.add_parser(verb, help=help_text)
        cmd.add_argument("cluster")
        cmd.add_argument("--domain-name", required=True)
        cmd.set_defaults(
            run=lambda c, a, m=method: c.call(m, _domain_path(a.cluster, a.domain_name))
        )
    lst = sub.add_parser("list-failure-domains", help="show every failure domain of a cluster")
    lst.add_argument("cluster")
    lst.set_defaults(run=lambda c, a: c.call("GET", _domain_path(a.cluster)))
