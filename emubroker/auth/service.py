"""The broker's authentication: which provider serves a method, and the anonymous role.

Built once from the configuration (:meth:`AuthenticationService.from_config`), ``None`` when
``authenticationEnabled`` is false, so an unauthenticated broker pays nothing. The rules are
Pulsar's ``AuthenticationService`` and ``ServerCnx.handleConnect``:

* providers are named by Pulsar's class names in ``authenticationProviders``; the class decides
  the method name (``token``, ``basic``, ``tls``); an unknown class stops start-up;
* binary protocol: CONNECT's ``auth_method_name`` (or the legacy ``auth_method`` enum, or
  ``none``) picks the provider; a method no provider serves gets ``anonymousUserRole`` when one
  is configured, and is refused otherwise;
* REST: the ``X-Pulsar-Auth-Method-Name`` header picks the provider; without it every provider
  is tried in configuration order, then ``anonymousUserRole`` (so, as in Pulsar, wrong REST
  credentials fall back to the anonymous role when there is one).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from emubroker.auth.basic import BasicProvider
from emubroker.auth.errors import AuthenticationFailed, SecurityConfigError
from emubroker.auth.provider import Authenticated, AuthenticationProvider, Credentials

if TYPE_CHECKING:
    from collections.abc import Mapping

    from emubroker.config.security import SecurityConfig

__all__ = ["AUTH_METHOD_HEADER", "PROVIDER_CLASSES", "AuthenticationService"]

log = logging.getLogger(__name__)

AUTH_METHOD_HEADER: Final = "X-Pulsar-Auth-Method-Name"


# The token and TLS providers are imported when configured: they bring in PyJWT and
# cryptography (~30 ms and ~15 MiB for a broker that authenticates nothing; docs/performance.md).
def _token_provider(config: SecurityConfig) -> AuthenticationProvider:
    from emubroker.auth.token import TokenProvider

    return TokenProvider(config)


def _tls_provider(_config: SecurityConfig) -> AuthenticationProvider:
    from emubroker.auth.tls import TlsProvider

    return TlsProvider()


_PACKAGE: Final = "org.apache.pulsar.broker.authentication."
PROVIDER_CLASSES: Final[Mapping[str, Callable[[SecurityConfig], AuthenticationProvider]]] = {
    _PACKAGE + "AuthenticationProviderToken": _token_provider,
    _PACKAGE + "AuthenticationProviderBasic": BasicProvider,
    _PACKAGE + "AuthenticationProviderTls": _tls_provider,
}
"""``authenticationProviders`` class names -> how to build the provider."""

# CommandConnect.auth_method (deprecated enum): AuthMethodYcaV1 = 1, AuthMethodAthens = 2.
_LEGACY_METHODS: Final = {0: "none", 1: "ycav1", 2: "athens"}


class AuthenticationService:
    """Authentication of connections and REST calls.

    Args:
        providers: By method name, in configuration order.
        anonymous_role: The role of clients without usable credentials; empty: refused.
    """

    def __init__(self, providers: Mapping[str, AuthenticationProvider], anonymous_role: str):
        self._providers = dict(providers)
        self.anonymous_role = anonymous_role

    @classmethod
    def from_config(cls, config: SecurityConfig) -> AuthenticationService | None:
        """The service ``config`` asks for; None when authentication is disabled.

        Raises:
            SecurityConfigError: An unknown provider class, or a provider's settings are
                unusable (no key, unreadable users file...).
        """
        if not config.authenticationEnabled:
            return None
        providers: dict[str, AuthenticationProvider] = {}
        for class_name in config.csv(config.authenticationProviders):
            factory = PROVIDER_CLASSES.get(class_name)
            if factory is None:
                raise SecurityConfigError(
                    f"authenticationProviders: {class_name!r} is not an emulated provider "
                    f"(one of {', '.join(sorted(PROVIDER_CLASSES))})"
                )
            provider = factory(config)
            providers.setdefault(provider.method_name, provider)
            log.info(
                "authentication provider %s loaded (method %s)", class_name, provider.method_name
            )
        if not providers:
            log.warning("authentication is enabled but no authentication providers are loaded")
        return cls(providers, config.anonymousUserRole)

    def provider(self, method: str) -> AuthenticationProvider | None:
        """The provider of a method name, if any."""
        return self._providers.get(method)

    def authenticate_connect(
        self,
        method_name: str | None,
        legacy_method: int | None,
        credentials: Credentials,
        *,
        wall_time: float,
    ) -> Authenticated:
        """Who a CONNECT is from (``ServerCnx.handleConnect``).

        Raises:
            AuthenticationFailed: The provider refused, or no provider and no anonymous role.
        """
        if method_name:
            method = method_name
        elif legacy_method is not None:
            method = _LEGACY_METHODS.get(legacy_method, "none")
        else:
            method = "none"
        provider = self._providers.get(method)
        if provider is None:
            if not self.anonymous_role:
                raise AuthenticationFailed(
                    f"No anonymous role, and no authentication provider for method {method!r}"
                )
            return Authenticated(self.anonymous_role, method)
        return provider.authenticate(credentials, wall_time=wall_time)

    def authenticate_http(
        self, method_header: str | None, credentials: Credentials, *, wall_time: float
    ) -> Authenticated:
        """Who a REST call is from (``AuthenticationService.authenticateHttpRequest``).

        Raises:
            AuthenticationFailed: The named method is unknown or refused, or nothing matched and
                there is no anonymous role.
        """
        if method_header is not None:
            provider = self._providers.get(method_header)
            if provider is None:
                raise AuthenticationFailed(f"Unsupported authentication method: [{method_header}].")
            return provider.authenticate(credentials, wall_time=wall_time)
        reasons = []
        for provider in self._providers.values():
            try:
                return provider.authenticate(credentials, wall_time=wall_time)
            except AuthenticationFailed as exc:
                reasons.append(f"{provider.method_name}: {exc}")
        if self.anonymous_role:
            return Authenticated(self.anonymous_role, "none")
        raise AuthenticationFailed("Authentication required (" + "; ".join(reasons) + ")")
