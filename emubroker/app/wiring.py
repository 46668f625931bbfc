"""The composition root: builds the broker's services, wires them and serves them.

``open_broker(config)`` is an async context manager yielding a running :class:`Broker`: metadata
store (in-memory unless one is given), the in-process ledger store, the topic service, the
ownership table, the binary-protocol listener and the admin HTTP server. ``serve_broker`` is the
``serve_*`` form (STYLE.md §1.15) used by the CLI.

The topic service asks a :class:`NamespaceRegistry`, an in-memory view of the namespaces'
metadata nodes kept current by a metadata watch.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from emubroker.admin.health_check import HealthChecker, heartbeat_namespaces
from emubroker.admin.owner_admin import build_owner_calls, http_take_over
from emubroker.app.admin_context import broker_client_certificate, build_admin_context
from emubroker.app.bootstrap import CLUSTER_TRANSACTION_COORDINATORS, bootstrap_metadata
from emubroker.app.broker import Broker, broker_id_of
from emubroker.app.listeners import bind_ports, serve_ports
from emubroker.auth import Security
from emubroker.auth.broker_client import connect_credentials, plugin_kind
from emubroker.config import BrokerConfig
from emubroker.dynamic_config import DynamicConfig
from emubroker.handlers import BrokerServices
from emubroker.handlers.lookups import LookupLimit
from emubroker.loadbalance.leader.election import LeaderElectionService
from emubroker.loadbalance.leader.tasks import LoadBalancerLeader
from emubroker.loadbalance.load_managers import load_manager
from emubroker.loadbalance.ownership.assignment import LoadManagerSelector
from emubroker.loadbalance.ownership.lookup import BundleLookup
from emubroker.loadbalance.ownership.placement_policies import PlacementPolicyCache
from emubroker.loadbalance.ownership.records import BrokerInfo
from emubroker.loadbalance.ownership.table import OwnershipTable
from emubroker.loadbalance.ownership.unloading import BundleUnloader
from emubroker.loadbalance.reporting.wiring import build_load_reporter, load_balancer_trace
from emubroker.loadbalance.runtime.split_runtime import layout_from
from emubroker.loadbalance.trace.ring import TraceRing
from emubroker.metadata import MemoryMetadataStore
from emubroker.namespace_registry import NamespaceRegistry
from emubroker.naming import NamespaceName
from emubroker.net import NetGuards, TrafficCounter
from emubroker.policies import PolicyStore
from emubroker.ratelimit.quotas import throttling_config_from
from emubroker.schemas import SchemaRegistry, SchemaService
from emubroker.storage import MemoryBackend
from emubroker.topics.compaction import CompactionService
from emubroker.topics.features import TopicFeatures
from emubroker.topics.service import TopicService
from emubroker.topics.settings import TopicSettings
from emubroker.topics.sinks import HeldCloses
from emubroker.topics.throttling import DispatchThrottling
from emubroker.topics.trace_sink import DispatchTraceSink
from protocol.clock import AnyioClock
from storage_stub.ledger import LedgerStore

if TYPE_CHECKING:
    from anyio.abc import TaskStatus

    from emubroker.loadbalance.ownership.owner_calls import OwnerAdmin
    from emubroker.loadbalance.ownership.unloading import HeldClients, TakeOver
    from emubroker.metadata import MetadataStore
    from emubroker.naming import NamespaceBundle, TopicName
    from emubroker.policies import Policies
    from emubroker.storage import LedgerBackend
    from protocol.clock import Clock

log = logging.getLogger(__name__)


def topic_settings(config: BrokerConfig) -> TopicSettings:
    """The topic layer's settings from the broker configuration."""
    return TopicSettings(config)


def _record_bundles(
    ownership: OwnershipTable, namespace: NamespaceName, policies: Policies | None
) -> None:
    # A namespace's bundle boundaries come from its policies (created with a count or explicit
    # boundaries through the admin API); lookups must hash topics into those bundles.
    if policies is not None and policies.bundles is not None and policies.bundles.boundaries:
        try:
            boundaries = tuple(int(b, 16) for b in policies.bundles.boundaries)
        except ValueError:
            log.warning("namespace %s: unreadable bundle boundaries; using defaults", namespace)
            return
        ownership.set_boundaries(namespace, boundaries)


