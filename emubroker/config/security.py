"""The security keys of ``broker.conf``: TLS, authentication and authorization (Pulsar's names).

:class:`SecurityConfig` is a base of :class:`~emubroker.config.BrokerConfig`, kept apart so that
each module stays one screenful of keys. Defaults are Pulsar's: everything off. Lists that
Pulsar reads as comma-separated strings (``authenticationProviders``, ``superUserRoles``) are
kept as the string and split by :meth:`SecurityConfig.csv`.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

import msgspec

from emubroker.config.throttling import DispatchThrottlingConfig

__all__ = ["PULSAR_AUTHORIZATION_PROVIDER", "SecurityConfig"]

_Port = Annotated[int, msgspec.Meta(ge=0, le=65535)]

PULSAR_AUTHORIZATION_PROVIDER: Final = (
    "org.apache.pulsar.broker.authorization.PulsarAuthorizationProvider"
)
"""The only ``authorizationProvider`` emulated (Pulsar's default)."""


class SecurityConfig(DispatchThrottlingConfig, frozen=True):
    """TLS, authentication and authorization settings (docs/security.md tells the behaviour).

    It derives from :class:`~emubroker.config.throttling.DispatchThrottlingConfig` only because
    msgspec structs take fields from one base: ``BrokerConfig`` stacks the key families in a line.

    Attributes:
        brokerServicePortTls: Port of the binary protocol over TLS (``pulsar+ssl://``); unset:
            no TLS listener; ``0`` picks a free one.
        webServicePortTls: Port of the admin API over HTTPS; unset: none; ``0``: a free one.
        tlsCertificateFilePath: The broker's certificate (PEM, may hold the chain).
        tlsKeyFilePath: The broker's private key (PEM).
        tlsTrustCertsFilePath: CAs that client certificates must chain to; empty: the system's.
        tlsRequireTrustedClientCertOnConnect: Refuse TLS clients without a trusted certificate.
        tlsAllowInsecureConnection: Do not verify client certificates (see docs/security.md for
            what the emulator can and cannot request then).
        tlsProtocols: Comma-separated ``TLSv1.2``/``TLSv1.3``; empty: both.
        tlsCiphers: OpenSSL cipher list for TLS 1.2; empty: the library's default.
        authenticationEnabled: Ask every connection and REST call who it is.
        authenticationProviders: Comma-separated Pulsar class names of the providers:
            ``...AuthenticationProviderToken``, ``...AuthenticationProviderBasic``,
            ``...AuthenticationProviderTls``.
        authenticationRefreshCheckSeconds: How often a connection's credentials are checked for
            expiry (an expired token gets an AUTH_CHALLENGE).
        anonymousUserRole: The role of a client that sends no credentials, or names a method no
            provider serves; empty: such clients are refused.
        authorizationEnabled: Check what each role may do (Pulsar's
            ``PulsarAuthorizationProvider`` rules).
        authorizationProvider: Only Pulsar's default provider is emulated.
        authorizationAllowWildcardsMatching: ``role*`` / ``*role`` in permissions match.
        superUserRoles: Comma-separated roles allowed everything.
        authenticateMetricsEndpoint: ``/metrics`` asks for credentials too.
        tokenSecretKey: HS256/384/512 key: ``file:///path``, ``data:;base64,...``, a path, or
            base64 text, as Pulsar reads it.
        tokenPublicKey: RSA or EC public key (DER or PEM), in the same forms.
        tokenPublicAlg: The public key's algorithm (``RS256``, ``ES256``, ...).
        tokenAuthClaim: The claim holding the role; empty: ``sub``.
        tokenAudienceClaim: A claim that must name this broker (with ``tokenAudience``).
        tokenAudience: This broker's audience.
        tokenAllowedClockSkewSeconds: Leeway on ``exp`` and ``nbf``.
        basicAuthConf: The htpasswd-style users file of basic authentication (a path, a
            ``file:``/``data:`` URL, or base64 text).
        brokerClientAuthenticationPlugin: The identity of this broker's own clients (the
            standalone's bootstrap, the health check, the leader's unloads and splits):
            Pulsar's ``AuthenticationToken``, ``AuthenticationBasic`` or ``AuthenticationTls``
            class name; empty: none (``emubroker.auth.broker_client``).
        brokerClientAuthenticationParameters: That plugin's parameters (``token:<jwt>``,
            ``file:///path``; ``{"userId": ..., "password": ...}``;
            ``{"tlsCertFile": ..., "tlsKeyFile": ...}``).
    """

    brokerServicePortTls: _Port | None = None
    webServicePortTls: _Port | None = None
    tlsCertificateFilePath: str = ""
    tlsKeyFilePath: str = ""
    tlsTrustCertsFilePath: str = ""
    tlsRequireTrustedClientCertOnConnect: bool = False
    tlsAllowInsecureConnection: bool = False
    tlsProtocols: str = ""
    tlsCiphers: str = ""
    authenticationEnabled: bool = False
    authenticationProviders: str = ""
    authenticationRefreshCheckSeconds: Annotated[int, msgspec.Meta(gt=0)] = 60
    anonymousUserRole: str = ""
    authorizationEnabled: bool = False
    authorizationProvider: Literal[
        "org.apache.pulsar.broker.authorization.PulsarAuthorizationProvider"
    ] = PULSAR_AUTHORIZATION_PROVIDER
    authorizationAllowWildcardsMatching: bool = False
    superUserRoles: str = ""
    authenticateMetricsEndpoint: bool = False
    tokenSecretKey: str = ""
    tokenPublicKey: str = ""
    tokenPublicAlg: str = "RS256"
    tokenAuthClaim: str = ""
    tokenAudienceClaim: str = ""
    tokenAudience: str = ""
    tokenAllowedClockSkewSeconds: Annotated[int, msgspec.Meta(ge=0)] = 0
    basicAuthConf: str = ""
    brokerClientAuthenticationPlugin: Literal[
        "",
        "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "org.apache.pulsar.client.impl.auth.AuthenticationBasic",
        "org.apache.pulsar.client.impl.auth.AuthenticationTls",
    ] = ""
    brokerClientAuthenticationParameters: str = ""

    @staticmethod
    def csv(value: str) -> list[str]:
        """A comma-separated key as Pulsar splits it: trimmed, empty items dropped."""
        return [item.strip() for item in value.split(",") if item.strip()]

    @property
    def tls_enabled(self) -> bool:
        """A TLS listener (binary or HTTPS) is configured."""
        return self.brokerServicePortTls is not None or self.webServicePortTls is not None
