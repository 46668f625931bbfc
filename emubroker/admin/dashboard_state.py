"""The live dashboard's JSON (docs/dashboard.md): the whole cluster, as any broker sees it.

What every broker can read for itself comes from the metadata store: the registered brokers and
their load reports (``/loadbalance/brokers/<id>``), each namespace's bundles and their owners
(the ``/namespace/...`` lock nodes), the leader. What only a broker knows, its loaded topics, its
load report brought up to date and its recent load-balancer trace rows
(``loadbalance.trace.ring``), it serves as its *local* part
(``/dashboard/api/local``), and the broker asked for the cluster's state gathers the other
brokers' local parts over HTTP, with the caller's credentials, within :data:`PEER_TIMEOUT`. A
broker that does not answer in time is shown as unreachable, with what the store says of it.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import aiohttp
import anyio

from emubroker.dashboard.model import (
    DECISIONS,
    decision_of,
    load_of,
    namespaces_of,
)
from emubroker.loadbalance.runtime.broker_registry import read_reports
from emubroker.loadbalance.trace.records import report_record
from emubroker.naming import BundleRange, NamespaceBundle, TopicName

if TYPE_CHECKING:
    from emubroker.admin.context import AdminContext
    from emubroker.naming import NamespaceName
    from emubroker.topics.stats import TopicStats

__all__ = [
    "PEER_TIMEOUT",
    "TIMELINE_ROWS",
    "LocalParts",
    "cluster_state",
    "http_local_parts",
    "local_state",
]

log = logging.getLogger(__name__)

PEER_TIMEOUT: Final = 0.8
"""Seconds to wait for another broker's local part: the page polls every second, so a broker
slower than this is shown as unreachable rather than holding the whole picture back."""

TIMELINE_ROWS: Final = 200
"""Decisions sent to the page, newest kept: what fits a scrolling list on a screen many times."""


def _limit(ctx: AdminContext, topic: TopicName, subscription: str) -> dict[str, Any] | None:
    """The subscription's dispatch limit per second (its own level's, else its topic's)."""
    throttling = ctx.topics.throttling
    if throttling is None:
        return None
    try:
        throttle = throttling.subscription_throttle(topic, subscription)
    except KeyError:
        return None
    for limiter in (throttle.limiter, throttling.topic_limiter(topic)):
        rate = None if limiter is None else limiter.dispatch_rate
        if rate is not None and rate.enabled:
            period = max(rate.ratePeriodInSecond, 1)
            msg, byte = rate.dispatchThrottlingRateInMsg, rate.dispatchThrottlingRateInByte
            return {  # per second; None: that dimension is not limited
                "msg": msg / period if msg > 0 else None,
                "bytes": byte / period if byte > 0 else None,
                "relative": rate.relativeToPublishRate,
            }
    return None


def _topic(ctx: AdminContext, topic: TopicStats) -> dict[str, Any]:
    rates = ctx.stats.rates(topic.name)
    name = TopicName.parse(topic.name)
    subscriptions = []
    for sub in topic.subscriptions:
        sub_rates = ctx.stats.subscription_rates(topic.name, sub.name)
        subscriptions.append(
            {
                "name": sub.name,
                "type": sub.type,
                "consumers": sub.consumers,
                "backlog": sub.backlog,
                "rateOut": sub_rates.msg_out,
                "throughputOut": sub_rates.bytes_out,
                "limit": _limit(ctx, name, sub.name),
            }
        )
    return {
        "name": topic.name,
        "broker": ctx.broker_id,
        "brokers": [ctx.broker_id],
        "rateIn": 0.0 if rates is None else rates.msg_in,
        "rateOut": 0.0 if rates is None else rates.msg_out,
        "throughputIn": 0.0 if rates is None else rates.bytes_in,
        "throughputOut": 0.0 if rates is None else rates.bytes_out,
        "backlog": topic.backlog,
        "producers": topic.producers,
        "consumers": topic.consumers,
        "subscriptions": subscriptions,
    }


def local_state(ctx: AdminContext) -> dict[str, Any]:
    """What only this broker knows: its loaded topics and its recent decisions."""
    ctx.stats.refresh()
    topics = [
        _topic(ctx, topic)
        for topic in ctx.topics.statistics().topics
        # The heartbeat namespaces are the health check's, not the user's traffic.
        if not topic.namespace.startswith("pulsar/")
    ]
    rows = [] if ctx.trace_ring is None else ctx.trace_ring.rows()
    decisions = [decision_of(row) for row in rows if row.event in DECISIONS]
    # The report brought up to date (what broker-stats/load-report answers): the stored one is
    # rewritten only on a large change or after loadBalancerReportUpdateMaxIntervalMinutes.
    report = ctx.load_reporter.load_report()
    load = load_of(report_record(ctx.broker_id, report, ctx.dynamic.config, wall_ns=0, monotonic=0))
    return {"broker": ctx.broker_id, "load": load, "topics": topics, "decisions": decisions}


