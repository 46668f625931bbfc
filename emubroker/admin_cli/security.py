"""The security parts of ``emubroker admin``: credentials, permissions and ``tokens``.

* Credentials, as ``pulsar-admin`` takes them: ``--auth-plugin`` with ``--auth-params``
  (``AuthenticationToken`` + ``token:<jwt>`` or ``file:///path``; ``AuthenticationBasic`` +
  ``{"userId": ..., "password": ...}``; ``AuthenticationTls`` +
  ``tlsCertFile:...,tlsKeyFile:...``), ``--tls-trust-cert-path``, ``--tls-allow-insecure``.
* ``namespaces grant-permission | revoke-permission | permissions`` (and the subscription
  variants) and ``topics grant-permission | revoke-permission | permissions``.
* ``tokens create-secret-key | create-key-pair | create | show | validate``, as ``pulsar tokens``
  does them (same flags, same output): they need no broker.
"""

from __future__ import annotations

import base64
import binascii
import ssl
import sys
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emubroker.auth.broker_client import BASIC, TOKEN, authorization_header, plugin_kind
from emubroker.auth.errors import AuthenticationFailed
from emubroker.auth.keys import read_key
from emubroker.auth.token import (
    TokenProvider,
    create_token,
    generate_key_pair,
    generate_secret_key,
    load_private_key,
    load_public_key,
)
from emubroker.config.security import SecurityConfig
from protocol.clock import AnyioClock

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

__all__ = [
    "CliError",
    "add_auth_options",
    "client_credentials",
    "permission_commands",
    "tokens_commands",
]


class CliError(Exception):
    """A usage problem of a security command (the CLI prints it and exits 1)."""


# ---- credentials -------------------------------------------------------------------------------


def add_auth_options(parser: argparse.ArgumentParser) -> None:
    """``pulsar-admin``'s authentication and TLS flags."""
    parser.add_argument("--auth-plugin", help="AuthenticationToken, AuthenticationBasic, ...Tls")
    parser.add_argument(
        "--auth-params", help="the plugin's parameters (see --help of pulsar-admin)"
    )
    parser.add_argument("--tls-trust-cert-path", help="CA certificates for an https:// admin URL")
    parser.add_argument(
        "--tls-allow-insecure", action="store_true", help="do not verify the broker's certificate"
    )


def client_credentials(args: argparse.Namespace) -> tuple[dict[str, str], ssl.SSLContext | None]:
    """The HTTP headers and TLS context the admin client should use.

    Raises:
        CliError: Unknown plugin or unreadable parameters.
    """
    headers: dict[str, str] = {}
    params = args.auth_params or ""
    plugin = plugin_kind(args.auth_plugin)
    cert_file = key_file = None
    if plugin in (TOKEN, BASIC):
        try:
            header = authorization_header(plugin, params)
        except ValueError as exc:
            raise CliError(f"--auth-params: {exc}") from None
        if header is not None:
            headers["Authorization"] = header
    elif plugin == "tls":
        parts = dict(item.split(":", 1) for item in params.split(",") if ":" in item)
        cert_file, key_file = parts.get("tlsCertFile"), parts.get("tlsKeyFile")
    elif plugin:
        raise CliError(f"unknown --auth-plugin {args.auth_plugin!r}")
    context = None
    if args.admin_url.startswith("https://"):
        context = ssl.create_default_context(cafile=args.tls_trust_cert_path)
        if args.tls_allow_insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if cert_file and key_file:
            context.load_cert_chain(cert_file, key_file)
    return headers, context


# ---- permissions -------------------------------------------------------------------------------


