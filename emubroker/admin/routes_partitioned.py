"""Partitioned-topic metadata: ``.../partitions`` under ``/admin/v2/{domain}/.../{topic}``.

Pulsar's ``PersistentTopics`` routes on ``/partitions`` (both domains, the paths of
``routes_topics``): create a partitioned topic (``PUT`` with a bare integer body, or a
``PartitionedTopicMetadata`` with properties), grow it (``POST``), read its metadata (``GET``,
also the HTTP lookup's) and delete it with every partition (``DELETE``). The topic's other
routes are ``routes_topics``'s.

Statuses and reasons follow ``PersistentTopicsBase``: an existing topic is 409 "This topic
already exists", a partition count below 1 is 406 "Number of partitions should be more than 0",
shrinking is 422, a partition name where a partitioned topic is expected is 412, an unknown
topic 404 "Topic <name> not found", and calling the partitioned delete on a non-partitioned
topic 409 naming the right call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from emubroker.admin.errors import (
    BAD_REQUEST,
    CONFLICT,
    NOT_ACCEPTABLE,
    NOT_FOUND,
    PRECONDITION_FAILED,
    UNPROCESSABLE,
    RestError,
)
from emubroker.admin.http import (
    context,
    json_response,
    no_content,
    query_bool,
    read_body,
    read_json,
    topic_of,
)
from emubroker.admin.partition_fanout import delete_partitions_elsewhere
from emubroker.admin.policy_bodies import jackson_int
from emubroker.admin.routes_topic_properties import coerce_properties
from emubroker.admin.routes_topics import TOPIC, check_topic_namespace, targets
from emubroker.metadata.paths import managed_ledger_path
from emubroker.naming import TopicDomain
from emubroker.topics.namespace_limits import TooManyTopicsError
from protocol.errors import NotAllowedError

if TYPE_CHECKING:
    from aiohttp import web

    from emubroker.admin.context import AdminContext
    from emubroker.naming import TopicName

__all__ = ["add_routes"]

MAX_PARTITIONS: Final = 65_536
"""Most partitions a topic may have, whatever ``maxNumPartitionsPerPartitionedTopic`` says. Pulsar's
key defaults to 0 (no limit); a bound keeps one request from making us list millions of
partition names."""


class PartitionedTopicMetadata(msgspec.Struct):
    """Pulsar's ``PartitionedTopicMetadata`` JSON (``properties`` left out while none are set)."""

    partitions: int
    deleted: bool = False
    properties: dict[str, str] | None = None


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


def add_routes(app: web.Application) -> None:
    """Register the partitioned-topic metadata routes."""
    router = app.router
    router.add_put(f"{TOPIC}/partitions", create_partitioned)
    router.add_post(f"{TOPIC}/partitions", update_partitioned)
    router.add_get(f"{TOPIC}/partitions", get_partitions)
    router.add_delete(f"{TOPIC}/partitions", delete_partitioned)
