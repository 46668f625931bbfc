"""``/admin/v2/persistent/{tenant}/{namespace}/{topic}/properties``: a topic's own properties.

Pulsar's ``PersistentTopicsBase.internal{Get,Update,Remove}PropertiesAsync``:

* A non-partitioned topic (or one partition) keeps them in its managed ledger
  (``ManagedLedger.properties``, stored with its ledger list): its owner answers
  (``topic_owner``), and they follow the topic across unloads, restarts and new owners.
* A partitioned topic keeps them in its metadata (``topics.partitioned`` rule 5), which any
  broker answers; they are never copied to its partitions, whose own are separate.
* ``GET`` answers the map: ``{}`` for a non-partitioned topic created without any, an empty 200
  for a partitioned one (Pulsar's null map). ``PUT`` adds a map, replacing same keys; an empty or
  absent map changes nothing and answers 204 before any check, as Pulsar. ``DELETE ?key=K``
  removes one key; a key that is not set, or no ``key``, changes nothing.
* Values are JSON strings, or numbers and booleans, which Jackson turns into their text; an
  object or an array is a 400. A null value removes its key from a partitioned topic's
  properties (at creation too: Pulsar's stored JSON leaves null entries out); a non-partitioned
  topic's are a 400 (Pulsar: a 500 at creation, no answer to a ``PUT``). A missing topic is 404
  ``Topic <name> not found`` (Pulsar's ``PUT`` and ``DELETE`` leave that request unanswered;
  docs/broker-behaviour.md).
* The non-persistent domain is 406 ``Need to provide a persistent topic name`` for all three
  (Pulsar's ``validatePersistentTopicName``); properties given when a non-persistent topic is
  created are accepted and not kept, as in Pulsar, while a non-persistent partitioned topic's
  are kept in its metadata (``GET .../partitions`` shows them).

The bodies that carry properties at creation (``routes_topics``) are read here too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec
from aiohttp import web

from emubroker.admin.errors import BAD_REQUEST, NOT_ACCEPTABLE, NOT_FOUND, RestError
from emubroker.admin.http import context, json_response, no_content, read_json, topic_of
from emubroker.naming import TopicDomain
from protocol.errors import TopicNotFoundError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from emubroker.admin.context import AdminContext
    from emubroker.naming import TopicName
    from emubroker.topics.managed_ledger import ManagedLedger

__all__ = ["add_routes", "coerce_properties", "read_properties", "require_strings"]

_PATH: Final = (
    "/admin/v2/{domain:persistent|non-persistent}/{tenant}/{namespace}/{topic}/properties"
)

_JSON_KINDS: Final = {b"{": "an object", b"[": "an array"}


def _refused(what: str, key: str, kind: str) -> RestError:
    return RestError(
        BAD_REQUEST, f"Invalid {what}: the value of {key!r} must be a string, not {kind}"
    )


def coerce_properties(raw: Mapping[str, msgspec.Raw], *, what: str) -> dict[str, str | None]:
    """Properties from a JSON object's values as Jackson reads a ``Map<String, String>``.

    Strings are kept; numbers and booleans become their JSON text (``1.50`` stays ``"1.50"``);
    a null stays None (what it means is the caller's: :func:`require_strings`).

    Raises:
        RestError: 400 naming the key whose value is an object or an array.
    """
    properties: dict[str, str | None] = {}
    for key, value in raw.items():
        text = bytes(value)
        kind = _JSON_KINDS.get(text[:1])
        if kind is not None:
            raise _refused(what, key, kind)
        if text == b"null":
            properties[key] = None
        elif text[:1] == b'"':
            properties[key] = msgspec.json.decode(text, type=str)
        else:
            properties[key] = text.decode()
    return properties


def require_strings(properties: Mapping[str, str | None], *, what: str) -> dict[str, str]:
    """The properties of a non-partitioned topic, which keeps strings only.

    Raises:
        RestError: 400 naming the key whose value is null.
    """
    for key, value in properties.items():
        if value is None:
            raise _refused(what, key, "null")
    return {key: value for key, value in properties.items() if value is not None}


async def read_properties(request: web.Request, *, what: str) -> dict[str, str | None]:
    """A request body holding a properties map; an empty body or ``null`` is no properties.

    Raises:
        RestError: 400 for a body that is not a JSON object, or a value :func:`coerce_properties`
            refuses.
    """
    raw = await read_json(request, dict[str, msgspec.Raw], what=what, default={})
    return coerce_properties(raw, what=what)


def _persistent_topic(request: web.Request) -> TopicName:
    name = topic_of(request)
    if name.domain is not TopicDomain.PERSISTENT:
        raise RestError(NOT_ACCEPTABLE, "Need to provide a persistent topic name")
    return name


def _partitioned(ctx: AdminContext, name: TopicName) -> bool:
    return ctx.namespaces.exists(name.namespace) and ctx.topics.partitions_of(name) > 0


async def _ledger(ctx: AdminContext, name: TopicName) -> ManagedLedger:
    # A topic that exists here (a partition of a partitioned topic exists from the topic's
    # creation on) is loaded, or made; one stored by another broker is opened from the store.
    missing = RestError(NOT_FOUND, f"Topic {name} not found")
    if not ctx.namespaces.exists(name.namespace):
        raise missing
    known = ctx.topics.topic_exists(name)
    try:
        topic = await ctx.topics.get_topic(name, create=known, explicit=known)
    except TopicNotFoundError:
        raise missing from None
    persistent = topic.as_persistent()
    if persistent is None:  # a persistent name always loads a persistent topic
        raise missing
    return persistent.ledger


async def get_properties(request: web.Request) -> web.Response:
    """``GET TOPIC/properties``: the topic's properties."""
    name = _persistent_topic(request)
    ctx = context(request)
    if _partitioned(ctx, name):
        properties = ctx.topics.partitioned_properties(name)
        return web.Response(status=200) if properties is None else json_response(properties)
    return json_response((await _ledger(ctx, name)).properties)


async def update_properties(request: web.Request) -> web.Response:
    """``PUT TOPIC/properties``: add a map to the topic's properties."""
    name = _persistent_topic(request)
    what = "topic properties"
    properties = await read_properties(request, what=what)
    if not properties:
        return no_content()  # as Pulsar: nothing to change, nothing checked
    ctx = context(request)
    if _partitioned(ctx, name):
        try:
            await ctx.topics.update_partitioned_properties(name, properties)
        except TopicNotFoundError:  # deleted meanwhile
            raise RestError(NOT_FOUND, f"Topic {name} not found") from None
    else:
        strings = require_strings(properties, what=what)
        await (await _ledger(ctx, name)).set_properties(strings)
    return no_content()


async def remove_property(request: web.Request) -> web.Response:
    """``DELETE TOPIC/properties?key=K``: remove one key of the topic's properties."""
    name = _persistent_topic(request)
    key = request.query.get("key")
    ctx = context(request)
    if _partitioned(ctx, name):
        if key is not None:
            try:
                await ctx.topics.remove_partitioned_property(name, key)
            except TopicNotFoundError:  # deleted meanwhile
                raise RestError(NOT_FOUND, f"Topic {name} not found") from None
        return no_content()
    ledger = await _ledger(ctx, name)
    if key is not None:
        await ledger.delete_property(key)
    return no_content()


def add_routes(app: web.Application) -> None:
    """Register the topic properties routes of both domains (the non-persistent one is a 406)."""
    app.router.add_get(_PATH, get_properties)
    app.router.add_put(_PATH, update_properties)
    app.router.add_delete(_PATH, remove_property)