def permission_commands(sub: Any, path_of: Callable[[str], str], kind: str) -> None:
    """``grant-permission``, ``revoke-permission``, ``permissions`` for ``kind`` (topic/namespace).

    Args:
        sub: The resource's subparsers.
        path_of: Turns the positional name into its REST path.
        kind: ``namespace`` or ``topic``.
    """
    arg = "namespace" if kind == "namespace" else "topic"
    grant = sub.add_parser("grant-permission", help=f"grant a role actions on a {kind}")
    grant.add_argument(arg)
    grant.add_argument("--role", required=True)
    grant.add_argument(
        "--actions", required=True, help="comma-separated: produce,consume,functions,..."
    )
    grant.set_defaults(
        run=lambda c, a: c.call(
            "POST",
            f"{path_of(getattr(a, arg))}/permissions/{_quote(a.role)}",
            [x.strip() for x in a.actions.split(",") if x.strip()],
        )
    )
    revoke = sub.add_parser("revoke-permission", help=f"revoke a role's actions on a {kind}")
    revoke.add_argument(arg)
    revoke.add_argument("--role", required=True)
    revoke.set_defaults(
        run=lambda c, a: c.call(
            "DELETE", f"{path_of(getattr(a, arg))}/permissions/{_quote(a.role)}"
        )
    )
    show = sub.add_parser("permissions", help=f"show the permissions on a {kind}")
    show.add_argument(arg)
    show.set_defaults(run=lambda c, a: c.call("GET", f"{path_of(getattr(a, arg))}/permissions"))
    if kind != "namespace":
        return
    grant_sub = sub.add_parser(
        "grant-subscription-permission", help="only these roles may consume a subscription"
    )
    grant_sub.add_argument("namespace")
    grant_sub.add_argument("--subscription", required=True)
    grant_sub.add_argument("--roles", required=True, help="comma-separated roles")
    grant_sub.set_defaults(
        run=lambda c, a: c.call(
            "POST",
            f"{path_of(a.namespace)}/permissions/subscription/{_quote(a.subscription)}",
            [r.strip() for r in a.roles.split(",") if r.strip()],
        )
    )
    revoke_sub = sub.add_parser(
        "revoke-subscription-permission", help="remove a role from a subscription's roles"
    )
    revoke_sub.add_argument("namespace")
    revoke_sub.add_argument("--subscription", required=True)
    revoke_sub.add_argument("--role", required=True)
    revoke_sub.set_defaults(
        run=lambda c, a: c.call(
            "DELETE",
            f"{path_of(a.namespace)}/permissions/{_quote(a.subscription)}/{_quote(a.role)}",
        )
    )
    on_sub = sub.add_parser("permissions-on-subscription", help="show subscription roles")
    on_sub.add_argument("namespace")
    on_sub.set_defaults(
        run=lambda c, a: c.call("GET", f"{path_of(a.namespace)}/permissions/subscription")
    )


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


# ---- tokens ------------------------------------------------------------------------------------


def tokens_commands(sub: Any, relative_seconds: Callable[[str], int]) -> None:
    """``pulsar tokens``' commands (they run locally; the admin URL is not used).

    Args:
        sub: The ``tokens`` resource's subparsers.
        relative_seconds: Parses ``--expiry-time`` (``1h``, ``3d``, ``10y``...).
    """
    secret = sub.add_parser("create-secret-key", help="create a new secret key")
    secret.add_argument("-a", "--signature-algorithm", default="HS256")
    secret.add_argument("-o", "--output", help="write the key to a file instead of stdout")
    secret.add_argument("-b", "--base64", action="store_true", help="encode the key in base64")
    secret.set_defaults(run=lambda _c, a: _create_secret_key(a))
    pair = sub.add_parser("create-key-pair", help="create a public/private key pair")
    pair.add_argument("-a", "--signature-algorithm", default="RS256")
    pair.add_argument("--output-private-key", required=True)
    pair.add_argument("--output-public-key", required=True)
    pair.set_defaults(run=lambda _c, a: _create_key_pair(a))
    create = sub.add_parser("create", help="create a new token")
    create.add_argument("-a", "--signature-algorithm", default="RS256")
    create.add_argument("-s", "--subject", required=True, help="the role of the token")
    create.add_argument("-e", "--expiry-time", help="relative expiry (1h, 3d, 10y); default none")
    create.add_argument("-sk", "--secret-key", help="data:, file:, a path or base64")
    create.add_argument("-pk", "--private-key", help="data:, file:, a path or base64")
    create.add_argument("-hs", "--headers", action="append", default=[], help="key=value")
    create.set_defaults(run=lambda _c, a: _create(a, relative_seconds))
    for verb, help_text in (("show", "show a token's content"), ("validate", "validate a token")):
        cmd = sub.add_parser(verb, help=help_text)
        cmd.add_argument("token", nargs="?")
        cmd.add_argument("-i", "--stdin", action="store_true", help="read the token from stdin")
        cmd.add_argument("-f", "--token-file", help="read the token from a file")
        if verb == "validate":
            cmd.add_argument("-a", "--signature-algorithm", default="RS256")
            cmd.add_argument("-sk", "--secret-key")
            cmd.add_argument("-pk", "--public-key")
        cmd.set_defaults(run=lambda _c, a, v=verb: _show(a) if v == "show" else _validate(a))


