"""Basic authentication (Pulsar's ``AuthenticationProviderBasic``): users from an htpasswd file.

The users file is ``basicAuthConf`` (or, as in Pulsar, the ``pulsar.auth.basic.conf`` setting's
value, which Pulsar reads from a JVM property), in any form :func:`~emubroker.auth.keys.read_key`
reads. Each line is ``user:hash``; a line that does not split into exactly two parts on ``:``
stops start-up, as in Pulsar. Credentials are ``user:password``: the CONNECT data, or the
base64 of an ``Authorization: Basic`` header. Hashes: see :mod:`emubroker.auth.htpasswd`.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

from emubroker.auth.errors import AuthenticationFailed, SecurityConfigError
from emubroker.auth.htpasswd import check_password
from emubroker.auth.keys import read_key
from emubroker.auth.provider import Authenticated, Credentials

if TYPE_CHECKING:
    from emubroker.config.security import SecurityConfig

__all__ = ["BasicProvider", "parse_users"]


def parse_users(text: str) -> dict[str, str]:
    """``{user: hash}`` of an htpasswd-style file.

    Raises:
        SecurityConfigError: A line is not ``user:hash``.
    """
    users: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":")
        if len(parts) != 2:
            raise SecurityConfigError("The format of the password auth conf file is invalid")
        users[parts[0]] = parts[1]
    return users


class BasicProvider:
    """``AuthenticationProviderBasic``: method ``basic``.

    Args:
        config: ``basicAuthConf``.

    Raises:
        SecurityConfigError: No users file, or one that cannot be read or parsed.
    """

    method_name = "basic"

    def __init__(self, config: SecurityConfig) -> None:
        if not config.basicAuthConf:
            raise SecurityConfigError("No basic authentication config provided (basicAuthConf)")
        self._users = parse_users(read_key(config.basicAuthConf).decode("utf-8", "replace"))

    def authenticate(self, credentials: Credentials, *, wall_time: float) -> Authenticated:
        """The user name, when the password matches its hash.

        Raises:
            AuthenticationFailed: No credentials, malformed ones, an unknown user or a wrong
                password.
        """
        user, password = _user_and_password(credentials)
        stored = self._users.get(user)
        if stored is None or not check_password(password, stored):
            raise AuthenticationFailed("Unknown user or invalid password")
        return Authenticated(user, self.method_name)


def _user_and_password(credentials: Credentials) -> tuple[str, str]:
    if credentials.command_data is not None:
        text = credentials.command_data.decode("utf-8", "replace")
    elif credentials.http_authorization is not None:
        header = credentials.http_authorization
        if not header.upper().startswith("BASIC "):
            raise AuthenticationFailed('Authentication token has to be started with "Basic "')
        parts = header.split(" ")
        if len(parts) != 2:
            raise AuthenticationFailed("Base64 encoded token is not found")
        try:
            text = base64.b64decode(parts[1], validate=True).decode("utf-8", "replace")
        except (binascii.Error, ValueError) as exc:
            raise AuthenticationFailed(f"Base64 decoding is failure: {exc}") from None
    else:
        raise AuthenticationFailed("Authentication data source does not have data")
    parts = text.split(":")
    if len(parts) != 2:
        raise AuthenticationFailed("Base64 decoded params are invalid")
    return parts[0], parts[1]
