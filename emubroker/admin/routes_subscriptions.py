"""Subscription routes under ``/admin/v2/{domain}/{tenant}/{namespace}/{topic}``.

Pulsar's ``PersistentTopics`` subscription calls: list, create at a position (``PUT
.../subscription/{sub}`` with a ``ResetCursorData`` body, a ``"latest"``/``"earliest"`` string, or
``?messageId=latest|earliest|ledger:entry``; default latest), delete (``?force=true`` disconnects
consumers first, else 412 "Subscription has active connected consumers"), skip N entries, skip
all, and reset the cursor to a publish time (``resetcursor/{timestamp}``, ms) or a message id.
On a partitioned topic, list, create, delete, skip-all and reset-to-time act on every partition;
skip N and reset-to-id are refused (405) as in Pulsar. Subscriptions of non-persistent topics
exist only through their consumers: creating one is 400, moving their cursor 405.

``expireMessages/{expireTimeInSeconds}`` expires one subscription's entries older than that
(``emubroker.topics.expiry`` rule 6), ``all_subscription/expireMessages/{expireTimeInSeconds}``
every subscription's; a partitioned topic's partitions each do it. A subscription the expiry was
not issued on (empty backlog, or caught up) answers 409 with Pulsar's text, after the others ran.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, cast

import msgspec
from aiohttp import web

from emubroker.admin.errors import (
    BAD_REQUEST,
    CONFLICT,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    PRECONDITION_FAILED,
    RestError,
)
from emubroker.admin.http import (
    context,
    json_response,
    no_content,
    path_int,
    query_bool,
    read_json,
    topic_of,
)
from emubroker.admin.routes_topics import TOPIC, check_topic_namespace, load_topic, targets
from protocol.commands import MessageIdData
from protocol.errors import ConsumerBusyError, NotAllowedError
from protocol.ids import EARLIEST, LATEST

if TYPE_CHECKING:
    from emubroker.admin.context import AdminContext
    from emubroker.naming import TopicName
    from emubroker.topics import Topic, TopicHandle
    from emubroker.topics.subscription import Subscription

__all__ = ["ResetCursorData", "add_routes", "parse_position"]

SUB: Final = TOPIC + "/subscription/{subscription}"

_EARLIEST: Final = MessageIdData(ledger_id=EARLIEST.ledger_id, entry_id=EARLIEST.entry_id)
_LATEST: Final = MessageIdData(ledger_id=LATEST.ledger_id, entry_id=LATEST.entry_id)


class ResetCursorData(msgspec.Struct, rename="camel", kw_only=True):
    """Pulsar's ``ResetCursorData`` JSON (``isExcluded``: start after that entry)."""

    ledger_id: int
    entry_id: int
    partition_index: int = -1
    is_excluded: bool = False
    excluded: bool = False  # Lombok's getter name for isExcluded, as some clients send it
    batch_index: int = -1
    properties: dict[str, str] | None = None

    def message_id(self) -> MessageIdData:
        """The first entry to deliver."""
        skip = 1 if (self.is_excluded or self.excluded) and self.entry_id >= 0 else 0
        return MessageIdData(ledger_id=self.ledger_id, entry_id=self.entry_id + skip)


_BODY: Final = cast("type[object]", str | ResetCursorData)
"""What a position body may be: ``"latest"``/``"earliest"``/``"l:e"`` or ``ResetCursorData``."""


def parse_position(text: str) -> MessageIdData:
    """``latest``, ``earliest`` or ``ledger:entry`` (what ``pulsar-admin --messageId`` takes).

    Raises:
        RestError: 400 for anything else.
    """
    lowered = text.strip().lower()
    if lowered == "latest":
        return _LATEST
    if lowered == "earliest":
        return _EARLIEST
    ledger, sep, entry = lowered.partition(":")
    try:
        if not sep:
            raise ValueError(text)
        return MessageIdData(ledger_id=int(ledger), entry_id=int(entry.split(":")[0]))
    except ValueError:
        raise RestError(
            BAD_REQUEST, f"Invalid message id '{text}': use latest, earliest or ledgerId:entryId"
        ) from None


async def _position(request: web.Request, *, required: bool) -> MessageIdData | None:
    body: object = await read_json(request, _BODY, what="message id", default=None)
    if isinstance(body, ResetCursorData):
        return body.message_id()
    if isinstance(body, str):
        return parse_position(body)
    query = request.query.get("messageId")
    if query is not None:
        return parse_position(query)
    if required:
        raise RestError(BAD_REQUEST, "A message id is required")
    return None


