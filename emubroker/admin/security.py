"""REST authentication and authorization: one aiohttp middleware in front of every route.

Authentication is Pulsar's ``AuthenticationFilter``: with ``authenticationEnabled`` every call
but ``/metrics`` (unless ``authenticateMetricsEndpoint``) must authenticate, through the
``Authorization`` header (``Bearer <token>``, ``Basic <base64>``) or the HTTPS client
certificate; a refusal is 401 "Authentication required" and the route never runs. The role is
kept on the request (:func:`role_of`).

Authorization applies the route's :func:`~emubroker.admin.access.rule_for` check with Pulsar's
statuses and wording; a tenant that does not exist is a 404 "Tenant does not exist" for the
tenant-admin check, as ``validateAdminAccessForTenant`` answers.
"""

from __future__ import annotations

import logging
import ssl
from typing import TYPE_CHECKING, Final

from aiohttp import web

from emubroker.admin.access import Check, Rule, rule_for
from emubroker.admin.context import CONTEXT
from emubroker.admin.errors import NOT_FOUND, RestError, error_response
from emubroker.admin.http import topic_of
from emubroker.auth import (
    AUTH_METHOD_HEADER,
    AuthenticationFailed,
    AuthorizationDenied,
    Credentials,
    TenantNotFound,
)
from emubroker.naming import InvalidNameError, NamespaceName, TopicDomain, TopicName

if TYPE_CHECKING:
    from aiohttp.typedefs import Handler

    from emubroker.auth import AuthorizationService

__all__ = ["ROLE", "rest_security", "role_of"]

log = logging.getLogger(__name__)

UNAUTHORIZED: Final = 401
FORBIDDEN: Final = 403

ROLE: Final = web.RequestKey("emubroker.admin.role", str)
"""The authenticated role of a request (absent without authentication)."""


def role_of(request: web.Request) -> str | None:
    """The role the request authenticated as, None without authentication."""
    return request.get(ROLE)


def _peer_certificate(request: web.Request) -> bytes | None:
    transport = request.transport
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    if isinstance(ssl_object, ssl.SSLObject | ssl.SSLSocket):
        return ssl_object.getpeercert(binary_form=True)
    return None


@web.middleware
async def rest_security(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Authenticate the call, check the route's rule, then run it (module docstring)."""
    ctx = request.app[CONTEXT]
    security = ctx.security
    if security is None or security.authentication is None:
        return await handler(request)
    resource = request.match_info.route.resource
    canonical = resource.canonical if resource is not None else request.path
    if canonical.startswith("/metrics") and not security.authenticate_metrics:
        return await handler(request)
    wall_time = ctx.clock.wall_ns() / 1e9 if ctx.clock is not None else 0.0
    try:
        result = security.authentication.authenticate_http(
            request.headers.get(AUTH_METHOD_HEADER),
            Credentials(
                http_authorization=request.headers.get("Authorization"),
                peer_certificate=_peer_certificate(request),
            ),
            wall_time=wall_time,
        )
    except AuthenticationFailed as exc:
        log.warning("REST %s %s from %s: %s", request.method, request.path, request.remote, exc)
        refused = error_response(UNAUTHORIZED, "Authentication required")
        if canonical.startswith("/dashboard"):
            # A browser opening the dashboard asks its user for a name and password (basic
            # authentication) only when challenged; other clients send their header unasked.
            refused.headers["WWW-Authenticate"] = 'Basic realm="emubroker dashboard"'
        return refused
    request[ROLE] = result.role
    authorization = security.authorization
    if authorization is not None and resource is not None:
        rule = rule_for(request.method, canonical)
        try:
            await _authorize(request, authorization, rule, result.role)
        except TenantNotFound as exc:
            raise RestError(NOT_FOUND, str(exc)) from None
    return await handler(request)


async def _authorize(
    request: web.Request, authz: AuthorizationService, rule: Rule, role: str
) -> None:
    info = request.match_info
    check = rule.check
    if check is Check.ANYONE:
        return
    if check is Check.SUPER_USER:
        if not authz.is_super_user(role):
            raise RestError(UNAUTHORIZED, "This operation requires super-user access")
        return
    tenant = info.get("tenant", "")
    if check is Check.TENANT_OPERATION:
        # TenantsBase: super-user or tenant admin; every refusal (a missing tenant too) is
        # one 401, as validateBothSuperUserAndTenantOperation swallows the 404.
        assert rule.tenant_operation is not None
        try:
            # No tenant (the tenant list): only the super-user half can pass.
            allowed = authz.is_super_user(role) or (
                bool(tenant) and await authz.is_tenant_admin(tenant, role)
            )
        except TenantNotFound:
            allowed = False
        if not allowed:
            op = rule.tenant_operation.name
            raise RestError(
                UNAUTHORIZED,
                "Unauthorized to validateBothTenantOperationAndSuperUser for originalPrincipal"
                f" [null] and clientAppId [{role}] about operation [{op}] ",
            )
        return
    if check is Check.TENANT_ADMIN:
        if not await authz.is_tenant_admin(tenant, role):
            raise RestError(
                UNAUTHORIZED, "Don't have permission to administrate resources on this tenant"
            )
        return
    namespace = _namespace(info)
    if check in (Check.NAMESPACE_POLICY, Check.TOPIC_POLICY):
        if not await authz.is_tenant_admin(tenant, role):
            kind = "Namespace" if check is Check.NAMESPACE_POLICY else "Topic"
            raise RestError(
                FORBIDDEN,
                f"Unauthorized to validate{kind}PolicyOperation for operation on {namespace}",
            )
        return
    if check is Check.NAMESPACE_OPERATION:
        assert rule.namespace_operation is not None
        if namespace is None or not await authz.allow_namespace_operation(
            namespace, role, rule.namespace_operation
        ):
            op = rule.namespace_operation.name
            raise RestError(
                FORBIDDEN,
                f"Unauthorized to validateNamespaceOperation for operation [{op}] "
                f"on namespace [{namespace}]",
            )
        return
    assert rule.topic_operation is not None
    if "topic" in info:
        # Pulsar validates the name before the operation (``validateTopicName`` first in every
        # topic method): a bad name is 412 "Topic name is not valid" to anyone authenticated.
        topic_of(request, domain=None if "domain" in info else TopicDomain.PERSISTENT)
    topic = _topic(info)
    try:
        allowed = topic is not None and await authz.allow_topic_operation(
            topic, role, rule.topic_operation, subscription=info.get("subscription")
        )
    except AuthorizationDenied as exc:
        raise RestError(UNAUTHORIZED, str(exc)) from None
    if not allowed:
        raise RestError(
            UNAUTHORIZED,
            f"Unauthorized to validateTopicOperation for operation "
            f"[{rule.topic_operation.name}] on topic [{topic}]",
        )


def _namespace(info: web.UrlMappingMatchInfo) -> NamespaceName | None:
    try:
        return NamespaceName(info["tenant"], info["namespace"])
    except (KeyError, InvalidNameError):
        return None


def _topic(info: web.UrlMappingMatchInfo) -> TopicName | None:
    namespace = _namespace(info)
    try:
        domain = TopicDomain(info.get("domain", "persistent"))
        return TopicName(domain, namespace, info["topic"]) if namespace else None
    except (KeyError, ValueError, InvalidNameError):
        return None
