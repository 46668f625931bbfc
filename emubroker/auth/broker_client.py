"""A Pulsar client's credentials (HTTP header, CONNECT) from its plugin name and parameters.

Used for the broker's own clients (``brokerClientAuthenticationPlugin`` and
``brokerClientAuthenticationParameters``: the leader's unload and split calls to other brokers,
and the health check's binary-protocol client) and by
``emubroker admin``'s ``--auth-plugin``/``--auth-params``. The parameter forms are the Java
client's:

- ``AuthenticationToken``: ``token:<jwt>``, ``file:///path`` (the token read from the file), or
  the JWT itself; a JSON object ``{"token": "..."}`` too;
- ``AuthenticationBasic``: ``{"userId": "...", "password": "..."}`` (or ``userId:password``).

TLS client certificates (``AuthenticationTls``) are not sent by the broker's own client: the
configuration refuses that plugin for ``brokerClientAuthenticationPlugin``.
"""

from __future__ import annotations

import base64
import json
from typing import Final

from emubroker.auth.keys import read_key

__all__ = [
    "AUTH_PACKAGE",
    "BASIC",
    "TOKEN",
    "authorization_header",
    "connect_credentials",
    "plugin_kind",
]

AUTH_PACKAGE: Final = "org.apache.pulsar.client.impl.auth."
TOKEN: Final = "token"
BASIC: Final = "basic"


def plugin_kind(name: str | None) -> str:
    """``token``, ``basic``, ``tls``, ``""`` (none) or the lower-cased unknown name."""
    short = (name or "").strip().removeprefix(AUTH_PACKAGE).lower()
    return {"authenticationtoken": TOKEN, "authenticationbasic": BASIC}.get(
        short, "tls" if short in ("authenticationtls", "tls") else short
    )


def authorization_header(kind: str, params: str) -> str | None:
    """The ``Authorization`` header value for a token or basic plugin; None for other kinds.

    Raises:
        ValueError: Parameters the plugin cannot read (the message says the expected form).
        SecurityConfigError: A ``file:`` token that cannot be read.
    """
    if kind == TOKEN:
        return f"Bearer {_token(params)}"
    if kind == BASIC:
        user, password = _user_password(params)
        pair = base64.b64encode(f"{user}:{password}".encode()).decode()
        return f"Basic {pair}"
    return None


def connect_credentials(kind: str, params: str) -> tuple[str, bytes] | None:
    """CONNECT's ``(auth_method_name, auth_data)`` for a token or basic plugin; None otherwise.

    The data is what the clients send: the token, or ``user:password``.

    Raises:
        ValueError: Parameters the plugin cannot read (the message says the expected form).
        SecurityConfigError: A ``file:`` token that cannot be read.
    """
    if kind == TOKEN:
        return TOKEN, _token(params).encode()
    if kind == BASIC:
        user, password = _user_password(params)
        return BASIC, f"{user}:{password}".encode()
    return None


def _token(params: str) -> str:
    params = params.strip()
    if params.startswith("{"):
        try:
            return str(json.loads(params)["token"])
        except (ValueError, KeyError, TypeError):
            raise ValueError('token parameters: {"token": "..."}') from None
    if params.startswith("file:"):
        return read_key(params).decode().strip()
    return params.removeprefix("token:")


def _user_password(params: str) -> tuple[str, str]:
    params = params.strip()
    try:
        if params.startswith("{"):
            values = json.loads(params)
            return str(values["userId"]), str(values["password"])
        user, password = params.split(":", 1)
    except (ValueError, KeyError, TypeError):
        raise ValueError('basic parameters: {"userId": "...", "password": "..."}') from None
    return user, password