async def _subscribed(ctx: AdminContext, name: TopicName, subscription: str) -> list[TopicHandle]:
    # Every target topic, loaded, each with the subscription (else 404), before anything changes.
    loaded = [await load_topic(ctx, target) for target in targets(ctx, name)]
    for topic in loaded:
        if topic.subscription(subscription) is None:
            raise RestError(
                NOT_FOUND, f"Subscription {subscription} not found for topic {topic.name}"
            )
    return loaded


async def _cursors(
    ctx: AdminContext, name: TopicName, subscription: str, what: str
) -> list[Subscription]:
    # The subscription on every target, which must be persistent (non-persistent ones have no
    # cursor to move).
    found: list[Subscription] = []
    for topic in await _subscribed(ctx, name, subscription):
        stored = topic.as_persistent()
        if stored is None:
            raise RestError(METHOD_NOT_ALLOWED, f"{what} on a non-persistent topic is not allowed")
        sub = stored.subscription(subscription)
        assert sub is not None  # checked by _subscribed, with no await in between
        found.append(sub)
    return found


async def list_subscriptions(request: web.Request) -> web.Response:
    """``GET TOPIC/subscriptions``: names (of every partition, for a partitioned topic)."""
    ctx = context(request)
    name = topic_of(request)
    names: set[str] = set()
    for target in targets(ctx, name):
        names.update((await load_topic(ctx, target)).subscriptions())
    return json_response(sorted(names))


async def create_subscription(request: web.Request) -> web.Response:
    """``PUT TOPIC/subscription/{subscription}``: a durable subscription at a position."""
    ctx = context(request)
    name = topic_of(request)
    subscription = request.match_info["subscription"]
    start = await _position(request, required=False)
    if not name.is_persistent:
        raise RestError(
            BAD_REQUEST,
            "Create subscription on non-persistent topic can only be done through client",
        )
    check_topic_namespace(ctx, name)
    if not ctx.topics.topic_exists(name):
        # PersistentTopicsBase.internalCreateSubscription: auto-creation (the namespace's
        # override, else the broker's keys) decides, and its type: a partitioned topic gets the
        # subscription on every partition.
        if not ctx.topics.may_auto_create(name):
            raise RestError(PRECONDITION_FAILED, "Topic does not exist and cannot be auto-created")
        if not await ctx.topics.partitioned_metadata(name):
            await ctx.topics.get_topic(name, explicit=True)
    loaded = [await load_topic(ctx, target) for target in targets(ctx, name)]
    if any(topic.subscription(subscription) is not None for topic in loaded):
        raise RestError(CONFLICT, "Subscription already exists for topic")
    for topic in loaded:
        stored = topic.as_persistent()
        assert stored is not None  # persistent domain
        try:
            stored.create_subscription(subscription, start)
        except NotAllowedError as exc:
            # Taken name, or the subscription limit (Pulsar: NotAllowedException -> 409).
            raise RestError(CONFLICT, exc.message) from None
    return no_content()


async def delete_subscription(request: web.Request) -> web.Response:
    """``DELETE TOPIC/subscription/{subscription}[?force=true]``."""
    ctx = context(request)
    subscription = request.match_info["subscription"]
    force = query_bool(request, "force")
    loaded = await _subscribed(ctx, topic_of(request), subscription)
    busy = any((sub := t.subscription(subscription)) is not None and sub.consumers for t in loaded)
    if busy and not force:
        raise RestError(PRECONDITION_FAILED, "Subscription has active connected consumers")
    for topic in loaded:
        try:
            topic.delete_subscription(subscription, force=force)
        except ConsumerBusyError:
            raise RestError(
                PRECONDITION_FAILED, "Subscription has active connected consumers"
            ) from None
    return no_content()


async def skip(request: web.Request) -> web.Response:
    """``POST TOPIC/subscription/{subscription}/skip/{numMessages}``: skip N entries."""
    ctx = context(request)
    name = topic_of(request)
    count = path_int(request, "numMessages", minimum=0)
    check_topic_namespace(ctx, name)
    if ctx.topics.partitions_of(name):
        raise RestError(METHOD_NOT_ALLOWED, "Skip messages on a partitioned topic is not allowed")
    for sub in await _cursors(ctx, name, request.match_info["subscription"], "Skip messages"):
        sub.skip(count)
    return no_content()


async def skip_all(request: web.Request) -> web.Response:
    """``POST TOPIC/subscription/{subscription}/skip_all``: clear the backlog."""
    ctx = context(request)
    name = topic_of(request)
    for sub in await _cursors(ctx, name, request.match_info["subscription"], "Clear backlog"):
        sub.skip(None)
    return no_content()


