"""Count limits over REST: the topic-policy paths, and the body reader the namespace paths share.

Topic policies (``PersistentTopics``, both domains routed as Pulsar's paths are), each
``POST`` (a bare JSON integer), ``GET`` and ``DELETE``:

* ``/admin/v2/{domain}/{tenant}/{namespace}/{topic}/maxProducers``: ``maxProducerPerTopic``;
* ``.../{topic}/maxConsumers``: ``maxConsumerPerTopic``;
* ``.../{topic}/maxConsumersPerSubscription``;
* ``.../{topic}/maxSubscriptionsPerTopic``.

A negative value is 412 with Pulsar's reason (``PersistentTopicsBase.internalSetMax*``); a body
that is not a Java ``int`` is 400, as Jersey answers. A GET of a value never set answers without
a body: 200 for ``maxProducers`` and ``maxConsumers``, 204 for the other two (their Pulsar
resources return ``void``, as Pulsar 4.0.7 answers). ``maxProducers`` and ``maxConsumers`` take
``applied=true`` and then answer the namespace's value, else the broker's
(``internalGetMaxProducers``). The policies are stored with the dispatch-rate ones
(``routes_dispatch_rate``: the topic must exist) and apply to the next producer or consumer
(``emubroker.topics.limits``); a partitioned topic's apply to each partition.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Final

import msgspec
from aiohttp import web

from emubroker.admin.errors import PRECONDITION_FAILED, RestError
from emubroker.admin.http import json_response, no_content, query_bool, read_json, unset_value
from emubroker.admin.routes_dispatch_rate import existing_topic, topic_throttling
from emubroker.admin.routes_topics import TOPIC
from emubroker.policies import TopicPolicies

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from emubroker.admin.context import AdminContext
    from emubroker.naming import TopicName

__all__ = ["add_routes", "check_count_limit", "read_count_limit"]

JavaInt = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]
"""What Jersey accepts for the resources' ``int`` parameters."""


async def read_count_limit(request: web.Request) -> int:
    """The request's JSON integer body (Jersey reads it before anything is checked).

    Raises:
        RestError: 400 for a body that is not a Java ``int``.
    """
    return await read_json(request, JavaInt, what="limit")


def check_count_limit(value: int, invalid: str) -> int:
    """``value`` if it is a valid limit (0 or more).

    Raises:
        RestError: 412 with Pulsar's reason ``invalid`` for a negative value.
    """
    if value < 0:
        raise RestError(PRECONDITION_FAILED, invalid)
    return value


class _TopicLimit(msgspec.Struct, frozen=True):
    # One topic-level limit: its path, its TopicPolicies field, Pulsar's 412 reason, the
    # namespace field and broker key ``applied=true`` falls back to (None: no ``applied``), and
    # the answer to a GET of the value unset (Pulsar's resource returns a null value or void).
    segment: str
    field: str
    invalid: str
    namespace_field: str | None = None
    broker_key: str | None = None
    unset: Callable[[], web.Response] = unset_value


_TOPIC_LIMITS: Final = (
    _TopicLimit(
        "maxProducers",
        "maxProducerPerTopic",
        "maxProducers must be 0 or more",
        "max_producers_per_topic",
        "maxProducersPerTopic",
    ),
    _TopicLimit(
        "maxConsumers",
        "maxConsumerPerTopic",
        "maxConsumers must be 0 or more",
        "max_consumers_per_topic",
        "maxConsumersPerTopic",
    ),
    _TopicLimit(
        "maxConsumersPerSubscription",
        "maxConsumersPerSubscription",
        "Invalid value for maxConsumersPerSubscription",
        unset=no_content,
    ),
    _TopicLimit(
        "maxSubscriptionsPerTopic",
        "maxSubscriptionsPerTopic",
        "maxSubscriptionsPerTopic must be 0 or more",
        unset=no_content,
    ),
)


async def _store(request: web.Request, limit: _TopicLimit, value: int | None) -> web.Response:
    ctx, name = existing_topic(request)
    throttling = topic_throttling(ctx)
    current = throttling.topic_policies(name) or TopicPolicies()
    updated = msgspec.structs.replace(current, **{limit.field: value})
    await throttling.store_topic_policies(name, updated)
    return no_content()


def _applied(ctx: AdminContext, name: TopicName, limit: _TopicLimit) -> int | None:
    # internalGetMaxProducers/Consumers: the namespace's value, else the broker's.
    if limit.namespace_field is None or limit.broker_key is None:
        return None
    policies = ctx.namespaces.policies(name.namespace)
    value: int | None = None if policies is None else getattr(policies, limit.namespace_field)
    return getattr(ctx.dynamic.config, limit.broker_key) if value is None else value


def _handlers(limit: _TopicLimit) -> tuple[Callable[..., Awaitable[web.Response]], ...]:
    async def set_limit(request: web.Request) -> web.Response:
        value = await read_count_limit(request)
        existing_topic(request)  # 404 before 412, as PersistentTopics' preValidation
        return await _store(request, limit, check_count_limit(value, limit.invalid))

    async def get_limit(request: web.Request) -> web.Response:
        ctx, name = existing_topic(request)
        policies = topic_throttling(ctx).topic_policies(name) or TopicPolicies()
        value: int | None = getattr(policies, limit.field)
        if value is None and query_bool(request, "applied"):
            value = _applied(ctx, name, limit)
        return limit.unset() if value is None else json_response(value)

    async def remove_limit(request: web.Request) -> web.Response:
        return await _store(request, limit, None)

    return set_limit, get_limit, remove_limit


def add_routes(app: web.Application) -> None:
    """Register the topic-level count-limit routes."""
    router = app.router
    for limit in _TOPIC_LIMITS:
        setter, getter, remover = _handlers(limit)
        path = f"{TOPIC}/{limit.segment}"
        router.add_post(path, setter)
        router.add_get(path, getter)
        router.add_delete(path, remover)