async def _fetch_local(
    session: aiohttp.ClientSession, url: str, headers: dict[str, str]
) -> dict[str, Any] | None:
    try:
        async with session.get(f"{url}/dashboard/api/local", headers=headers) as response:
            if response.status != 200:
                log.info("dashboard: %s answered %d", url, response.status)
                return None
            body: dict[str, Any] = await response.json()
            return body
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        log.debug("dashboard: %s unreachable: %s", url, exc)
        return None


async def _owners(ctx: AdminContext) -> list[tuple[NamespaceBundle, str | None]]:
    pairs: list[tuple[NamespaceBundle, str | None]] = []
    for namespace in ctx.namespaces.namespaces():
        for bundle in _bundles(ctx, namespace):
            owner = await ctx.ownership.get_owner(bundle)
            broker = None
            if owner is not None:
                url = owner.broker.http_url or owner.broker.http_url_tls
                broker = url.removeprefix("http://").removeprefix("https://")
            pairs.append((bundle, broker))
    return pairs


def _bundles(ctx: AdminContext, namespace: NamespaceName) -> list[NamespaceBundle]:
    boundaries = ctx.ownership.boundaries(namespace)
    return [
        NamespaceBundle(namespace, BundleRange(lower, upper))
        for lower, upper in itertools.pairwise(boundaries)
    ]


LocalParts: TypeAlias = Callable[
    [dict[str, str], dict[str, str]], Awaitable[dict[str, dict[str, Any] | None]]
]
"""``parts(peers, headers)``: the local part of each peer (broker id -> its admin URL), None for
one that did not answer; ``headers`` are the caller's credentials."""


async def http_local_parts(
    peers: dict[str, str], headers: dict[str, str]
) -> dict[str, dict[str, Any] | None]:
    """The other brokers' local parts over HTTP, within :data:`PEER_TIMEOUT` (the default)."""
    parts: dict[str, dict[str, Any] | None] = {}
    timeout = aiohttp.ClientTimeout(total=PEER_TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout) as session:

        async def fetch(broker: str, url: str) -> None:
            parts[broker] = await _fetch_local(session, url, headers)

        async with anyio.create_task_group() as tg:
            for broker, url in peers.items():
                tg.start_soon(fetch, broker, url)
    return parts


async def cluster_state(
    ctx: AdminContext, authorization: str | None, *, local_parts: LocalParts = http_local_parts
) -> dict[str, Any]:
    """The page's state: brokers and loads, leader, owners, topics and decisions.

    Args:
        ctx: This broker's services.
        authorization: The caller's ``Authorization`` header, passed on to the other brokers.
        local_parts: How the other brokers' local parts are gathered (a simulation, whose
            brokers have no HTTP server, reads them in its process).

    Raises:
        MetadataStoreError: The metadata store failed (the page says so and keeps polling).
    """
    reports = await read_reports(ctx.metadata)
    election = ctx.leader_election
    current = None if election is None else election.current_leader()
    leader = None if current is None else current.id
    config = ctx.dynamic.config
    clock_ns = 0 if ctx.clock is None else ctx.clock.wall_ns()
    parts: dict[str, dict[str, Any] | None] = {ctx.broker_id: local_state(ctx)}
    peers = {
        broker: report.web_service_url or report.web_service_url_tls or f"http://{broker}"
        for broker, report in reports.items()
        if broker != ctx.broker_id
    }
    headers = {} if authorization is None else {"Authorization": authorization}
    parts.update(await local_parts(peers, headers))
    brokers = []
    for broker, report in sorted(reports.items()):
        part = parts.get(broker)
        stored = load_of(report_record(broker, report, config, wall_ns=0, monotonic=0.0))
        brokers.append(
            {
                "id": broker,
                "leader": broker == leader,
                "reachable": part is not None,
                # A broker that does not answer shows its last report in the store.
                "load": stored if part is None else part["load"],
            }
        )
    topics: list[dict[str, Any]] = []
    decisions: list[dict[str, Any]] = []
    for part in parts.values():
        if part is not None:
            topics.extend(part["topics"])
            decisions.extend(part["decisions"])
    topics.sort(key=lambda topic: topic["name"])
    decisions.sort(key=lambda row: row["at_ms"])
    return {
        "mode": "live",
        "self": ctx.broker_id,
        "cluster": ctx.cluster,
        "now_ms": clock_ns // 1_000_000,
        "leader": leader,
        "brokers": brokers,
        "namespaces": namespaces_of(await _owners(ctx)),
        "topics": topics,
        "decisions": decisions[-TIMELINE_ROWS:],
    }
