"""``/admin/v2/{persistent,non-persistent}/{tenant}/{namespace}[/{topic}/...]``: topics.

Pulsar's ``PersistentTopics`` (``NonPersistentTopics`` extends it, so both domains share every
route here): list, create and delete non-partitioned topics; ``stats``, ``partitioned-stats`` and
``internalStats``; unload; compaction. A partitioned topic's metadata (``.../partitions``: create,
grow, read, delete) is ``routes_partitioned``'s; subscription routes live in
``routes_subscriptions``.

Statuses and reasons follow ``PersistentTopicsBase``/``AdminResource``: an existing topic is 409
"This topic already exists", an unknown topic 404 "Topic <name> not found" (but deleting a
non-persistent topic that is not loaded is 204: there is nothing to delete), deleting a topic with
producers or consumers without ``force`` 412 "Topic has active producers/subscriptions", and
calling the non-partitioned delete on a partitioned topic 409 naming the right call.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from emubroker.admin.errors import (
    CONFLICT,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    PRECONDITION_FAILED,
    RestError,
)
from emubroker.admin.http import (
    context,
    json_response,
    namespace_of,
    no_content,
    query_bool,
    topic_of,
)
from emubroker.admin.partition_fanout import (
    call_broker,
    partition_owner,
    topic_path,
)
from emubroker.admin.routes_topic_properties import (
    read_properties,
    require_strings,
)
from emubroker.admin.stats_merge import leave_out
from emubroker.naming import TopicDomain
from emubroker.topics.compaction import CompactionInProgressError
from protocol.commands import TopicsMode
from protocol.errors import NotAllowedError, TopicNotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable

    from emubroker.admin.context import AdminContext
    from emubroker.naming import NamespaceName, TopicName
    from emubroker.topics import TopicHandle

__all__ = ["BASE", "TOPIC", "add_routes", "load_topic", "targets"]

log = logging.getLogger(__name__)

BASE: Final = "/admin/v2/{domain:persistent|non-persistent}/{tenant}/{namespace}"
TOPIC: Final = BASE + "/{topic}"

_MODES: Final = {
    TopicDomain.PERSISTENT: TopicsMode.PERSISTENT,
    TopicDomain.NON_PERSISTENT: TopicsMode.NON_PERSISTENT,
}


def check_namespace(ctx: AdminContext, namespace: NamespaceName) -> None:
    """Raise 404 "Namespace does not exist" for an unknown namespace."""
    if not ctx.namespaces.exists(namespace):
        raise RestError(NOT_FOUND, "Namespace does not exist")


def check_topic_namespace(ctx: AdminContext, name: TopicName) -> None:
    """Raise 404 "Namespace not found" for a topic of an unknown namespace.

    Pulsar's topic operations check the namespace in validateGlobalNamespaceOwnership, whose 404
    says so; its namespace operations say "Namespace does not exist" (as Pulsar standalone answers,
    conformance/ scenario unknown_namespace).
    """
    if not ctx.namespaces.exists(name.namespace):
        raise RestError(NOT_FOUND, "Namespace not found")


async def load_topic(ctx: AdminContext, name: TopicName) -> TopicHandle:
    """An existing non-partitioned topic or partition, loaded.

    Raises:
        RestError: 404 for an unknown namespace or topic, or a partitioned topic's own name.
    """
    check_topic_namespace(ctx, name)
    topics = ctx.topics
    if topics.partitions_of(name) or not topics.topic_exists(name):
        raise RestError(NOT_FOUND, f"Topic {name} not found")
    try:
        # explicit: a partition of a partitioned topic exists from the topic's creation on.
        return await topics.get_topic(name, explicit=True)
    except TopicNotFoundError:
        raise RestError(NOT_FOUND, f"Topic {name} not found") from None


def targets(ctx: AdminContext, name: TopicName) -> list[TopicName]:
    """A partitioned topic's partitions, or the topic itself."""
    partitions = ctx.topics.partitions_of(name)
    return [name.partition(i) for i in range(partitions)] if partitions else [name]


async def list_topics(request: web.Request) -> web.Response:
    """``GET BASE``: the namespace's topics of this domain, partitions included."""
    ctx = context(request)
    namespace, domain = _namespace_and_domain(request)
    check_namespace(ctx, namespace)
    return json_response(ctx.topics.topics_of_namespace(namespace, _MODES[domain]))


