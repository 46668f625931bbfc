"""More topic policies over REST: one table of Pulsar's ``PersistentTopics`` policy resources.

Each row of :data:`_POLICIES` is ``/admin/v2/{domain}/{tenant}/{namespace}/{topic}/<segment>``
with ``POST`` (set), ``GET`` (read; Pulsar's null, 200 without a body, while unset) and
``DELETE`` (unset). As in ``PersistentTopicsBase``: a body that does not decode into Pulsar's
type is 400 (Jersey), then a missing topic 404 "Topic <name> not found" (``preValidation``),
then a bad value 412 or 400 with Pulsar's reason. A GET of an unset value answers 200 without a
body, but 204 for ``maxMessageSize`` and ``publishRate`` (as Pulsar 4.0.7 does). The values are
kept with the other topic policies (``TopicPolicies``, ``routes_dispatch_rate.topic_throttling``;
a partitioned topic's apply to each partition), under Pulsar's ``TopicPolicies`` names:

* ``messageTTL`` (``?messageTTL=`` seconds, no body; 412 below 0): ``messageTTLInSeconds``;
* ``retention`` (``RetentionPolicies``, 400 as the namespace's), ``subscribeRate``,
  ``publishRate``, ``replicatorDispatchRate`` (``DispatchRate``), ``offloadPolicies``,
  ``autoSubscriptionCreation``, ``persistence`` (400 for Pulsar's quorum checks);
* ``maxMessageSize`` (412 below 0 or above the broker's ``maxMessageSize``),
  ``maxUnackedMessagesOnConsumer`` / ``OnSubscription`` (412 below 0),
  ``deduplicationSnapshotInterval`` (412 below 0), ``schemaValidationEnforced`` (no DELETE, and
  false while unset, as Pulsar);
* ``replication`` (a list of clusters: 412 when empty, naming ``global``, or leaving out this
  cluster, as a local topic policy may not);
* ``delayedDelivery`` (``DelayedDeliveryPolicies``, stored as Pulsar does in three fields);
* ``schemaCompatibilityStrategy`` (set by ``PUT`` with the name as a JSON string; ``UNDEFINED``
  unsets it): the one acted on, the schema checks read it before the namespace's, and a GET
  with ``applied=true`` answers the strategy in force (topic, namespace, broker).

The others are stored and served only, not acted on (docs/broker-behaviour.md), and a GET answers
the topic's own value (``applied=true`` is not resolved against the namespace for them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec
from aiohttp import web

from emubroker.admin.errors import (
    BAD_REQUEST,
    NOT_FOUND,
    PRECONDITION_FAILED,
    UNAVAILABLE,
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
    unset_value,
)
from emubroker.admin.policy_bodies import (
    AutoSubscriptionCreationOverride,
    DelayedDeliveryPolicies,
    JavaInt,
    OffloadPolicies,
    PersistencePolicies,
    PublishRate,
    RetentionPolicies,
    SubscribeRate,
    check_not_negative,
    check_persistence,
    check_retention,
    offload_policies_shown,
)
from emubroker.admin.routes_dispatch_rate import existing_topic, topic_throttling
from emubroker.admin.routes_topics import TOPIC
from emubroker.policies import TopicPolicies
from emubroker.ratelimit.quotas import InvalidDispatchRateError, decode_dispatch_rate
from emubroker.schemas.compat import CompatibilityStrategy

if TYPE_CHECKING:
    from emubroker.admin.context import AdminContext
    from emubroker.naming import TopicName

__all__ = ["add_routes"]

Decode = Callable[[web.Request], Awaitable[Any]]
Check = Callable[[Any, "AdminContext"], None]


class _Policy(NamedTuple):
    """One resource: how a value is read from the request and checked, and where it lives.

    ``unset`` is the GET's answer while the value is unset: Pulsar's null, which its resources
    answer 200 without a body, or 204 (``maxMessageSize``, ``publishRate``), or a default value
    (``schemaValidationEnforced``: false). ``removable``: Pulsar has a DELETE for it.
    ``set_method``: the setter's method. ``applied``: the value in force, which a GET with
    ``applied=true`` answers (else the topic's own).
    """

    decode: Decode
    check: Check
    read: Callable[[TopicPolicies], Any]
    write: Callable[[TopicPolicies, Any], TopicPolicies]
    unset: Callable[[], web.Response] = unset_value
    removable: bool = True
    set_method: str = "POST"
    applied: Callable[[AdminContext, TopicName], Awaitable[Any]] | None = None


def _json(kind: Any) -> Decode:
    async def decode(request: web.Request) -> Any:
        return msgspec.to_builtins(await read_json(request, kind, what="policy", default=None))

    return decode


async def _message_ttl(request: web.Request) -> int | None:
    # setMessageTTL takes ``@QueryParam("messageTTL") Integer``: no body; absent is null.
    text = request.query.get("messageTTL")
    if text is None:
        return None
    try:
        return msgspec.json.decode(text, type=JavaInt)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise RestError(BAD_REQUEST, f"Invalid messageTTL '{text[:32]}'") from None


async def _offload_policies(request: web.Request) -> Any:
    given = await read_json(request, OffloadPolicies, what="policy", default=None)
    return None if given is None else offload_policies_shown(given)


async def _dispatch_rate(request: web.Request) -> Any:
    body = await read_body(request, what="DispatchRate body")
    try:
        return msgspec.to_builtins(decode_dispatch_rate(body))
    except InvalidDispatchRateError as exc:
        raise RestError(exc.http_status, str(exc)) from None


async def _schema_strategy(request: web.Request) -> str | None:
    # A SchemaCompatibilityStrategy as a JSON string; UNDEFINED unsets, as in Pulsar.
    raw = await read_body(request, what="schema compatibility strategy")
    try:
        strategy = CompatibilityStrategy(msgspec.json.decode(raw, type=str))
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
        names = ", ".join(s.value for s in CompatibilityStrategy)
        raise RestError(
            BAD_REQUEST, f"Invalid schema compatibility strategy: use one of {names}"
        ) from None
    return None if strategy is CompatibilityStrategy.UNDEFINED else strategy.value


async def _applied_schema_strategy(ctx: AdminContext, name: TopicName) -> str:
    if ctx.schemas is None:
        raise RestError(UNAVAILABLE, "The schema registry is not available on this broker")
    return (await ctx.schemas.strategy(name)).value


def _none(_value: Any, _ctx: AdminContext) -> None:
    return None


def _at_least_zero(reason: str) -> Check:
    return lambda value, _ctx: check_not_negative(value, reason)


def _max_message_size(value: int | None, ctx: AdminContext) -> None:
    if value is not None and not 0 <= value <= ctx.dynamic.config.maxMessageSize:
        raise RestError(
            PRECONDITION_FAILED,
            "topic-level maxMessageSize must be greater than or equal to 0 and must be smaller "
            "than that in the broker-level",
        )


def _replication(value: list[str] | None, ctx: AdminContext) -> None:
    if not value:
        raise RestError(PRECONDITION_FAILED, "ClusterIds should not be null or empty")
    if "global" in value:
        raise RestError(
            PRECONDITION_FAILED, "Cannot specify global in the list of replication clusters"
        )
    if ctx.cluster not in value:
        raise RestError(
            PRECONDITION_FAILED,
            "Can not remove local cluster from the local topic-level replication clusters policy",
        )


def _struct_check(kind: type[Any], check: Callable[[Any], None]) -> Check:
    # The stored builtins go back into Pulsar's type for its check.
    def run(value: Any, _ctx: AdminContext) -> None:
        if value is not None:
            check(msgspec.convert(value, kind))

    return run


def _field(name: str) -> tuple[Callable[[TopicPolicies], Any], Callable[..., TopicPolicies]]:
    def read(policies: TopicPolicies) -> Any:
        return getattr(policies, name)

    def write(policies: TopicPolicies, value: Any) -> TopicPolicies:
        return msgspec.structs.replace(policies, **{name: value})

    return read, write


def _read_delayed_delivery(policies: TopicPolicies) -> Any:
    if policies.delayedDeliveryEnabled is None:
        return None
    return DelayedDeliveryPolicies(
        tickTime=policies.delayedDeliveryTickTimeMillis or 0,
        active=policies.delayedDeliveryEnabled,
        maxDeliveryDelayInMillis=policies.delayedDeliveryMaxDelayInMillis or 0,
    )


def _write_delayed_delivery(policies: TopicPolicies, value: Any) -> TopicPolicies:
    given = None if value is None else msgspec.convert(value, DelayedDeliveryPolicies)
    return msgspec.structs.replace(
        policies,
        delayedDeliveryEnabled=None if given is None else given.active,
        delayedDeliveryTickTimeMillis=None if given is None else given.tickTime,
        delayedDeliveryMaxDelayInMillis=None if given is None else given.maxDeliveryDelayInMillis,
    )


_POLICIES: Final = {
    "messageTTL": _Policy(
        _message_ttl,
        _at_least_zero("Invalid value for message TTL"),
        *_field("messageTTLInSeconds"),
    ),
    "retention": _Policy(
        _json(RetentionPolicies),
        _struct_check(RetentionPolicies, check_retention),
        *_field("retentionPolicies"),
    ),
    "subscribeRate": _Policy(_json(SubscribeRate), _none, *_field("subscribeRate")),
    "publishRate": _Policy(
        _json(PublishRate), _none, *_field("publishRate"), unset=partial(web.Response, status=204)
    ),
    "replicatorDispatchRate": _Policy(_dispatch_rate, _none, *_field("replicatorDispatchRate")),
    "offloadPolicies": _Policy(_offload_policies, _none, *_field("offloadPolicies")),
    "autoSubscriptionCreation": _Policy(
        _json(AutoSubscriptionCreationOverride), _none, *_field("autoSubscriptionCreationOverride")
    ),
    "persistence": _Policy(
        _json(PersistencePolicies),
        _struct_check(PersistencePolicies, check_persistence),
        *_field("persistence"),
    ),
    "maxMessageSize": _Policy(
        _json(JavaInt),
        _max_message_size,
        *_field("maxMessageSize"),
        unset=partial(web.Response, status=204),
    ),
    "maxUnackedMessagesOnConsumer": _Policy(
        _json(JavaInt),
        _at_least_zero("maxUnackedNum must be 0 or more"),
        *_field("maxUnackedMessagesOnConsumer"),
    ),
    "maxUnackedMessagesOnSubscription": _Policy(
        _json(JavaInt),
        _at_least_zero("maxUnackedNum must be 0 or more"),
        *_field("maxUnackedMessagesOnSubscription"),
    ),
    "deduplicationSnapshotInterval": _Policy(
        _json(JavaInt),
        _at_least_zero("interval must be 0 or more"),
        *_field("deduplicationSnapshotIntervalSeconds"),
    ),
    "schemaValidationEnforced": _Policy(
        _json(bool),
        _none,
        *_field("schemaValidationEnforced"),
        unset=partial(json_response, False),
        removable=False,
    ),
    "schemaCompatibilityStrategy": _Policy(
        _schema_strategy,
        _none,
        *_field("schemaCompatibilityStrategy"),
        set_method="PUT",
        applied=_applied_schema_strategy,
    ),
    "replication": _Policy(_json(list[str]), _replication, *_field("replicationClusters")),
    "delayedDelivery": _Policy(
        _json(DelayedDeliveryPolicies), _none, _read_delayed_delivery, _write_delayed_delivery
    ),
}


def _existing_topic(request: web.Request) -> tuple[AdminContext, TopicName]:
    # As existing_topic, with the reason PersistentTopicsBase gives these resources.
    ctx, name = context(request), topic_of(request)
    if ctx.namespaces.exists(name.namespace) and not ctx.topics.topic_exists(name):
        raise RestError(NOT_FOUND, f"Topic {name} not found")
    return existing_topic(request)


async def _store(request: web.Request, policy: _Policy, value: Any) -> web.Response:
    ctx, name = _existing_topic(request)
    throttling = topic_throttling(ctx)
    current = throttling.topic_policies(name) or TopicPolicies()
    await throttling.store_topic_policies(name, policy.write(current, value))
    return no_content()


def _handlers(policy: _Policy) -> tuple[Decode, Decode, Decode]:
    async def set_policy(request: web.Request) -> web.Response:
        topic_of(request)  # a bad name before a bad body
        value = await policy.decode(request)
        ctx, _ = _existing_topic(request)  # 404 before 412, as PersistentTopics' preValidation
        policy.check(value, ctx)
        return await _store(request, policy, value)

    async def get_policy(request: web.Request) -> web.Response:
        ctx, name = _existing_topic(request)
        if policy.applied is not None and query_bool(request, "applied"):
            return json_response(await policy.applied(ctx, name))
        value = policy.read(topic_throttling(ctx).topic_policies(name) or TopicPolicies())
        return policy.unset() if value is None else json_response(value)

    async def remove_policy(request: web.Request) -> web.Response:
        return await _store(request, policy, None)

    return set_policy, get_policy, remove_policy


def add_routes(app: web.Application) -> None:
    """Register the topic policy routes of the table."""
    router = app.router
    for segment, policy in _POLICIES.items():
        setter, getter, remover = _handlers(policy)
        path = f"{TOPIC}/{segment}"
        router.add_route(policy.set_method, path, setter)
        router.add_get(path, getter)
        if policy.removable:
            router.add_delete(path, remover)