def _create_secret_key(args: argparse.Namespace) -> None:
    key = generate_secret_key(args.signature_algorithm)
    data = base64.b64encode(key) if args.base64 else key
    if args.output:
        Path(args.output).write_bytes(data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def _create_key_pair(args: argparse.Namespace) -> None:
    private, public = generate_key_pair(args.signature_algorithm)
    Path(args.output_public_key).write_bytes(public)
    Path(args.output_private_key).write_bytes(private)


def _create(args: argparse.Namespace, relative_seconds: Callable[[str], int]) -> str:
    if (args.secret_key is None) == (args.private_key is None):
        raise CliError(
            "Either --secret-key or --private-key needs to be passed for signing a token"
            if args.secret_key is None
            else "Only one of --secret-key and --private-key needs to be passed for signing a token"
        )
    key: Any = (
        load_private_key(read_key(args.private_key))
        if args.private_key is not None
        else read_key(args.secret_key)
    )
    now = AnyioClock().wall_ns() // 1_000_000_000
    expires = now + relative_seconds(args.expiry_time) if args.expiry_time else None
    headers = dict(item.split("=", 1) for item in args.headers if "=" in item)
    return create_token(key, args.subject, expires_at=expires, headers=headers or None)


def _token(args: argparse.Namespace) -> str:
    if args.token:
        return str(args.token)
    if args.stdin:
        return sys.stdin.readline().strip()
    if args.token_file:
        return Path(args.token_file).read_text().strip()
    raise CliError(
        "Token needs to be either passed as an argument or through `--stdin`, `--token-file`"
    )


def _b64url(part: str) -> str:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)).decode("utf-8", "replace")
    except (binascii.Error, ValueError) as exc:
        raise CliError(f"not a token: {exc}") from None


def _show(args: argparse.Namespace) -> str:
    parts = _token(args).split(".")
    if len(parts) < 2:
        raise CliError("not a token: expected header.payload.signature")
    return f"{_b64url(parts[0])}\n---\n{_b64url(parts[1])}"


def _validate(args: argparse.Namespace) -> str:
    if (args.secret_key is None) == (args.public_key is None):
        raise CliError("Either --secret-key or --public-key needs to be passed")
    if args.public_key is not None:
        load_public_key(read_key(args.public_key), args.signature_algorithm)  # fail early
    config = SecurityConfig(
        tokenSecretKey=args.secret_key or "",
        tokenPublicKey=args.public_key or "",
        tokenPublicAlg=args.signature_algorithm,
    )
    try:
        claims = TokenProvider(config).verify(_token(args), wall_time=AnyioClock().wall_ns() / 1e9)
    except AuthenticationFailed as exc:
        raise CliError(str(exc)) from None
    # jjwt prints its Claims map the Java way: {sub=role, exp=123}
    return "{" + ", ".join(f"{k}={v}" for k, v in claims.items()) + "}"
