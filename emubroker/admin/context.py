"""What the admin handlers reach: the broker's services, gathered once by the composition root."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
from aiohttp import web

if TYPE_CHECKING:
    from emubroker.admin.health_check import HealthChecker
    from emubroker.admin.metrics import MetricsCollector
    from emubroker.admin.topic_stats import TopicStatsView
    from emubroker.auth import Security
    from emubroker.dynamic_config import DynamicConfig
    from emubroker.loadbalance.leader.election import LeaderElectionService
    from emubroker.loadbalance.ownership.bundle_split import BundleSplitter
    from emubroker.loadbalance.ownership.lookup import BundleLookup
    from emubroker.loadbalance.ownership.owner_calls import OwnerCalls
    from emubroker.loadbalance.ownership.table import OwnershipTable
    from emubroker.loadbalance.ownership.unloading import BundleUnloader
    from emubroker.loadbalance.reporting.reporter import LoadReporter
    from emubroker.loadbalance.trace.ring import TraceRing
    from emubroker.metadata import MetadataStore
    from emubroker.namespace_registry import NamespaceRegistry
    from emubroker.policies import PolicyStore
    from emubroker.schemas.service import SchemaService
    from emubroker.topics import TopicService
    from emubroker.topics.compaction import CompactionService
    from protocol.clock import Clock

__all__ = ["CONTEXT", "AdminContext"]


class AdminContext(msgspec.Struct, frozen=True, kw_only=True):
    """The services behind the REST API.

    Attributes:
        cluster: ``clusterName``.
        broker_id: This broker's id as Pulsar spells it, ``host:webServicePort``.
        service_url: ``pulsar://host:port`` of the binary protocol.
        web_service_url: ``http://host:port`` of this admin API.
        dynamic: The live configuration.
        metadata: The broker's metadata session (registered brokers, their reports).
        policies: Clusters, tenants and namespace policies in the metadata store.
        namespaces: The in-memory namespace view (updated by its metadata watch).
        topics: The topic service.
        ownership: Bundle ownership, for lookups.
        load_reporter: This broker's load report.
        health: Runs the health check against this broker.
        metrics: ``/metrics``.
        stats: Topic statistics in Pulsar's JSON shapes, with rates.
        schemas: The schema registry, when the broker has one.
        compaction: The compaction service, when the broker has one.
        security: Authentication and authorization of REST calls; None: neither.
        clock: The broker's clock (token expiry is checked against its wall time).
        leader_election: This broker's view of the cluster's leader (``leaderBroker``).
        lookup: Lookups across brokers (HTTP lookup, redirects to a topic's owner); None: every
            topic is served here.
        unloader: Unloads this broker's bundles (the unload endpoints).
        bundle_splitter: Splits bundles this broker owns (``.../{bundle}/split``).
        owner_calls: Unloads a bundle wherever it is owned (this broker, or its owner through
            the broker's own admin client, as Pulsar's ``pulsar().getAdminClient()``).
        trace_ring: This broker's recent load-balancer trace rows (the dashboard's timeline).
    """

    cluster: str
    broker_id: str
    service_url: str
    web_service_url: str
    dynamic: DynamicConfig
    metadata: MetadataStore
    policies: PolicyStore
    namespaces: NamespaceRegistry
    topics: TopicService
    ownership: OwnershipTable
    load_reporter: LoadReporter
    health: HealthChecker
    metrics: MetricsCollector
    stats: TopicStatsView
    schemas: SchemaService | None = None
    compaction: CompactionService | None = None
    security: Security | None = None
    clock: Clock | None = None
    leader_election: LeaderElectionService | None = None
    lookup: BundleLookup | None = None
    unloader: BundleUnloader | None = None
    bundle_splitter: BundleSplitter | None = None
    owner_calls: OwnerCalls | None = None
    trace_ring: TraceRing | None = None


CONTEXT = web.AppKey("emubroker.admin.context", AdminContext)
"""Where the admin application keeps its :class:`AdminContext`."""
