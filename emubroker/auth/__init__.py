"""Authentication, authorization and TLS, as Pulsar does them (docs/security.md).

The rest of the broker reaches this package through a narrow seam: :class:`Security`, built
once by the composition root. Its parts are ``None`` when the configuration turns them off, so
a broker without security checks one attribute and pays nothing more.

* :mod:`~emubroker.auth.provider`: the ``AuthenticationProvider`` protocol; one class per
  method in :mod:`~emubroker.auth.token`, :mod:`~emubroker.auth.basic`,
  :mod:`~emubroker.auth.tls`;
* :mod:`~emubroker.auth.service`: which provider serves a CONNECT or a REST call;
* :mod:`~emubroker.auth.authorization`: ``PulsarAuthorizationProvider``'s rules;
* :mod:`~emubroker.auth.tls_context`: the server ``SSLContext``;
  :mod:`~emubroker.auth.certs`: throwaway certificates for ``standalone --tls``.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

import msgspec

from emubroker.auth.authorization import (
    AuthorizationDenied,
    AuthorizationService,
    NamespaceOperation,
    TenantNotFound,
    TopicOperation,
)
from emubroker.auth.errors import AuthenticationFailed, SecurityConfigError
from emubroker.auth.provider import Authenticated, AuthenticationProvider, Credentials
from emubroker.auth.service import AUTH_METHOD_HEADER, AuthenticationService
from emubroker.auth.tls_context import server_ssl_context

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from emubroker.config.security import SecurityConfig
    from emubroker.naming import NamespaceName
    from emubroker.policies import Policies, TenantInfo

__all__ = [
    "AUTH_METHOD_HEADER",
    "Authenticated",
    "AuthenticationFailed",
    "AuthenticationProvider",
    "AuthenticationService",
    "AuthorizationDenied",
    "AuthorizationService",
    "Credentials",
    "NamespaceOperation",
    "Security",
    "SecurityConfigError",
    "TenantNotFound",
    "TopicOperation",
]


class Security(msgspec.Struct, frozen=True):
    """What the broker's layers ask about security.

    Attributes:
        authentication: None when ``authenticationEnabled`` is false.
        authorization: None when ``authorizationEnabled`` is false (it needs authentication).
        ssl_context: The TLS listeners' context; None without a TLS port.
        refresh_check_seconds: ``authenticationRefreshCheckSeconds``.
        authenticate_metrics: ``authenticateMetricsEndpoint``.
    """

    authentication: AuthenticationService | None = None
    authorization: AuthorizationService | None = None
    ssl_context: ssl.SSLContext | None = None
    refresh_check_seconds: float = 60.0
    authenticate_metrics: bool = False

    @classmethod
    def from_config(
        cls,
        config: SecurityConfig,
        *,
        namespace_policies: Callable[[NamespaceName], Policies | None],
        tenant_info: Callable[[str], Awaitable[TenantInfo | None]],
    ) -> Security:
        """Build every part ``config`` asks for.

        Raises:
            SecurityConfigError: A setting cannot be used (the message names it).
        """
        if config.authorizationEnabled and not config.authenticationEnabled:
            # PulsarService.start refuses this combination with the same words.
            raise SecurityConfigError(
                "Invalid broker configuration. Authentication must be enabled with "
                "authenticationEnabled=true when authorization is enabled with "
                "authorizationEnabled=true."
            )
        authentication = AuthenticationService.from_config(config)
        authorization = AuthorizationService.from_config(
            config, namespace_policies=namespace_policies, tenant_info=tenant_info
        )
        return cls(
            authentication=authentication,
            authorization=authorization,
            ssl_context=server_ssl_context(config) if config.tls_enabled else None,
            refresh_check_seconds=float(config.authenticationRefreshCheckSeconds),
            authenticate_metrics=config.authenticateMetricsEndpoint,
        )
