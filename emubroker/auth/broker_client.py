"""A Pulsar client's credentials (HTTP header, CONNECT) from its plugin name and parameters.

Used for the broker's own clients (``brokerClientAuthenticationPlugin`` and
``brokerClientAuthenticationParameters``: the leader's unload and split calls to other brokers,
and the health check's binary-protocol client) and by
``emubroker admin``'s ``--auth-plugin``/``--auth-params``. The parameter forms are the Java
client's:

- ``AuthenticationToken``: ``token:<jwt>``, ``file:///path`` (the token read from the file), or
  the JWT itself; a JSON object ``{"token": "..."}`` too;
- ``AuthenticationBasic``: ``{"userId": "...", "password": "..."}`` (or ``userId:password``);
- ``AuthenticationTls``: ``{"tlsCertFile": "...", "tlsKeyFile": "..."}`` (or
  ``tlsCertFile:/path,tlsKeyFile:/path``): the client certificate (PEM) the broker's client
  presents. Its CONNECT says method ``tls`` with no data, as the Java client's does.

The broker's own binary-protocol client (the health check) reaches this broker in memory, so
there is no handshake to carry a certificate: the session is handed the configured certificate
as the one a handshake would have verified (:func:`client_certificate`), and the broker's TLS
provider reads its CN as for any client. The broker's HTTP calls to other brokers are plain HTTP
here and carry no certificate. :func:`broker_client_role` is the role the broker acts as.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Final

from emubroker.auth.errors import AuthenticationFailed, SecurityConfigError
from emubroker.auth.keys import read_key
from emubroker.auth.provider import Credentials
from emubroker.auth.service import AuthenticationService

if TYPE_CHECKING:
    from emubroker.config.security import SecurityConfig

__all__ = [
    "AUTH_PACKAGE",
    "BASIC",
    "TLS",
    "TOKEN",
    "authorization_header",
    "broker_client_role",
    "client_certificate",
    "connect_credentials",
    "plugin_kind",
]

AUTH_PACKAGE: Final = "org.apache.pulsar.client.impl.auth."
TOKEN: Final = "token"
BASIC: Final = "basic"
TLS: Final = "tls"


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
    if kind == TLS:
        return TLS, b""
    return None


def client_certificate(kind: str, params: str) -> bytes | None:
    """The DER certificate a TLS plugin presents (``tlsCertFile``); None for other kinds.

    Raises:
        ValueError: Parameters without a ``tlsCertFile``, or a file that is no PEM certificate.
        SecurityConfigError: The file cannot be read.
    """
    if kind != TLS:
        return None
    path = _tls_params(params).get("tlsCertFile")
    if not path:
        raise ValueError('tls parameters: {"tlsCertFile": "...", "tlsKeyFile": "..."}')
    # Loaded here: a broker without a TLS identity never needs cryptography.
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    try:
        certificate = x509.load_pem_x509_certificate(read_key(path))
    except ValueError:
        raise ValueError(f"tlsCertFile {path}: not a PEM certificate") from None
    return certificate.public_bytes(Encoding.DER)


def broker_client_role(config: SecurityConfig, *, wall_time: float) -> str | None:
    """The role this broker's own client authenticates as; None when it is refused.

    Without authentication every client is accepted: the role is ``anonymousUserRole`` (maybe
    empty). With it, the broker's credentials go through the broker's own providers, as a
    CONNECT of its client would.
    """
    service = AuthenticationService.from_config(config)
    if service is None:
        return config.anonymousUserRole
    kind = plugin_kind(config.brokerClientAuthenticationPlugin)
    params = config.brokerClientAuthenticationParameters
    try:
        found = connect_credentials(kind, params)
        credentials = Credentials(
            command_data=None if found is None else found[1],
            peer_certificate=client_certificate(kind, params),
        )
        return service.authenticate_connect(
            None if found is None else found[0], None, credentials, wall_time=wall_time
        ).role
    except (ValueError, SecurityConfigError, AuthenticationFailed):
        return None


def _tls_params(params: str) -> dict[str, str]:
    params = params.strip()
    if params.startswith("{"):
        try:
            values = json.loads(params)
        except ValueError:
            values = None
        if not isinstance(values, dict):
            raise ValueError('tls parameters: {"tlsCertFile": "...", "tlsKeyFile": "..."}')
        return {str(k): str(v) for k, v in values.items()}
    pairs = (item.split(":", 1) for item in params.split(",") if ":" in item)
    return {key.strip(): value.strip() for key, value in pairs}


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
