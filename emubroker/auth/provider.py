"""What every authentication provider is: one class per method behind one ``Protocol``.

A provider turns the credentials a client presented (:class:`Credentials`) into a role, or
raises :class:`~emubroker.auth.errors.AuthenticationFailed`. The same provider serves the binary
protocol (CONNECT's ``auth_data``, then AUTH_RESPONSE on refresh) and REST (the
``Authorization`` header); TLS-based providers read the verified client certificate of either.
Providers are pure: they take the wall-clock time as an argument (token expiry) and do no I/O
after construction.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

__all__ = ["Authenticated", "AuthenticationProvider", "Credentials"]


class Credentials(msgspec.Struct, frozen=True):
    """What a client presented.

    Attributes:
        command_data: CONNECT's or AUTH_RESPONSE's ``auth_data`` (binary protocol), else None.
        http_authorization: The REST ``Authorization`` header, else None.
        peer_certificate: The DER client certificate the TLS handshake verified, else None.
    """

    command_data: bytes | None = None
    http_authorization: str | None = None
    peer_certificate: bytes | None = None


class Authenticated(msgspec.Struct, frozen=True):
    """A successful authentication.

    Attributes:
        role: The principal, as authorization sees it.
        method: The provider's method name (``token``, ``basic``, ``tls``).
        expires_at: Wall-clock seconds after which the credentials must be refreshed (a token's
            ``exp``); None for credentials that do not expire.
    """

    role: str
    method: str
    expires_at: float | None = None


class AuthenticationProvider(Protocol):
    """One authentication method (Pulsar's ``AuthenticationProvider``)."""

    @property
    def method_name(self) -> str:
        """The ``auth_method_name`` clients send for this method."""
        ...

    def authenticate(self, credentials: Credentials, *, wall_time: float) -> Authenticated:
        """The role of ``credentials``.

        Args:
            credentials: What the client presented.
            wall_time: Seconds since the epoch (from the broker's clock), for expiry checks.

        Raises:
            AuthenticationFailed: The credentials are missing, malformed, wrong or expired.
        """
        ...
