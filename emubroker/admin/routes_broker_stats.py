"""``/admin/v2/broker-stats``: this broker's load report and topics (Pulsar's ``BrokerStatsBase``).

``GET /admin/v2/broker-stats/load-report`` answers what ``pulsar-admin broker-stats load-report``
prints: the modular load manager's ``generateLoadReport()``, i.e. this broker's
``LocalBrokerData`` brought up to date with its latest usage and bundle samples, in the JSON Pulsar
stores at ``/loadbalance/brokers/<broker>`` (``emubroker.loadbalance.model.codec``).

``GET /admin/v2/broker-stats/topics`` (``pulsar-admin broker-stats topics``) answers the topics
this broker has loaded as Pulsar's ``PulsarStats`` streams them: ``{namespace: {bundle range:
{"persistent"|"non-persistent": {topic: stats}}}}``, each topic with the compact keys of
``PersistentTopic.updateRates`` / ``StreamingStats`` (counts and rates, publishers, subscriptions
and their consumers), taken from the same numbers as ``.../stats``. Both are super-users only, as
in Pulsar.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from emubroker.admin.http import context, json_response
from emubroker.loadbalance.model.codec import encode
from emubroker.naming import TopicName

if TYPE_CHECKING:
    from emubroker.admin.context import AdminContext

__all__ = ["add_routes"]

_PUBLISHER_KEYS = (
    "msgRateIn",
    "msgThroughputIn",
    "averageMsgSize",
    "address",
    "producerId",
    "producerName",
    "connectedSince",
    "clientVersion",
)
_CONSUMER_KEYS = (
    "address",
    "consumerName",
    "availablePermits",
    "connectedSince",
    "msgRateOut",
    "msgThroughputOut",
    "msgRateRedeliver",
    "avgMessagesPerEntry",
    "messageAckRate",
    "unackedMessages",
    "blockedConsumerOnUnackedMsgs",
    "clientVersion",
)
_SUBSCRIPTION_KEYS = (
    "msgBacklog",
    "msgRateExpired",
    "msgRateOut",
    "messageAckRate",
    "msgThroughputOut",
    "msgRateRedeliver",
    "type",
    "blockedSubscriptionOnUnackedMsgs",
    "unackedMessages",
)


def _pick(doc: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    # StreamingStats writes the metadata map's pairs after the fixed keys.
    return {key: doc.get(key) for key in keys} | dict(doc.get("metadata", {}))


def _streamed(doc: dict[str, Any]) -> dict[str, Any]:
    """One topic as ``PersistentTopic.updateRates`` streams it, from its ``TopicStats``."""
    return {
        "publishers": [_pick(p, _PUBLISHER_KEYS) for p in doc["publishers"]],
        "replication": {},
        "subscriptions": {
            name: {
                "consumers": [_pick(c, _CONSUMER_KEYS) for c in sub["consumers"]],
                **{key: sub.get(key) for key in _SUBSCRIPTION_KEYS},
            }
            for name, sub in doc["subscriptions"].items()
        },
        "producerCount": len(doc["publishers"]),
        "averageMsgSize": doc["averageMsgSize"],
        "msgRateIn": doc["msgRateIn"],
        "msgRateOut": doc["msgRateOut"],
        "msgInCount": doc["msgInCounter"],
        "bytesInCount": doc["bytesInCounter"],
        "msgOutCount": doc["msgOutCounter"],
        "bytesOutCount": doc["bytesOutCounter"],
        "msgThroughputIn": doc["msgThroughputIn"],
        "msgThroughputOut": doc["msgThroughputOut"],
        "storageSize": doc["storageSize"],
        "backlogSize": doc["backlogSize"],
        "pendingAddEntriesCount": 0,
    }


def _topics(ctx: AdminContext) -> dict[str, Any]:
    ctx.stats.refresh()
    tree: dict[str, Any] = {}
    for snapshot in ctx.topics.statistics().topics:
        name = TopicName.parse(snapshot.name)
        topic = ctx.topics.loaded_topic(name)
        if topic is None:  # unloaded since the snapshot
            continue
        bundle = ctx.ownership.bundle_of(name).bundle_range.name
        domains = tree.setdefault(str(name.namespace), {}).setdefault(bundle, {})
        # Pulsar writes the "persistent" object of a bundle even when it is empty.
        domains.setdefault("persistent", {})
        domains.setdefault(name.domain.value, {})[snapshot.name] = _streamed(ctx.stats.stats(topic))
    return tree


async def topics(request: web.Request) -> web.Response:
    """``GET /admin/v2/broker-stats/topics``."""
    return json_response(_topics(context(request)))


async def load_report(request: web.Request) -> web.Response:
    """``GET /admin/v2/broker-stats/load-report``."""
    report = context(request).load_reporter.load_report()
    return web.Response(body=encode(report), content_type="application/json")


def add_routes(app: web.Application) -> None:
    """Register the broker-stats routes."""
    app.router.add_get("/admin/v2/broker-stats/load-report", load_report)
    app.router.add_get("/admin/v2/broker-stats/topics", topics)