async def list_partitioned(request: web.Request) -> web.Response:
    """``GET BASE/partitioned``: the namespace's partitioned topics of this domain."""
    ctx = context(request)
    namespace, domain = _namespace_and_domain(request)
    check_namespace(ctx, namespace)
    return json_response(ctx.topics.partitioned_topics(namespace, domain))


def _namespace_and_domain(request: web.Request) -> tuple[NamespaceName, TopicDomain]:
    return namespace_of(request), TopicDomain(request.match_info["domain"])


async def create_topic(request: web.Request) -> web.Response:
    """``PUT TOPIC``: create a non-partitioned topic, with the properties of an optional map.

    A persistent topic keeps them in its managed ledger; a non-persistent one has none to keep
    them in, and Pulsar too accepts them and drops them.
    """
    name = topic_of(request)
    what = "topic properties"
    properties = require_strings(await read_properties(request, what=what), what=what)
    ctx = context(request)
    check_topic_namespace(ctx, name)
    if ctx.topics.topic_exists(name):
        raise RestError(CONFLICT, "This topic already exists")
    topic = await ctx.topics.get_topic(name, explicit=True)
    persistent = topic.as_persistent()
    if properties and persistent is not None:
        await persistent.ledger.set_properties(properties)
    return no_content()


async def delete_topic(request: web.Request) -> web.Response:
    """``DELETE TOPIC[?force=true]``: delete a non-partitioned topic or one partition."""
    name = topic_of(request)
    ctx = context(request)
    if not ctx.namespaces.exists(name.namespace):  # as Pulsar: no namespace, no topic
        raise RestError(NOT_FOUND, f"Topic {name} not found")
    if ctx.topics.partitions_of(name):
        raise RestError(
            CONFLICT,
            f"{name} is a partitioned topic, instead of calling delete topic, please call "
            "delete-partitioned-topic.",
        )
    try:
        await ctx.topics.delete_topic(name, force=query_bool(request, "force"))
    except TopicNotFoundError:
        if name.domain is TopicDomain.NON_PERSISTENT:
            # Pulsar's BrokerService.deleteTopic: a non-persistent topic that is not loaded has
            # nothing to delete (204); only a persistent one is looked for in the store.
            return no_content()
        raise RestError(NOT_FOUND, f"Topic {name} not found") from None
    except NotAllowedError:
        raise RestError(PRECONDITION_FAILED, "Topic has active producers/subscriptions") from None
    return no_content()


def _options(request: web.Request) -> Callable[[dict[str, Any]], dict[str, Any]]:
    # The stats options that leave parts out (excludePublishers, excludeConsumers).
    return partial(
        leave_out,
        publishers=query_bool(request, "excludePublishers"),
        consumers=query_bool(request, "excludeConsumers"),
    )


async def stats(request: web.Request) -> web.Response:
    """``GET TOPIC/stats[?excludePublishers=true][&excludeConsumers=true]``: ``TopicStats``."""
    ctx = context(request)
    topic = await load_topic(ctx, topic_of(request))
    ctx.stats.refresh()
    return json_response(_options(request)(ctx.stats.stats(topic)))


async def partitioned_stats(request: web.Request) -> web.Response:
    """``GET TOPIC/partitioned-stats[?perPartition=false]``: summed over every partition.

    The stats options ``excludePublishers`` and ``excludeConsumers`` apply to every partition.

    Each partition is read at its owner (``partition_fanout``); one that cannot be read is
    left out, as Pulsar does.
    """
    name = topic_of(request)
    ctx = context(request)
    check_topic_namespace(ctx, name)
    count = ctx.topics.partitions_of(name)
    if not count:
        raise RestError(NOT_FOUND, f"Partitioned Topic {name} not found")
    local: dict[str, TopicHandle] = {}
    remote: dict[str, dict[str, Any]] = {}
    for partition in targets(ctx, name):
        try:
            owner = await partition_owner(ctx, partition)
            if owner is None:
                local[str(partition)] = await load_topic(ctx, partition)
                continue
            status, body = await call_broker(ctx, owner, "GET", topic_path(partition, "/stats"))
        except RestError as exc:
            status, body = exc.status, exc.reason
        if status == 200 and isinstance(body, dict):
            remote[str(partition)] = body
        else:
            log.warning(
                "partitioned-stats of %s: %s left out (%s %s)", name, partition, status, body
            )
    ctx.stats.refresh()
    docs = {p: ctx.stats.stats(topic) for p, topic in local.items()} | remote
    options = _options(request)
    ordered = {str(p): options(docs[str(p)]) for p in targets(ctx, name) if str(p) in docs}
    per_partition = query_bool(request, "perPartition", default=True)
    return json_response(
        ctx.stats.partitioned_stats(ordered, partitions=count, per_partition=per_partition)
    )


