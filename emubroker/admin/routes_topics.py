"""``/admin/v2/{persistent,non-persistent}/{tenant}/{namespace}[/{topic}/...]``: topics.

Pulsar's ``PersistentTopics`` (``NonPersistentTopics`` extends it, so both domains share every
route here): list, create and delete non-partitioned topics; create (``PUT .../partitions`` with a
bare integer body, or a ``PartitionedTopicMetadata`` with properties), grow, read and delete
partitioned-topic metadata; ``stats``,
``partitioned-stats`` and ``internalStats``; unload; compaction. Subscription routes live in
``routes_subscriptions``.

Statuses and reasons follow ``PersistentTopicsBase``/``AdminResource``: an existing topic is 409
"This topic already exists", a partition count below 1 is 406 "Number of partitions should be more
than 0", shrinking is 422, a partition name where a partitioned topic is expected is 412, an
unknown topic 404 "Topic <name> not found" (but deleting a non-persistent topic that is not loaded
is 204: there is nothing to delete), deleting a topic with producers or consumers without
``force`` 412 "Topic has active producers/subscriptions", and calling the non-partitioned delete on
a partitioned topic (or the reverse) 409 naming the right call.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import msgspec
from aiohttp import web

from emubroker.admin.errors import (
    BAD_REQUEST,
    CONFLICT,
    METHOD_NOT_ALLOWED,
    NOT_ACCEPTABLE,
    NOT_FOUND,
    PRECONDITION_FAILED,
    UNPROCESSABLE,
    RestError,
)
from emubroker.admin.http import (
    context,
    json_response,
    namespace_of,
    no_content,
    query_bool,
    read_body,
    read_json,
    topic_of,
)
from emubroker.admin.partition_fanout import (
    call_broker,
    delete_partitions_elsewhere,
    partition_owner,
    topic_path,
)
from emubroker.admin.policy_bodies import jackson_int
from emubroker.admin.routes_topic_properties import (
    coerce_properties,
    read_properties,
    require_strings,
)
from emubroker.admin.stats_merge import leave_out
from emubroker.metadata.paths import managed_ledger_path
from emubroker.naming import TopicDomain
from emubroker.topics.compaction import CompactionInProgressError
from emubroker.topics.namespace_limits import TooManyTopicsError
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

MAX_PARTITIONS: Final = 65_536
"""Most partitions a topic may have, whatever ``maxNumPartitionsPerPartitionedTopic`` says. Pulsar's
key defaults to 0 (no limit); a bound keeps one request from making us list millions of
partition names."""

_MODES: Final = {
    TopicDomain.PERSISTENT: TopicsMode.PERSISTENT,
    TopicDomain.NON_PERSISTENT: TopicsMode.NON_PERSISTENT,
}


class PartitionedTopicMetadata(msgspec.Struct):
    """Pulsar's ``PartitionedTopicMetadata`` JSON (``properties`` left out while none are set)."""

    partitions: int
    deleted: bool = False
    properties: dict[str, str] | None = None


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


PARTITIONED_TOPIC_METADATA: Final = "application/vnd.partitioned-topic-metadata+json"


class _PartitionedTopicMetadata(msgspec.Struct):
    # Absent: the int's default, 0 (refused below as Pulsar refuses it).
    partitions: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"0"))
    properties: dict[str, msgspec.Raw] | None = None


_METADATA_BODY: Final[Any] = _PartitionedTopicMetadata | int  # Any: a union is no ``type[T]``


async def _partition_count(request: web.Request) -> tuple[int, dict[str, str | None] | None]:
    # A bare count, or Pulsar's PartitionedTopicMetadata under its own media type (the Go admin
    # client always, with "properties": null when it has none; the Java one with properties),
    # which Jackson also reads from a bare integer. The count is read as Jackson reads an int
    # ("2" and 2.0 are 2, null is 0). Answers the count and the properties (None: none given).
    properties = None
    if request.content_type == PARTITIONED_TOPIC_METADATA:
        what = "partitioned topic metadata"
        metadata: _PartitionedTopicMetadata | int = await read_json(
            request, _METADATA_BODY, what=what
        )
        if isinstance(metadata, int):
            partitions = metadata
        else:
            partitions = jackson_int(_decoded(metadata.partitions, what), what=what)
            if metadata.properties is not None:
                properties = coerce_properties(metadata.properties, what=what)
    else:
        what = "number of partitions"
        body = await read_body(request, what=what)
        if not body.strip():  # a JSON null is Jackson's 0; no body at all is Jersey's 400
            raise RestError(BAD_REQUEST, f"{what} is required")
        partitions = jackson_int(_decoded(body, what), what=what)
    if partitions <= 0:
        raise RestError(NOT_ACCEPTABLE, "Number of partitions should be more than 0")
    configured = context(request).dynamic.config.maxNumPartitionsPerPartitionedTopic
    limit = min(configured, MAX_PARTITIONS) if configured > 0 else MAX_PARTITIONS
    if partitions > limit:
        raise RestError(
            NOT_ACCEPTABLE, f"Number of partitions should be less than or equal to {limit}"
        )
    return partitions, properties


