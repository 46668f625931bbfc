"""One connection's identity: CONNECT authentication, credential refresh, and permission checks.

The seam between the command handlers and ``emubroker.auth`` (Pulsar's ``ServerCnx``):

* **CONNECT** (``handleConnect``): without authentication the broker answers CONNECTED at once,
  as before. With it, the provider named by ``auth_method_name`` checks ``auth_data`` (and the
  TLS client certificate); a refusal is ERROR ``AuthenticationError`` "Failed to authenticate"
  (request id -1) and the connection is closed, with nothing else served.
* **Refresh** (``refreshAuthenticationCredentials``): credentials that expire (a token's
  ``exp``) are checked every ``authenticationRefreshCheckSeconds``; once expired, a client that
  announced ``supports_auth_refresh`` gets AUTH_CHALLENGE (``PulsarAuthRefresh``) and must
  answer AUTH_RESPONSE with valid credentials for the same role before the next check, or the
  connection is closed. A client without refresh support is disconnected.
* **Permissions**: :meth:`ConnectionAccess.require_topic` and :meth:`require_namespace` raise
  ``AuthorizationError`` with Pulsar's message ("Client is not authorized to Produce"...); the
  command groups turn it into each command's failure form.

A broker without authentication has no ``ConnectionAccess`` at all: its handlers skip every
check with one ``is None`` test, so the unauthenticated broker pays nothing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from emubroker.auth import (
    AuthenticationFailed,
    AuthorizationDenied,
    Credentials,
    NamespaceOperation,
    Security,
    TenantNotFound,
    TopicOperation,
)
from protocol import commands as c
from protocol.connection import negotiated_version
from protocol.errors import AuthorizationError, BrokerError, ServerError

if TYPE_CHECKING:
    from emubroker.auth import Authenticated
    from emubroker.handlers.ports import SessionPort, StartSoon
    from emubroker.naming import NamespaceName, TopicName
    from protocol.clock import Clock

__all__ = ["BROKER_FEATURES", "REFRESH_AUTH_DATA", "ConnectionAccess"]

log = logging.getLogger(__name__)

REFRESH_AUTH_DATA: Final = b"PulsarAuthRefresh"
"""``AuthData.REFRESH_AUTH_DATA``: the challenge asking a client for fresh credentials."""

BROKER_FEATURES: Final = c.FeatureFlags(
    supports_get_partitioned_metadata_without_auto_creation=True
)
"""CONNECTED's feature flags. PIP-344: the Java client (3.3+) refuses to ask for partition counts
without auto-creation, which its partition auto-update and pattern consumers do, from a broker
that does not announce it (``FeatureNotSupportedException``). No ``supports_topic_watchers``:
there is no CommandWatchTopicList here, so pattern consumers poll (spec §5.1)."""

_NO_REQUEST: Final = (1 << 64) - 1  # request_id -1 as the wire's uint64: "not a request"


class ConnectionAccess:
    """Who one connection is, and what it may do.

    Args:
        security: The broker's security services.
        session: The connection (replies, close, TLS client certificate).
        clock: Drives the refresh checks; its wall time checks expiry.
        start: Starts the refresh task in the connection's task group.
        server_version: ``CONNECTED.server_version``.
        max_message_size: ``CONNECTED.max_message_size``.
        peer_certificate: The verified TLS client certificate (DER), if any.
    """

    def __init__(
        self,
        security: Security,
        session: SessionPort,
        clock: Clock,
        start: StartSoon,
        *,
        server_version: str,
        max_message_size: int,
        peer_certificate: bytes | None = None,
    ) -> None:
        self._authentication = security.authentication
        self._authorization = security.authorization
        self._refresh_seconds = security.refresh_check_seconds
        self._session = session
        self._clock = clock
        self._start = start
        self._server_version = server_version
        self._max_message_size = max_message_size
        self._peer_certificate = peer_certificate
        self.role: str | None = None
        self._current: Authenticated | None = None
        self._supports_refresh = False
        self._challenge_pending = False
        self._protocol_version = 0

    # ---- CONNECT -----------------------------------------------------------------------------

    def on_connect(self, cmd: c.Connect) -> None:
        """Authenticate the CONNECT, then answer CONNECTED, or ERROR and close."""
        service = self._authentication
        self._protocol_version = negotiated_version(cmd.protocol_version)
        if service is not None:
            credentials = Credentials(
                command_data=cmd.auth_data, peer_certificate=self._peer_certificate
            )
            try:
                result = service.authenticate_connect(
                    cmd.auth_method_name,
                    cmd.auth_method,
                    credentials,
                    wall_time=self._clock.wall_ns() / 1e9,
                )
            except AuthenticationFailed as exc:
                self._fail(f"authentication failed on connect: {exc}")
                return
            self._current, self.role = result, result.role
            flags = cmd.feature_flags
            self._supports_refresh = flags is not None and flags.supports_auth_refresh
            log.info(
                "connection %s authenticated: role=%s method=%s",
                self._session.peer,
                result.role,
                result.method,
            )
            if result.expires_at is not None:
                self._start(self._refresh_loop)
        self._session.send_command(
            c.Connected(
                server_version=self._server_version,
                protocol_version=self._protocol_version,
                max_message_size=self._max_message_size,
                feature_flags=BROKER_FEATURES,
            )
        )

    def _fail(self, reason: str) -> None:
        log.warning("connection %s: %s", self._session.peer, reason)
        # ServerCnx.authenticationFailed: one generic message, whatever went wrong.
        self._session.send_command(
            c.Error(
                request_id=_NO_REQUEST,
                error=ServerError.AuthenticationError,
                message="Failed to authenticate",
            )
        )
        self._session.close(reason)

    # ---- refresh -----------------------------------------------------------------------------

    async def _refresh_loop(self) -> None:
        while True:
            await self._clock.sleep(self._refresh_seconds)
            current = self._current
            if current is None or current.expires_at is None:
                return
            if self._clock.wall_ns() / 1e9 <= current.expires_at:
                continue
            if not self._supports_refresh:
                self._session.close("credentials expired and the client cannot refresh them")
                return
            if self._challenge_pending:
                self._session.close("no fresh credentials after an AUTH_CHALLENGE")
                return
            self._challenge_pending = True
            self._session.send_command(
                c.AuthChallenge(
                    server_version=self._server_version,
                    challenge=c.AuthData(
                        auth_method_name=current.method, auth_data=REFRESH_AUTH_DATA
                    ),
                    protocol_version=self._protocol_version,
                )
            )

    def on_auth_response(self, cmd: c.AuthResponse) -> None:
        """AUTH_RESPONSE: fresh credentials for the same role, or ERROR and close."""
        service, current = self._authentication, self._current
        self._challenge_pending = False
        if service is None or current is None:
            self._session.close("AUTH_RESPONSE without authentication")
            return
        response = cmd.response or c.AuthData()
        provider = service.provider(response.auth_method_name or current.method)
        try:
            if provider is None:
                raise AuthenticationFailed(f"no provider for {response.auth_method_name!r}")
            result = provider.authenticate(
                Credentials(
                    command_data=response.auth_data or b"",
                    peer_certificate=self._peer_certificate,
                ),
                wall_time=self._clock.wall_ns() / 1e9,
            )
        except AuthenticationFailed as exc:
            self._fail(f"authentication refresh failed: {exc}")
            return
        if result.role != current.role:
            self._session.close(
                f"principal cannot change during a refresh: {current.role} -> {result.role}"
            )
            return
        self._current = result
        log.info("connection %s refreshed credentials of %s", self._session.peer, result.role)

    # ---- permissions -------------------------------------------------------------------------

    async def require_topic(
        self,
        topic: TopicName,
        operation: TopicOperation,
        what: str,
        *,
        subscription: str | None = None,
        missing_tenant: BrokerError | None = None,
    ) -> None:
        """Refuse ``operation`` on ``topic`` unless the role may do it.

        Args:
            topic: The topic.
            operation: What is asked.
            what: The end of Pulsar's message, "Client is not authorized to <what>".
            subscription: The subscription consumed through, if any.
            missing_tenant: What to raise when the topic's tenant does not exist (each command
                answers that in its own way in ``ServerCnx``); by default AuthorizationError
                "Tenant does not exist".

        Raises:
            AuthorizationError: Refused.
            BrokerError: ``missing_tenant``.
        """
        authorization = self._authorization
        if authorization is None:
            return
        try:
            allowed = await authorization.allow_topic_operation(
                topic, self.role, operation, subscription=subscription
            )
        except AuthorizationDenied as exc:
            raise AuthorizationError(str(exc)) from None
        except TenantNotFound as exc:
            raise missing_tenant or AuthorizationError(str(exc)) from None
        if not allowed:
            log.warning("%s: role %s may not %s on %s", self._session.peer, self.role, what, topic)
            raise AuthorizationError(f"Client is not authorized to {what}")

    async def require_namespace(
        self, namespace: NamespaceName, operation: NamespaceOperation, what: str
    ) -> None:
        """Like :meth:`require_topic`, for a namespace operation.

        Raises:
            AuthorizationError: Refused.
        """
        authorization = self._authorization
        if authorization is None:
            return
        try:
            allowed = await authorization.allow_namespace_operation(namespace, self.role, operation)
        except TenantNotFound as exc:
            raise AuthorizationError(str(exc)) from None
        if not allowed:
            raise AuthorizationError(f"Client is not authorized to {what}")

    @property
    def enforced(self) -> bool:
        """Whether permissions are checked (authorization is on)."""
        return self._authorization is not None
