"""Topic admin calls go to the topic's owner, as Pulsar's ``validateTopicOwnership`` sends them.

One aiohttp middleware in front of every ``/admin/v2/{persistent|non-persistent}/...{topic}``
route that acts on one topic (a non-partitioned topic or a partition):

1. The broker looks the topic up as a lookup would (``loadbalance.ownership.lookup``), with the
   request's ``authoritative`` flag: a bundle nobody owns may be taken here, or placed by the
   leader.
2. If this broker is the owner, the call goes on. Otherwise it is a **307** to the owner's (or
   the broker to ask's) web service URL, same path and query, with ``authoritative`` replaced by
   whether this broker leads (Pulsar's ``newAuthoritative = isLeaderBroker()``).
3. A call on a persistent topic that exists nowhere (neither here nor in the shared store) is
   left to its handler's 404, except the topic's creation: a bad call places no bundle.
4. No broker available: 412 ``Failed to find ownership for topic:<topic>``; the bundle is being
   unloaded: 412 ``Can't find owner for topic <topic>``.

Calls on a partitioned topic's own name (its metadata, ``partitioned-stats``, ``unload``), on a
namespace's topic list and on schemas are answered by any broker: they read the shared metadata
store, or reach each partition at its owner (``partition_fanout``). A non-persistent topic's
``GET .../partitions`` is the exception: a non-partitioned one's existence is known only at its
owner, where Pulsar's ``NonPersistentTopics`` sends it too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from aiohttp import web

from emubroker.admin.errors import PRECONDITION_FAILED, RestError
from emubroker.admin.http import context, query_bool, topic_of
from emubroker.loadbalance.ownership.lookup import BundleUnloadingError
from emubroker.metadata.paths import managed_ledger_path
from emubroker.naming import TopicDomain
from protocol.errors import ServiceNotReadyError

if TYPE_CHECKING:
    from aiohttp.typedefs import Handler

    from emubroker.admin.context import AdminContext
    from emubroker.loadbalance.ownership.records import BrokerInfo
    from emubroker.naming import TopicName

__all__ = ["redirect_to_broker", "topic_ownership"]

_TOPIC_DEPTH: Final = 6  # /admin/v2/{domain}/{tenant}/{namespace}/{topic}
_TOPIC_ROUTE_PREFIXES: Final = ("/admin/v2/persistent/", "/admin/v2/non-persistent/")
_ANY_BROKER_SUFFIXES: Final = ("/partitions", "/partitioned-stats", "/partitioned-internalStats")


def redirect_to_broker(
    request: web.Request, broker: BrokerInfo, *, authoritative: bool
) -> web.HTTPTemporaryRedirect:
    """307 to the same path and query on ``broker``'s web service, ``authoritative`` replaced."""
    base = broker.http_url_tls if request.secure and broker.http_url_tls else broker.http_url
    target = urlsplit(base)
    url = request.url.with_scheme(target.scheme or "http").with_host(target.hostname or "")
    url = url.with_port(target.port).update_query(authoritative=str(authoritative).lower())
    return web.HTTPTemporaryRedirect(url)


def _is_topic_call(request: web.Request) -> bool:
    info = request.match_info
    if "topic" not in info or "domain" not in info:
        return False
    path = request.path
    if _reads_non_persistent_metadata(request):
        return True
    return path.startswith(_TOPIC_ROUTE_PREFIXES) and not path.endswith(_ANY_BROKER_SUFFIXES)


def _reads_non_persistent_metadata(request: web.Request) -> bool:
    # ``GET .../{topic}/partitions`` of a non-persistent topic: whether a non-partitioned one
    # exists is known only where it is loaded, so Pulsar's NonPersistentTopics checks the
    # ownership first (a partitioned one is still answered anywhere, see ``topic_ownership``).
    return (
        request.method == "GET"
        and request.path.startswith(_TOPIC_ROUTE_PREFIXES[1])
        and request.path.endswith("/partitions")
    )


def _creates(request: web.Request) -> bool:
    # ``PUT .../{topic}``: create a non-partitioned topic.
    return request.method == "PUT" and request.path.rstrip("/").count("/") == _TOPIC_DEPTH


async def _exists(ctx: AdminContext, name: TopicName) -> bool:
    """Whether a topic exists here or in the shared store.

    Non-persistent topics only live on their owner: they are assumed to exist.
    """
    if name.domain is not TopicDomain.PERSISTENT or ctx.topics.topic_exists(name):
        return True
    return await ctx.metadata.exists(managed_ledger_path(name))


@web.middleware
async def topic_ownership(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Send a topic's admin call to its owner (see the module docstring)."""
    ctx = context(request)
    lookup = ctx.lookup
    if lookup is None or not _is_topic_call(request):
        return await handler(request)
    name = topic_of(request)
    if not ctx.namespaces.exists(name.namespace) or ctx.topics.partitions_of(name) > 0:
        return await handler(request)  # the handler's own 404, or a partitioned topic's call
    if not _creates(request) and not await _exists(ctx, name):
        return await handler(request)  # its own 404: a bad call places no bundle
    try:
        answer = await lookup.lookup_topic(name, authoritative=query_bool(request, "authoritative"))
    except BundleUnloadingError:
        raise RestError(PRECONDITION_FAILED, f"Can't find owner for topic {name}") from None
    except ServiceNotReadyError:
        raise RestError(PRECONDITION_FAILED, f"Failed to find ownership for topic:{name}") from None
    if not answer.redirect and answer.broker == ctx.ownership.me:
        return await handler(request)
    leading = ctx.leader_election is not None and ctx.leader_election.is_leader()
    raise redirect_to_broker(request, answer.broker, authoritative=leading)