@asynccontextmanager
async def open_broker(
    config: BrokerConfig | None = None,
    *,
    clock: Clock | None = None,
    metadata: MetadataStore | None = None,
    listen: bool = True,
    admin: bool = True,
    ledgers: LedgerBackend | None = None,
    owner_admin: OwnerAdmin | None = None,
    take_over: TakeOver | None = None,
    trace_writes_in_thread: bool = True,
    alone: bool = False,
) -> AsyncIterator[Broker]:
    """Start a broker; stop it (closing every connection) when the block exits.

    Args:
        config: The configuration; ``None`` for Pulsar's defaults.
        clock: Defaults to the event loop's clock.
        metadata: A metadata store session to use (e.g. shared by several brokers); by default a
            private in-memory one, closed with the broker.
        listen: Bind the binary protocol port; without it, only :meth:`Broker.start_session`
            serves connections (component tests over in-memory streams).
        admin: Serve the admin HTTP API (needs the asyncio backend: aiohttp).
        ledgers: Where entries live (see :func:`open_storage`); by default an in-memory
            ledger store. With a durable backend (the stub), ledger lists and cursors are
            persisted in ``metadata`` and topics are recovered from them.
        owner_admin: How the leader reaches other brokers to unload or split their bundles;
            by default their admin REST API (in-process clusters route the calls themselves).
        take_over: How a bundle transferred from this broker is taken by its destination
            (``ownership.unloading`` rule 5); by default the destination's HTTP lookup when this
            broker serves its admin API and reaches the others over theirs, else no transfers.
        trace_writes_in_thread: Write the dispatch and load-balancer traces in worker threads;
            a virtual-time run writes them on the loop (see ``DispatchTraceSink``).
        alone: This broker is its cluster's only one (``emubroker standalone``): who leads is
            then no news, and the leader election logs it at DEBUG instead of INFO; and the
            metadata is bootstrapped as ``pulsar standalone`` does, else as ``pulsar
            initialize-cluster-metadata`` does (see ``CLUSTER_TRANSACTION_COORDINATORS``).

    Yields:
        The running broker.

    Raises:
        OSError: A port cannot be bound.
    """
    config = config or BrokerConfig()
    clock = clock or AnyioClock()
    host = config.advertised_host()
    async with AsyncExitStack() as stack:
        store = metadata
        if store is None:
            store = await stack.enter_async_context(MemoryMetadataStore())
        ports = await bind_ports(stack, config, listen=listen, admin=admin)
        config = ports.config
        service_url, admin_url = ports.service_url, ports.admin_url
        service_url_tls, admin_url_tls = ports.service_url_tls, ports.admin_url_tls

        await bootstrap_metadata(
            store,
            config,
            http_url=admin_url,
            tls_urls=(admin_url_tls, service_url_tls),
            wall_time=clock.wall_ms() / 1000,
            transaction_coordinators=0 if alone else CLUSTER_TRANSACTION_COORDINATORS,
        )
        dynamic = DynamicConfig(config, store)
        await dynamic.load()  # overrides set through the admin API before this broker started
        # ownership is bound below, before the registry's watch first calls back.
        # Dispatch throttling (issue 5): one broker limiter, live policy and config changes.
        trace_sink = (
            DispatchTraceSink(
                config.emubrokerDispatchTraceDir,
                broker_id=f"{host}:{config.webServicePort}",
                flush_every=config.emubrokerDispatchTraceFlushRecords,
                in_thread=trace_writes_in_thread,
            )
            if config.emubrokerDispatchTraceDir
            else None
        )
        throttling = DispatchThrottling(
            throttling_config_from(dynamic.config),
            clock=clock,
            cluster=config.clusterName,
            namespace_policies=lambda ns: namespaces.policies(ns),
            trace=trace_sink,
            store=store,
        )
        await throttling.load_topic_policies()

        def namespace_changed(ns: NamespaceName, policies: Policies | None) -> None:
            _record_bundles(ownership, ns, policies)
            throttling.namespace_changed(ns, policies)
            # Pulsar re-checks message expiry when a namespace's policies change.
            topics.check_message_expiry(ns)

        namespaces = NamespaceRegistry(on_change=namespace_changed)
        # A broker's heartbeat namespaces exist without policies (Pulsar's NamespaceService
        # registers them at start): its health check produces and reads there.
        heartbeat = frozenset(heartbeat_namespaces(config.clusterName, broker_id_of(config)))

        def namespace_exists(namespace: NamespaceName) -> bool:
            return namespace in heartbeat or namespaces(namespace)

        ledger_store = LedgerStore()

        def topic_strategy(topic: TopicName) -> str | None:
            policies = throttling.topic_policies(topic)
            return None if policies is None else policies.schemaCompatibilityStrategy

        features = TopicFeatures(config, store, topic_strategy)
        topics = await stack.enter_async_context(
            TopicService(
                config=topic_settings(dynamic.config),
                clock=clock,
                ledgers=MemoryBackend(ledger_store) if ledgers is None else ledgers,
                namespaces=namespace_exists,
                metadata=store,
                features=features,
                throttling=throttling,
                namespace_policies=namespaces.policies,
                hand_overs=lambda name: ownership.hand_overs(ownership.bundle_of(name)),
            ).running()
        )
        schema_registry = SchemaRegistry(store, clock)
        # Entered after the topics: it stops (cancelling running compactions) before they close.
        compaction = await stack.enter_async_context(
            CompactionService(
                topics, clock=clock, retain_null_key=config.topicCompactionRetainNullKey
            ).running()
        )
        ownership = OwnershipTable(
            store,
            # The configured admin address even when it is not served (component tests).
            BrokerInfo(
                service_url,
                admin_url or f"http://{broker_id_of(config)}",
                service_url_tls,
                admin_url_tls,
            ),
            bundles_per_namespace=config.defaultNumberOfNamespaceBundles,
            clock=clock,
        )

        async def close_bundle_topics(
            bundle: NamespaceBundle, graceful: bool, held: HeldClients | None
        ) -> int:
            assert held is None or isinstance(held, HeldCloses)  # the unloader's hold below
            return await topics.close_topics(
                lambda name: ownership.bundle_of(name) == bundle, graceful=graceful, held=held
            )

        unloader = BundleUnloader(
            ownership,
            close_bundle_topics,
            clock=clock,
            unload_timeout=config.namespaceBundleUnloadingTimeoutMs / 1000,
            # The ring is built with the load balancer below, before any unload can run.
            trace=lambda record: trace_ring.append(record),
            broker_id=broker_id_of(config),
            transfers=lambda: load_manager(dynamic.config).transfers(dynamic.config),
            hold=HeldCloses,
            # A transfer's destination is reached over its admin API; a harness that reaches
            # the brokers its own way (owner_admin) passes its own take-over, or has none.
            take_over=(
                http_take_over(store, lambda: dynamic.config)
                if take_over is None and admin_url and owner_admin is None
                else take_over
            ),
        )
        ownership.on_lost = unloader.lost
        leader_election = LeaderElectionService(
            store,
            clock,
            broker_id=broker_id_of(config),
            service_url=f"http://{broker_id_of(config)}",
            announce=logging.DEBUG if alone else logging.INFO,
        )
        placement_policies = PlacementPolicyCache(store, config.clusterName)
        placement = LoadManagerSelector(
            store,
            clock,
            broker_id=broker_id_of(config),
            config=lambda: dynamic.config,
            policies=placement_policies.policies,
        )
        lookup = BundleLookup(
            store,
            ownership,
            leader_election,
            placement,
            broker_id=broker_id_of(config),
        )
        policy_store = PolicyStore(store)
        security = Security.from_config(
            config, namespace_policies=namespaces.policies, tenant_info=policy_store.get_tenant
        )
        services = BrokerServices(
            config=config,
            topics=topics,
            ownership=ownership,
            namespace_exists=namespace_exists,
            read_namespace=lambda namespace: namespaces.read(store, namespace),
            listeners=config.listeners(),
            schemas=SchemaService(schema_registry, features),
            security=security,
            clock=clock,
            lookup=lookup,
            lookups=LookupLimit(dynamic.config.maxConcurrentLookupRequest),
        )
        guards = NetGuards.from_config(dynamic.config)
        dynamic.subscribe(lambda live: guards.publish_buffer.resize(live.publish_buffer_bytes()))
        dynamic.subscribe(lambda live: services.lookups.resize(live.maxConcurrentLookupRequest))
        dynamic.subscribe(lambda live: topics.reconfigure(topic_settings(live)))
        dynamic.subscribe(lambda live: throttling.reconfigure(throttling_config_from(live)))
        tg = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tg.cancel_scope.cancel)
        if trace_sink is not None:
            await tg.start(trace_sink.run)
        await tg.start(namespaces.watch, store)
        await tg.start(placement_policies.watch)
        await tg.start(dynamic.watch)
        # Elected before the ports serve, so that leaderBroker answers once the broker is ready.
        await tg.start(leader_election.run)
        await tg.start(ownership.watch)
        await tg.start(ownership.prove, config.metadataStoreSessionTimeoutMillis / 1000)
        # Registered under /loadbalance/brokers before the ports serve lookups (Pulsar's
        # ModularLoadManagerImpl.start).
        traffic = TrafficCounter()
        load_trace = load_balancer_trace(
            config, broker_id_of(config), in_thread=trace_writes_in_thread
        )
        if load_trace is not None:
            await tg.start(load_trace.run)
        # Every broker keeps its recent rows for the dashboard, traced to Parquet or not.
        trace_ring = TraceRing(load_trace)
        load_reporter = build_load_reporter(
            store,
            clock,
            broker_id=broker_id_of(config),
            config=lambda: dynamic.config,
            urls=(f"http://{broker_id_of(config)}", admin_url_tls, service_url, service_url_tls),
            topics=topics,
            ownership=ownership,
            traffic=traffic.snapshot,
            trace=trace_ring,
        )
        await tg.start(load_reporter.run)
        # The leader's aggregation, shedding and automatic split, while this broker leads; its
        # unloads and splits are carried out by each bundle's owner.
        owner_calls = build_owner_calls(
            ownership,
            clock,
            store=store,
            config=lambda: dynamic.config,
            unloader=unloader,
            splitter=lambda: admin_context.bundle_splitter,
            set_affinity=lambda bundle_range, broker: lookup.selector.set_affinity(
                bundle_range, broker
            ),
            remote=owner_admin,
        )

        async def shed_unload(bundle: str, destination_broker: str | None = None) -> None:
            await owner_calls.unload(bundle, destination_broker, reason="shedding")

        load_leader = LoadBalancerLeader(
            store,
            clock,
            broker_id=broker_id_of(config),
            config=lambda: dynamic.config,
            leadership=leader_election,
            unload=shed_unload,
            split=owner_calls.split,
            layout=layout_from(lambda ns: ownership.boundaries(NamespaceName.parse(ns))),
            owned_bundles=ownership.owned_bundles,
            trace=trace_ring,
            policies=placement_policies.policies,
        )
        await tg.start(load_leader.run)
        # Placement uses the leader term's load data while this broker leads.
        placement.attach(lambda: load_leader.term, trace_ring)
        admin_context = build_admin_context(
            dynamic,
            store,
            namespaces,
            topics,
            ownership,
            ledger_store,
            clock,
            schemas=SchemaService(schema_registry, features),
            compaction=compaction,
            leader_election=leader_election,
            lookup=lookup,
            unloader=unloader,
            load_reporter=load_reporter,
            load_leader=load_leader,
            health=HealthChecker(
                cluster=config.clusterName,
                broker_id=broker_id_of(config),
                connector=lambda host, port: broker.connect_in_memory(
                    host, port, certificate=broker_client_certificate(dynamic.config)
                ),
                clock=clock,
                credentials=lambda: connect_credentials(
                    plugin_kind(dynamic.config.brokerClientAuthenticationPlugin),
                    dynamic.config.brokerClientAuthenticationParameters,
                ),
            ),
            owner_calls=owner_calls,
            security=security,
            trace_ring=trace_ring,
        )
        broker = Broker(
            config,
            service_url,
            admin_url,
            topics,
            ownership,
            store,
            ledger_store,
            namespaces,
            clock,
            services,
            tg,
            schemas=schema_registry,
            compaction=compaction,
            dynamic=dynamic,
            admin=admin_context,
            leader_election=leader_election,
            lookup=lookup,
            unloader=unloader,
            load_reporter=load_reporter,
            load_leader=load_leader,
            traffic=traffic,
            service_url_tls=service_url_tls,
            admin_url_tls=admin_url_tls,
            guards=guards,
        )
        await serve_ports(
            tg,
            ports,
            broker.handler_factory,
            admin_context,
            clock=clock,
            ssl_context=security.ssl_context,
            traffic=traffic,
            guards=guards,
        )
        yield broker


async def serve_broker(
    config: BrokerConfig | None = None,
    *,
    task_status: TaskStatus[Broker] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Run a broker until cancelled; ``task_status.started`` gets the running :class:`Broker`."""
    async with open_broker(config) as broker:
        task_status.started(broker)
        await anyio.Event().wait()
