"""HTTP topic lookup, ``/lookup/v2/topic/...`` (spec/wire-protocol.md §13).

A client whose service URL is ``http://host:admin-port`` looks topics up here and then connects
to the returned ``brokerUrl`` with the binary protocol. The answer is Pulsar's ``LookupData``;
the C++ client requires both ``brokerUrl`` and ``brokerUrlTls`` (``""`` when there is no TLS
port; a client whose service URL is ``https://`` connects to ``brokerUrlTls``), ``httpUrl`` is
optional. The answer comes from the same lookup as binary LOOKUPs
(``loadbalance.ownership.lookup``), so both paths agree on which broker serves a topic; where the
binary lookup answers Redirect, this one answers **307** to the same path on the broker to ask, with
``?authoritative=`` (and ``listenerName``) as Pulsar's ``TopicLookupBase`` builds it; no broker
available is 503. As in Pulsar, a persistent topic that neither exists nor may be auto-created
(the namespace's ``autoTopicCreationOverride``, else ``allowAutoTopicCreation``) is 404 "Topic not
found <topic>"; a non-persistent one is always looked up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
from aiohttp import web

from emubroker.admin.errors import NOT_FOUND, UNAVAILABLE, RestError
from emubroker.admin.http import context, json_response, query_bool, topic_of
from emubroker.metadata.paths import managed_ledger_path
from protocol.errors import ServiceNotReadyError

if TYPE_CHECKING:
    from emubroker.admin.context import AdminContext
    from emubroker.naming import TopicName

__all__ = ["LookupData", "add_routes"]


class LookupData(msgspec.Struct, rename="camel"):
    """Pulsar's ``LookupData`` JSON (``brokerUrlSsl`` is its legacy alias of ``brokerUrlTls``).

    A TLS URL the broker lacks is null, so omitted, as Pulsar writes it; the alias is then "".
    """

    broker_url: str
    broker_url_tls: str | None
    http_url: str
    http_url_tls: str | None
    native_url: str
    broker_url_ssl: str


async def lookup(request: web.Request) -> web.Response:
    """``GET /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}``."""
    name = topic_of(request)
    ctx = context(request)
    if not ctx.namespaces.exists(name.namespace):
        raise RestError(NOT_FOUND, f"Topic not found {name}")
    if not await _may_look_up(ctx, name):
        raise RestError(NOT_FOUND, f"Topic not found {name}")
    listener = request.query.get("listenerName", "")
    listeners = ctx.dynamic.config.listeners()
    if listener and listener not in listeners:
        raise RestError(UNAVAILABLE, f"the broker do not have {listener} listener")
    if ctx.lookup is None:
        owner = (await ctx.ownership.try_acquire(ctx.ownership.bundle_of(name))).broker
    else:
        try:
            answer = await ctx.lookup.lookup_topic(
                name, authoritative=query_bool(request, "authoritative")
            )
        except ServiceNotReadyError as exc:
            raise RestError(UNAVAILABLE, exc.message) from None
        owner = answer.broker
        if answer.redirect:
            base = owner.http_url_tls if request.secure and owner.http_url_tls else owner.http_url
            query = f"authoritative={str(answer.authoritative).lower()}"
            if listener:
                query += f"&listenerName={listener}"
            raise web.HTTPTemporaryRedirect(f"{base}{request.path}?{query}")
    url, http_url = owner.service_url, owner.http_url
    if owner == ctx.ownership.me:
        http_url = ctx.web_service_url
        if listener:
            url = listeners[listener]
    return json_response(
        LookupData(
            broker_url=url,
            broker_url_tls=owner.service_url_tls or None,
            http_url=http_url,
            http_url_tls=owner.http_url_tls or None,
            native_url=url,
            broker_url_ssl=owner.service_url_tls,
        )
    )


async def _may_look_up(ctx: AdminContext, name: TopicName) -> bool:
    """``TopicLookupBase.internalLookupTopicAsync``'s check, past the namespace's.

    A non-persistent topic always (Pulsar cannot tell whether one exists); a persistent one that
    exists (its managed ledger in the store if another broker made it) or may be auto-created
    (the namespace's override, else the broker's keys).
    """
    if not name.is_persistent or ctx.topics.topic_exists(name):
        return True
    return ctx.topics.may_auto_create(name) or await ctx.metadata.exists(managed_ledger_path(name))


async def bundle(request: web.Request) -> web.Response:
    """``GET /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}/bundle``: its bundle range."""
    name = topic_of(request)
    ctx = context(request)
    if not ctx.namespaces.exists(name.namespace):
        raise RestError(NOT_FOUND, "Namespace does not exist")
    return web.Response(text=ctx.ownership.bundle_of(name).bundle_range.name)


def add_routes(app: web.Application) -> None:
    """Register the lookup routes for both domains."""
    base = "/lookup/v2/topic/{domain:persistent|non-persistent}/{tenant}/{namespace}/{topic}"
    app.router.add_get(base, lookup)
    app.router.add_get(f"{base}/bundle", bundle)