async def reset_to_time(request: web.Request) -> web.Response:
    """``POST TOPIC/subscription/{subscription}/resetcursor/{timestamp}`` (publish time, ms)."""
    ctx = context(request)
    name = topic_of(request)
    timestamp = path_int(request, "timestamp")
    for sub in await _cursors(ctx, name, request.match_info["subscription"], "Reset cursor"):
        sub.reset_cursor(publish_time=timestamp)
    return no_content()


async def reset_to_id(request: web.Request) -> web.Response:
    """``POST TOPIC/subscription/{subscription}/resetcursor`` with a message id body."""
    ctx = context(request)
    name = topic_of(request)
    subscription = request.match_info["subscription"]
    position = await _position(request, required=True)
    check_topic_namespace(ctx, name)
    if ctx.topics.partitions_of(name):
        raise RestError(
            METHOD_NOT_ALLOWED, "Reset-cursor at position is not allowed for partitioned-topic"
        )
    for sub in await _cursors(ctx, name, subscription, "Reset cursor"):
        sub.reset_cursor(message_id=position)
    return no_content()


async def _persistent_targets(ctx: AdminContext, name: TopicName, what: str) -> list[Topic]:
    # Every target loaded (404 for a missing one), and persistent (405), before anything changes.
    found: list[Topic] = []
    for target in targets(ctx, name):
        stored = (await load_topic(ctx, target)).as_persistent()
        if stored is None:
            raise RestError(METHOD_NOT_ALLOWED, f"{what} on a non-persistent topic is not allowed")
        found.append(stored)
    return found


def _not_issued(topic: TopicName, subscription: str) -> RestError:
    return RestError(
        CONFLICT,
        f"Expire message by timestamp not issued on topic {topic} for subscription "
        f"{subscription} due to ongoing message expiration not finished or subscription almost "
        "catch  up. If it's performed on a partitioned topic operation might succeeded on other "
        "partitions, please check stats of individual partition.",
    )


def _expire(topic: Topic, subs: list[Subscription], seconds: int) -> RestError | None:
    # Every subscription is expired; the first one not issued is the answer (Pulsar waits for
    # all of its futures, then reports a failure).
    refused: RestError | None = None
    for sub in subs:
        if not sub.expire_by_time(seconds, sub.wall_ms()) and refused is None:
            refused = _not_issued(topic.name, sub.name)
    return refused


async def expire_messages(request: web.Request) -> web.Response:
    """``POST TOPIC/subscription/{subscription}/expireMessages/{expireTimeInSeconds}``."""
    ctx = context(request)
    seconds = path_int(request, "expireTimeInSeconds")
    subscription = request.match_info["subscription"]
    pairs = []
    for topic in await _persistent_targets(ctx, topic_of(request), "Expire messages"):
        sub = topic.subscription(subscription)
        if sub is None:
            raise RestError(
                NOT_FOUND, f"Subscription {subscription} not found for topic {topic.name}"
            )
        pairs.append((topic, sub))
    refused = None
    for topic, sub in pairs:
        outcome = _expire(topic, [sub], seconds)  # every partition runs; the first refusal answers
        refused = refused or outcome
    if refused is not None:
        raise refused
    return no_content()


async def expire_all_subscriptions(request: web.Request) -> web.Response:
    """``POST TOPIC/all_subscription/expireMessages/{expireTimeInSeconds}``."""
    ctx = context(request)
    name = topic_of(request)
    seconds = path_int(request, "expireTimeInSeconds")
    what = "Expire messages for all subscriptions"
    refused = None
    for topic in await _persistent_targets(ctx, name, what):
        outcome = _expire(topic, topic.expirable_subscriptions(), seconds)
        refused = refused or outcome
    if refused is not None:
        raise refused
    return no_content()


def add_routes(app: web.Application) -> None:
    """Register the subscription routes of both domains."""
    router = app.router
    router.add_get(f"{TOPIC}/subscriptions", list_subscriptions)
    router.add_put(SUB, create_subscription)
    router.add_delete(SUB, delete_subscription)
    router.add_post(f"{SUB}/skip/{{numMessages}}", skip)
    router.add_post(f"{SUB}/skip_all", skip_all)
    router.add_post(f"{SUB}/resetcursor/{{timestamp}}", reset_to_time)
    router.add_post(f"{SUB}/resetcursor", reset_to_id)
    router.add_post(f"{SUB}/expireMessages/{{expireTimeInSeconds}}", expire_messages)
    router.add_post(
        f"{TOPIC}/all_subscription/expireMessages/{{expireTimeInSeconds}}",
        expire_all_subscriptions,
    )
