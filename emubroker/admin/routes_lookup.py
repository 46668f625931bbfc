"""HTTP topic lookup, ``/lookup/v2/topic/...`` (spec/wire-protocol.md §13).

A client whose service URL is ``http://host:admin-port`` looks topics up here and then connects
to the returned ``brokerUrl`` with the binary protocol. The answer is Pulsar's ``LookupData``;
the C++ client requires both ``brokerUrl`` and ``brokerUrlTls`` (``""`` when there is no TLS
port; a client whose service URL is ``https://`` connects to ``brokerUrlTls``), ``httpUrl`` is
optional. The owner comes from the same ownership table as binary LOOKUPs, so both
paths agree on which broker serves a topic. As in Pulsar's ``TopicLookupBase``, a topic that
neither exists nor may be auto-created is 404 "Topic not found <topic>".
"""

from __future__ import annotations

import msgspec
from aiohttp import web

from emubroker.admin.errors import NOT_FOUND, UNAVAILABLE, RestError
from emubroker.admin.http import context, json_response, topic_of

__all__ = ["LookupData", "add_routes"]


class LookupData(msgspec.Struct, rename="camel"):
    """Pulsar's ``LookupData`` JSON (``brokerUrlSsl`` is its legacy alias of ``brokerUrlTls``)."""

    broker_url: str
    broker_url_tls: str
    http_url: str
    http_url_tls: str
    native_url: str
    broker_url_ssl: str


async def lookup(request: web.Request) -> web.Response:
    """``GET /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}``."""
    name = topic_of(request)
    ctx = context(request)
    if not ctx.namespaces.exists(name.namespace):
        raise RestError(NOT_FOUND, f"Topic not found {name}")
    if not ctx.topics.topic_exists(name) and not ctx.dynamic.config.allowAutoTopicCreation:
        raise RestError(NOT_FOUND, f"Topic not found {name}")
    listener = request.query.get("listenerName", "")
    listeners = ctx.dynamic.config.listeners()
    if listener and listener not in listeners:
        raise RestError(UNAVAILABLE, f"the broker do not have {listener} listener")
    owner = await ctx.ownership.owner_of(name)
    url, http_url = owner.service_url, owner.http_url
    if owner == ctx.ownership.me:
        http_url = ctx.web_service_url
        if listener:
            url = listeners[listener]
    return json_response(
        LookupData(
            broker_url=url,
            broker_url_tls=owner.service_url_tls,
            http_url=http_url,
            http_url_tls=owner.http_url_tls,
            native_url=url,
            broker_url_ssl=owner.service_url_tls,
        )
    )


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