def _decoded(body: bytes | msgspec.Raw, what: str) -> Any:
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise RestError(BAD_REQUEST, f"Malformed JSON in {what}: {exc}") from None
    except RecursionError:  # msgspec's decoder stops at a fixed nesting depth
        raise RestError(BAD_REQUEST, f"Malformed JSON in {what}: nested too deeply") from None


async def create_partitioned(request: web.Request) -> web.Response:
    """``PUT TOPIC/partitions`` with a bare integer or a PartitionedTopicMetadata body."""
    name = topic_of(request, partitioned=True)
    partitions, properties = await _partition_count(request)
    ctx = context(request)
    check_topic_namespace(ctx, name)
    if ctx.topics.topic_exists(name):
        raise RestError(CONFLICT, "This topic already exists")
    try:
        await ctx.topics.create_partitioned_topic(name, partitions, properties)
    except TooManyTopicsError:
        raise  # 412 with Pulsar's reason (``errors.rest_errors``)
    except NotAllowedError:
        raise RestError(CONFLICT, "This topic already exists") from None
    return no_content()


async def update_partitioned(request: web.Request) -> web.Response:
    """``POST TOPIC/partitions`` with a bare integer body: grow the topic (properties kept)."""
    name = topic_of(request, partitioned=True)
    partitions, _ = await _partition_count(request)
    ctx = context(request)
    check_topic_namespace(ctx, name)
    current = ctx.topics.partitions_of(name)
    if not current:
        raise RestError(CONFLICT, f"Topic {name} is not the partitioned topic.")
    if partitions < current:
        raise RestError(
            UNPROCESSABLE,
            f"Desired partitions {partitions} can't be less than the current partitions {current}.",
        )
    await ctx.topics.update_partitioned_topic(name, partitions)
    return no_content()


async def get_partitions(request: web.Request) -> web.Response:
    """``GET TOPIC/partitions[?checkAllowAutoCreation=true]`` (also the HTTP lookup's, §13)."""
    name = topic_of(request)
    ctx = context(request)
    check_topic_namespace(ctx, name)
    # Pulsar's internalGetPartitionedMetadataAsync: the caller (a client about to create the
    # topic) asks, and auto-creation (the namespace's override, else the broker's keys) allows it:
    # a missing topic is created partitioned if its type says so, else answers 0. Otherwise 0
    # partitions is a non-partitioned topic, which must exist.
    creating = query_bool(request, "checkAllowAutoCreation") and ctx.topics.may_auto_create(name)
    if creating:
        partitions = await ctx.topics.partitioned_metadata(name)
    else:
        partitions = ctx.topics.partitions_of(name)
    if not partitions and not creating and not await _topic_exists(ctx, name):
        raise RestError(NOT_FOUND, f"Topic {name} not found")
    properties = ctx.topics.partitioned_properties(name) if partitions else None
    return json_response(PartitionedTopicMetadata(partitions, properties=properties))


async def _topic_exists(ctx: AdminContext, name: TopicName) -> bool:
    """Whether a non-partitioned topic or partition exists.

    A persistent one may have been made by another broker of the cluster: its managed ledger in
    the shared store says so. A non-persistent one lives only on its owner, where this call is
    sent (``topic_owner``), as Pulsar's ``checkNonPersistentNonPartitionedTopicExists``.
    """
    if ctx.topics.topic_exists(name):
        return True
    persistent = name.domain is TopicDomain.PERSISTENT
    return persistent and await ctx.metadata.exists(managed_ledger_path(name))


async def delete_partitioned(request: web.Request) -> web.Response:
    """``DELETE TOPIC/partitions[?force=true]``: the topic and every partition.

    Each partition is deleted at its owner (``partition_fanout``), then the metadata here.
    """
    name = topic_of(request, partitioned=True)
    ctx = context(request)
    check_topic_namespace(ctx, name)
    if not ctx.topics.partitions_of(name):
        if ctx.topics.topic_exists(name):
            raise RestError(
                CONFLICT,
                f"{name} is a non-partitioned topic. Instead of calling delete-partitioned-topic "
                "please call delete.",
            )
        raise RestError(NOT_FOUND, f"Topic {name} not found.")
    force = query_bool(request, "force")
    await delete_partitions_elsewhere(ctx, targets(ctx, name), force=force)
    try:
        await ctx.topics.delete_partitioned_topic(name, force=force)
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
    router.add_put(f"{TOPIC}/partitions", create_partitioned)
    router.add_post(f"{TOPIC}/partitions", update_partitioned)
    router.add_get(f"{TOPIC}/partitions", get_partitions)
    router.add_delete(f"{TOPIC}/partitions", delete_partitioned)
    router.add_get(f"{TOPIC}/stats", stats)
    router.add_get(f"{TOPIC}/partitioned-stats", partitioned_stats)
    router.add_get(f"{TOPIC}/internalStats", internal_stats)
    router.add_put(f"{TOPIC}/unload", unload)
    router.add_put(f"{TOPIC}/compaction", compact)
    router.add_get(f"{TOPIC}/compaction", compaction_status)
