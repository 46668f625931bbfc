"""``POST .../{topic}/terminate`` and ``.../terminate/partitions``: topic termination.

Pulsar's ``PersistentTopicsBase.internalTerminateAsync`` and ``internalTerminatePartitionedTopic``:

* ``POST TOPIC/terminate`` (at the topic's owner, ``topic_owner``) terminates a non-partitioned
  topic or one partition (``topics.Topic.terminate``) and answers **200** with the last message
  id as Jackson writes a ``MessageIdImpl`` (``partitionIndex`` -1, ``entryId`` -1 for an empty
  topic); terminating again answers the same id. A partitioned topic's own name is **405**
  "Termination of a partitioned topic is not allowed", a non-persistent topic **405**
  "Termination of a non-persistent topic is not allowed", an unknown topic **404**.
* ``POST TOPIC/terminate/partitions`` (any broker) terminates every partition, each at its owner
  (``partition_fanout``), and answers **200** ``{"<partition>": <message id>, ...}``; a
  non-partitioned topic or a partition's name is **405** "Termination of a non-partitioned topic
  is not allowed using partitioned-terminate, please use terminate commands".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from emubroker.admin.errors import METHOD_NOT_ALLOWED, NOT_FOUND, RestError
from emubroker.admin.http import context, json_response, topic_of
from emubroker.admin.partition_fanout import call_broker, partition_owner, topic_path
from emubroker.admin.routes_topics import TOPIC, check_topic_namespace, load_topic

if TYPE_CHECKING:
    from emubroker.admin.context import AdminContext
    from emubroker.naming import TopicName

__all__ = ["add_routes"]

NOT_PARTITIONED: Final = (
    "Termination of a non-partitioned topic is not allowed using partitioned-terminate"
    ", please use terminate commands"
)


def _message_id(ledger_id: int, entry_id: int) -> dict[str, int]:
    # Jackson's view of the MessageIdImpl PersistentTopic.terminate answers (partition -1), as
    # routes_messages writes a non-batch message id.
    return {
        "ledgerId": ledger_id,
        "entryId": entry_id,
        "partitionIndex": -1,
        "batchIndex": -1,
        "batchSize": 0,
    }


async def _terminate(ctx: AdminContext, name: TopicName) -> dict[str, int]:
    check_topic_namespace(ctx, name)
    if ctx.topics.partitions_of(name):
        raise RestError(METHOD_NOT_ALLOWED, "Termination of a partitioned topic is not allowed")
    topic = (await load_topic(ctx, name)).as_persistent()
    if topic is None:
        raise RestError(METHOD_NOT_ALLOWED, "Termination of a non-persistent topic is not allowed")
    ledger_id, entry_id = await topic.terminate()
    return _message_id(ledger_id, entry_id)


async def terminate(request: web.Request) -> web.Response:
    """``POST TOPIC/terminate``: terminate one topic, answer its last message id."""
    return json_response(await _terminate(context(request), topic_of(request)))


async def terminate_partitions(request: web.Request) -> web.Response:
    """``POST TOPIC/terminate/partitions``: terminate every partition of a partitioned topic."""
    ctx = context(request)
    name = topic_of(request)
    check_topic_namespace(ctx, name)
    partitions = ctx.topics.partitions_of(name)
    if name.partition_index >= 0 or not partitions:
        raise RestError(METHOD_NOT_ALLOWED, NOT_PARTITIONED)
    answers: dict[str, Any] = {}
    for index in range(partitions):
        partition = name.partition(index)
        owner = await partition_owner(ctx, partition)
        if owner is None:
            answers[str(index)] = await _terminate(ctx, partition)
            continue
        status, body = await call_broker(ctx, owner, "POST", topic_path(partition, "/terminate"))
        if status == NOT_FOUND:
            raise RestError(NOT_FOUND, f"Topic {name} not found")
        if status != web.HTTPOk.status_code:
            reason = body.get("reason") if isinstance(body, dict) else None
            raise RestError(status, str(reason or body))
        answers[str(index)] = body
    return json_response(answers)


def add_routes(app: web.Application) -> None:
    """Register the termination routes of both domains."""
    router = app.router
    router.add_post(f"{TOPIC}/terminate", terminate)
    router.add_post(f"{TOPIC}/terminate/partitions", terminate_partitions)
