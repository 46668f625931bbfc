"""What the admin REST API serves (``AdminContext``), built from the broker's services."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emubroker.admin import AdminContext, MetricsCollector, RateTracker, TopicStatsView
from emubroker.admin.bundle_wiring import build_bundle_splitter
from emubroker.admin.metrics_loadbalance import (
    render_leader_unload_metrics,
    render_load_balancing_metrics,
)
from emubroker.app.broker import broker_id_of
from emubroker.auth import SecurityConfigError
from emubroker.auth.broker_client import client_certificate, plugin_kind
from emubroker.policies import PolicyStore

if TYPE_CHECKING:
    from emubroker.admin.health_check import HealthChecker
    from emubroker.auth import Security
    from emubroker.config import BrokerConfig
    from emubroker.dynamic_config import DynamicConfig
    from emubroker.loadbalance.leader.election import LeaderElectionService
    from emubroker.loadbalance.leader.tasks import LoadBalancerLeader
    from emubroker.loadbalance.ownership.lookup import BundleLookup
    from emubroker.loadbalance.ownership.owner_calls import OwnerCalls
    from emubroker.loadbalance.ownership.table import OwnershipTable
    from emubroker.loadbalance.ownership.unloading import BundleUnloader
    from emubroker.loadbalance.reporting.reporter import LoadReporter
    from emubroker.loadbalance.trace.ring import TraceRing
    from emubroker.metadata import MetadataStore
    from emubroker.namespace_registry import NamespaceRegistry
    from emubroker.schemas import SchemaService
    from emubroker.topics.compaction import CompactionService
    from emubroker.topics.handles import TopicHandle
    from emubroker.topics.service import TopicService
    from protocol.clock import Clock
    from storage_stub.ledger import LedgerStore


def broker_client_certificate(config: BrokerConfig) -> bytes | None:
    """The health check's client certificate (DER), if the broker client presents one."""
    # Unusable parameters fail its CONNECT instead (its credentials say why), so none is
    # presented then.
    kind = plugin_kind(config.brokerClientAuthenticationPlugin)
    try:
        return client_certificate(kind, config.brokerClientAuthenticationParameters)
    except (ValueError, SecurityConfigError):
        return None


def build_admin_context(
    dynamic: DynamicConfig,
    store: MetadataStore,
    namespaces: NamespaceRegistry,
    topics: TopicService,
    ownership: OwnershipTable,
    ledgers: LedgerStore,
    clock: Clock,
    *,
    schemas: SchemaService | None,
    compaction: CompactionService | None,
    leader_election: LeaderElectionService,
    lookup: BundleLookup,
    unloader: BundleUnloader,
    load_reporter: LoadReporter,
    load_leader: LoadBalancerLeader,
    health: HealthChecker,
    owner_calls: OwnerCalls,
    security: Security | None = None,
    trace_ring: TraceRing | None = None,
) -> AdminContext:
    """The admin API's context: its views of the broker's services, its metrics and stats."""
    config = dynamic.config
    broker_id = broker_id_of(config)
    tracker = RateTracker(clock=clock)

    def load_balancing_metrics() -> str:
        return render_load_balancing_metrics(
            load_reporter.statistics(),
            cluster=config.clusterName,
            broker=config.advertised_host(),
            bundles=dynamic.config.exposeBundlesMetricsInPrometheus,
        ) + render_leader_unload_metrics(load_leader, dynamic.config)

    def dedup_enabled(topic: TopicHandle) -> bool:
        policies = namespaces.policies(topic.name.namespace)
        if policies is not None and policies.deduplicationEnabled is not None:
            return policies.deduplicationEnabled
        return dynamic.config.brokerDeduplicationEnabled

    stats = TopicStatsView(
        topics,
        tracker,
        ledgers,
        broker_id=broker_id,
        dedup_enabled=dedup_enabled,
        compaction_record=None if compaction is None else compaction.record,
    )
    return AdminContext(
        cluster=config.clusterName,
        broker_id=broker_id,
        service_url=ownership.me.service_url,
        # The configured address even when the API is not served (component tests).
        web_service_url=f"http://{broker_id}",
        dynamic=dynamic,
        metadata=store,
        policies=PolicyStore(store),
        namespaces=namespaces,
        topics=topics,
        ownership=ownership,
        load_reporter=load_reporter,
        health=health,
        metrics=MetricsCollector(
            topics.statistics,
            clock=clock,
            cluster=config.clusterName,
            tracker=tracker,
            leader_election=leader_election.statistics,
            load_balancing=load_balancing_metrics,
        ),
        stats=stats,
        schemas=schemas,
        compaction=compaction,
        leader_election=leader_election,
        lookup=lookup,
        unloader=unloader,
        owner_calls=owner_calls,
        security=security,
        clock=clock,
        trace_ring=trace_ring,
        bundle_splitter=build_bundle_splitter(
            store,
            ownership,
            clock,
            dynamic=dynamic,
            namespaces=namespaces,
            topics=topics,
            stats=stats,
            unload=lambda bundle: unloader.unload(bundle, reason="split"),
        ),
    )