async def internal_stats(request: web.Request) -> web.Response:
    """``GET TOPIC/internalStats``: the managed ledger and cursors."""
    ctx = context(request)
    topic = await load_topic(ctx, topic_of(request))
    return json_response(ctx.stats.internal_stats(topic))


async def unload(request: web.Request) -> web.Response:
    """``PUT TOPIC/unload``: close clients with CLOSE_*, drop the topic object (spec §9).

    On a partitioned topic's name, every partition is unloaded at its owner
    (``partition_fanout``); the first failure is the answer.
    """
    name = topic_of(request)
    ctx = context(request)
    check_topic_namespace(ctx, name)
    if not ctx.topics.topic_exists(name):
        raise RestError(NOT_FOUND, f"Topic {name} not found")
    if not ctx.topics.partitions_of(name):
        await ctx.topics.unload(name)
        return no_content()
    for partition in targets(ctx, name):
        owner = await partition_owner(ctx, partition)
        if owner is None:
            await ctx.topics.unload(partition)
            continue
        status, reason = await call_broker(ctx, owner, "PUT", topic_path(partition, "/unload"))
        if status >= 300:
            raise RestError(status, str(reason))
    return no_content()


async def compact(request: web.Request) -> web.Response:
    """``PUT TOPIC/compaction``: start compacting (each partition of a partitioned topic)."""
    name = topic_of(request)
    ctx = context(request)
    check_topic_namespace(ctx, name)
    if not ctx.topics.topic_exists(name):
        raise RestError(NOT_FOUND, f"Topic {name} not found")
    if ctx.compaction is None:
        raise RestError(METHOD_NOT_ALLOWED, "Compaction is not available on this broker")
    if name.domain is TopicDomain.NON_PERSISTENT:
        raise RestError(METHOD_NOT_ALLOWED, "Compaction on a non-persistent topic is not allowed")
    for target in targets(ctx, name):
        await load_topic(ctx, target)  # partitions exist from the topic's creation on
    try:
        await ctx.compaction.trigger(name)
    except CompactionInProgressError:
        raise RestError(CONFLICT, "Compaction already in progress") from None
    except TopicNotFoundError:
        raise RestError(NOT_FOUND, f"Topic {name} not found") from None
    return no_content()


async def compaction_status(request: web.Request) -> web.Response:
    """``GET TOPIC/compaction``: ``LongRunningProcessStatus`` of the last compaction."""
    name = topic_of(request)
    ctx = context(request)
    check_topic_namespace(ctx, name)
    if not ctx.topics.topic_exists(name):
        raise RestError(NOT_FOUND, f"Topic {name} not found")
    if ctx.compaction is None:
        return json_response({"status": "NOT_RUN", "lastError": ""})
    return json_response(ctx.compaction.status(name))


def add_routes(app: web.Application) -> None:
    """Register the topic routes of both domains (literal paths before ``{topic}``)."""
    router = app.router
    router.add_get(BASE, list_topics)
    router.add_get(f"{BASE}/partitioned", list_partitioned)
    router.add_put(TOPIC, create_topic)
    router.add_delete(TOPIC, delete_topic)
    router.add_get(f"{TOPIC}/stats", stats)
    router.add_get(f"{TOPIC}/partitioned-stats", partitioned_stats)
    router.add_get(f"{TOPIC}/internalStats", internal_stats)
    router.add_put(f"{TOPIC}/unload", unload)
    router.add_put(f"{TOPIC}/compaction", compact)
    router.add_get(f"{TOPIC}/compaction", compaction_status)
