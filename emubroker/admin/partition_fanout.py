"""A partitioned topic's own-name admin calls reach every partition, wherever it is owned.

Pulsar's ``PersistentTopicsBase`` answers a call on a partitioned topic's name on whichever
broker it reaches, and acts on each partition where that partition lives:

- ``PUT .../{topic}/unload`` (``internalUnloadTopic``): every partition is unloaded through the
  broker's own admin client (``topics().unloadAsync(partition)``), so at its owner; the first
  failure is the answer (404 stays 404, another status passes through).
- ``GET .../{topic}/partitioned-stats`` (``internalGetPartitionedStats``): a partition this
  broker owns is read here, any other through the admin client at its owner
  (``getStatsAsync``); the answers are summed (``PartitionedTopicStatsImpl.add``). A partition
  whose stats cannot be had is left out, as Pulsar leaves out a failed future.
- ``DELETE .../{topic}/partitions`` (``internalDeletePartitionedTopic``): every partition is
  deleted through the admin client, so at its owner, a 404 (never used) accepted; then the
  metadata goes. :func:`delete_partitions_elsewhere` does the other owners' part; a persistent
  partition stored nowhere was never used and places no bundle.

:func:`partition_owner` finds where a partition lives as a lookup does (an unowned partition is
placed, as Pulsar's ownership check would); :func:`call_broker` makes the call at that broker
with the broker client's credentials (``brokerClientAuthentication*``), following a redirect
when the broker answers with one (it has handed the bundle on meanwhile).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Final

import aiohttp

from emubroker.admin.errors import NOT_FOUND, PRECONDITION_FAILED, RestError
from emubroker.admin.owner_admin import CONNECT_TIMEOUT, broker_client_headers
from emubroker.loadbalance.ownership.lookup import BundleUnloadingError
from emubroker.metadata.paths import managed_ledger_path
from emubroker.naming import TopicDomain
from protocol.errors import ServiceNotReadyError

if TYPE_CHECKING:
    from emubroker.admin.context import AdminContext
    from emubroker.loadbalance.ownership.records import BrokerInfo
    from emubroker.naming import TopicName

__all__ = ["call_broker", "delete_partitions_elsewhere", "partition_owner", "topic_path"]

log = logging.getLogger(__name__)

MAX_REASON: Final = 500
"""Characters of another broker's error body kept in ours."""


def topic_path(name: TopicName, suffix: str) -> str:
    """``/admin/v2/{domain}/{tenant}/{namespace}/{topic}{suffix}``."""
    domain = "persistent" if name.domain is TopicDomain.PERSISTENT else "non-persistent"
    return f"/admin/v2/{domain}/{name.namespace}/{name.local_name}{suffix}"


async def partition_owner(ctx: AdminContext, partition: TopicName) -> BrokerInfo | None:
    """The broker to ask about ``partition``; None when it is this one.

    Raises:
        RestError: 412 when no broker can own it now (Pulsar's ownership check messages).
    """
    if ctx.lookup is None:
        return None  # a broker without lookups serves every topic itself
    try:
        answer = await ctx.lookup.lookup_topic(partition)
    except BundleUnloadingError:
        raise RestError(PRECONDITION_FAILED, f"Can't find owner for topic {partition}") from None
    except ServiceNotReadyError:
        raise RestError(
            PRECONDITION_FAILED, f"Failed to find ownership for topic:{partition}"
        ) from None
    if not answer.redirect and answer.broker == ctx.ownership.me:
        return None
    return answer.broker


async def call_broker(
    ctx: AdminContext, broker: BrokerInfo, method: str, path: str
) -> tuple[int, Any]:
    """One admin call at ``broker``: its status and decoded JSON body (None when empty).

    Raises:
        RestError: 500 when the broker cannot be reached.
    """
    base = broker.http_url or broker.http_url_tls
    url = f"{base}{path}"
    timeout = aiohttp.ClientTimeout(sock_connect=CONNECT_TIMEOUT)
    headers = broker_client_headers(ctx.dynamic.config)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.request(method, url, headers=headers) as reply,
        ):
            text = await reply.text()
            if reply.status >= 300:
                return reply.status, _reason(text)
            return reply.status, await reply.json() if text else None
    except (aiohttp.ClientError, ValueError) as exc:
        raise RestError(500, f"{method} {url} failed: {exc}") from exc


async def delete_partitions_elsewhere(
    ctx: AdminContext, partitions: list[TopicName], *, force: bool
) -> None:
    """Delete each partition another broker owns, at that broker (see the module docstring).

    The partitions this broker owns are left to the caller, to delete here.

    Raises:
        RestError: An owner's failure other than 404 (its status and reason), or 412/500 when
            no owner can be found or reached.
    """
    query = f"?force={str(force).lower()}"
    for partition in partitions:
        if partition.domain is TopicDomain.PERSISTENT and not await ctx.metadata.exists(
            managed_ledger_path(partition)
        ):
            continue  # never used: nothing to delete anywhere
        owner = await partition_owner(ctx, partition)
        if owner is None:
            continue
        status, reason = await call_broker(ctx, owner, "DELETE", topic_path(partition, query))
        if status >= 300 and status != NOT_FOUND:
            raise RestError(status, str(reason))


def _reason(text: str) -> str:
    try:
        reason = json.loads(text).get("reason")
    except (ValueError, AttributeError):
        reason = None
    return str(reason if reason else text)[:MAX_REASON]
