"""The composition root: builds the broker's services, wires them and serves them.

``open_broker(config)`` is an async context manager yielding a running :class:`Broker`: metadata
store (in-memory unless one is given), the in-process ledger store, the topic service, the
ownership table, the binary-protocol listener and the admin HTTP server. ``serve_broker`` is the
``serve_*`` form (STYLE.md §1.15) used by the CLI.

Metadata bootstrap follows Pulsar's layout (spec/pulsar-behaviour.md §6.1): cluster
``/admin/clusters/<cluster>``, tenant ``/admin/policies/public`` and namespaces
``/admin/policies/public/default`` and ``/admin/policies/public/default-2``, system tenant
``/admin/policies/pulsar`` and namespace ``/admin/policies/pulsar/system`` (what
``pulsar standalone`` creates: ``pulsar-admin tenants list`` answers ``public`` and
``pulsar``), as msgspec JSON, written only when missing. The topic service asks a
:class:`NamespaceRegistry`, an in-memory view of those nodes kept current by a metadata watch.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import anyio
import msgspec

from emubroker.admin import (
    AdminContext,
    MetricsCollector,
    RateTracker,
    TopicStatsView,
    build_admin_app,
    serve_admin,
)
from emubroker.admin.bundle_wiring import build_bundle_splitter
from emubroker.admin.health_check import HealthChecker, heartbeat_namespaces
from emubroker.admin.metrics_loadbalance import (
    render_leader_unload_metrics,
    render_load_balancing_metrics,
)
from emubroker.admin.owner_admin import build_owner_calls
from emubroker.auth import Security, SecurityConfigError
from emubroker.auth.broker_client import (
    broker_client_role,
    client_certificate,
    connect_credentials,
    plugin_kind,
)
from emubroker.config import BrokerConfig
from emubroker.dynamic_config import DynamicConfig
from emubroker.handlers import BrokerServices, ConnectionHandler
from emubroker.handlers.lookups import LookupLimit
from emubroker.loadbalance.leader.election import LeaderElectionService
from emubroker.loadbalance.leader.tasks import LoadBalancerLeader
from emubroker.loadbalance.ownership.assignment import LoadManagerSelector
from emubroker.loadbalance.ownership.lookup import BundleLookup
from emubroker.loadbalance.ownership.placement_policies import PlacementPolicyCache
from emubroker.loadbalance.ownership.table import BrokerInfo, OwnershipTable
from emubroker.loadbalance.ownership.unloading import BundleUnloader
from emubroker.loadbalance.reporting.wiring import build_load_reporter, load_balancer_trace
from emubroker.loadbalance.runtime.split_runtime import layout_from
from emubroker.loadbalance.trace.ring import TraceRing
from emubroker.metadata import BadVersionError, MemoryMetadataStore
from emubroker.metadata.etcd_url import is_etcd_url
from emubroker.metadata.paths import (
    cluster_path,
    namespace_path,
    partitioned_topic_path,
    tenant_path,
)
from emubroker.metadata.remote import (
    DEFAULT_SESSION_TIMEOUT,
    RemoteMetadataStore,
    open_remote_metadata_store,
)
from emubroker.namespace_registry import NamespaceRegistry
from emubroker.naming import NamespaceName, TopicName, bundle_boundaries
from emubroker.net import (
    NetGuards,
    Session,
    TrafficCounter,
    bind_tcp_sockets,
    listener_from_sockets,
    serve_pulsar,
)
from emubroker.net.certified import CertifiedStream
from emubroker.policies import (
    ClusterData,
    Policies,
    PolicyStore,
    TenantInfo,
    bundles_data,
    to_json,
)
from emubroker.ratelimit.quotas import throttling_config_from
from emubroker.schemas import SchemaRegistry, SchemaService
from emubroker.storage import BookieBackend, LedgerBackend, MemoryBackend
from emubroker.topics.compaction import CompactionService
from emubroker.topics.features import TopicFeatures
from emubroker.topics.service import TopicService
from emubroker.topics.settings import TopicSettings
from emubroker.topics.throttling import DispatchThrottling
from emubroker.topics.trace_sink import DispatchTraceSink
from protocol.clock import AnyioClock
from protocol.framing import FRAME_PADDING
from storage_stub.client import open_stub_client
from storage_stub.journal import FsyncPolicy
from storage_stub.ledger import LedgerStore

if TYPE_CHECKING:
    import socket

    from anyio.abc import ByteStream, TaskGroup, TaskStatus

    from emubroker.loadbalance.ownership.owner_calls import OwnerAdmin, OwnerCalls
    from emubroker.loadbalance.reporting.reporter import LoadReporter
    from emubroker.metadata import MetadataStore
    from emubroker.naming import NamespaceBundle
    from emubroker.topics.handles import TopicHandle
    from protocol.client.transport import StreamTransport
    from protocol.clock import Clock

__all__ = [
    "DEFAULT_NAMESPACES",
    "DEFAULT_TENANTS",
    "Broker",
    "NamespaceRegistry",
    "bootstrap_metadata",
    "open_broker",
    "serve_broker",
]

log = logging.getLogger(__name__)

DEFAULT_TENANTS = ("public", "pulsar")
DEFAULT_NAMESPACES = (
    NamespaceName("public", "default"),
    NamespaceName("public", "default-2"),
    NamespaceName("pulsar", "system"),
)
"""What ``pulsar standalone`` creates at first start."""

TRANSACTION_COORDINATOR_ASSIGN = TopicName.parse(
    "persistent://pulsar/system/transaction_coordinator_assign"
)
"""The partitioned topic whose partitions name the transaction coordinators (a client asks its
partition count, then connects to each coordinator)."""
CLUSTER_TRANSACTION_COORDINATORS = 16
"""Its partitions in a cluster: ``pulsar initialize-cluster-metadata`` creates it with
``--initial-num-transaction-coordinators`` (16) whether or not the brokers enable transactions,
so that a client enabling them there is told "Transactions are not enabled." by a coordinator;
``pulsar standalone`` creates it only with transactions enabled, which emubroker never is."""


def may_bootstrap(config: BrokerConfig, *, wall_time: float) -> bool:
    """Whether ``pulsar standalone`` would create its defaults under this configuration.

    Pulsar's standalone creates them through its own admin client, which authenticates with
    ``brokerClientAuthenticationPlugin`` (``auth.broker_client.broker_client_role``: without
    one, as ``anonymousUserRole``); with authorization on, that role must be a super-user.
    Otherwise Pulsar logs the refusal and starts without them (the operator creates them over
    REST).
    """
    if not config.authenticationEnabled:
        return True
    role = broker_client_role(config, wall_time=wall_time)
    if not role:
        return False
    return not config.authorizationEnabled or role in config.csv(config.superUserRoles)


def _broker_client_certificate(config: BrokerConfig) -> bytes | None:
    # The health check's client certificate; unusable parameters fail its CONNECT instead
    # (its credentials say why), so none is presented then.
    kind = plugin_kind(config.brokerClientAuthenticationPlugin)
    try:
        return client_certificate(kind, config.brokerClientAuthenticationParameters)
    except (ValueError, SecurityConfigError):
        return None


async def bootstrap_metadata(
    store: MetadataStore,
    config: BrokerConfig,
    *,
    http_url: str,
    tls_urls: tuple[str, str] = ("", ""),
    wall_time: float = 0.0,
    transaction_coordinators: int = 0,
) -> None:
    """Create the cluster, the ``public`` and ``pulsar`` tenants and their namespaces if missing.

    Every node is created with ``expected_version=-1``: brokers of a cluster starting together
    against one empty store race here, and the first creator's value must stand (a plain write
    after an ``exists`` check would let a later broker overwrite what an earlier one, or an
    operator in between, wrote).

    Args:
        store: The metadata store.
        config: The broker configuration.
        http_url: The admin API's ``http://`` URL (``serviceUrl``).
        tls_urls: ``(https URL, pulsar+ssl URL)``, empty without TLS ports.
        wall_time: Now, epoch seconds (the broker client's token may expire).
        transaction_coordinators: Partitions of ``TRANSACTION_COORDINATOR_ASSIGN``, created
            if missing; 0: not created.
    """
    if not may_bootstrap(config, wall_time=wall_time):
        log.warning(
            "authentication is on and the broker's own client (brokerClientAuthentication"
            "Plugin, else the anonymous role %r) may not administer the cluster: the cluster, "
            "tenant 'public' and its namespaces are not created (create them over REST as a "
            "super-user)",
            config.anonymousUserRole,
        )
        return
    cluster = ClusterData(
        service_url=http_url or None,
        service_url_tls=tls_urls[0] or None,
        broker_service_url=f"pulsar://{config.advertised_host()}:{config.brokerServicePort}",
        broker_service_url_tls=tls_urls[1] or None,
    )
    policies = Policies(
        bundles=bundles_data(bundle_boundaries(config.defaultNumberOfNamespaceBundles)),
        replication_clusters=[config.clusterName],
    )
    nodes: list[tuple[str, object]] = [
        (cluster_path(config.clusterName), cluster),
        *(
            (tenant_path(tenant), TenantInfo([], [config.clusterName]))
            for tenant in DEFAULT_TENANTS
        ),
        *((namespace_path(namespace), policies) for namespace in DEFAULT_NAMESPACES),
    ]
    if transaction_coordinators:
        nodes.append(
            (
                partitioned_topic_path(TRANSACTION_COORDINATOR_ASSIGN),
                {"partitions": transaction_coordinators, "deleted": False},
            )
        )
    for path, value in nodes:
        if await store.exists(path):
            continue
        with contextlib.suppress(BadVersionError):  # another broker created it first
            await store.put(path, to_json(value), expected_version=-1)


def topic_settings(config: BrokerConfig) -> TopicSettings:
    """The topic layer's settings from the broker configuration."""
    return TopicSettings(config)


@dataclass(frozen=True, slots=True)
class Broker:
    """A running broker, as ``open_broker`` yields it.

    Attributes:
        config: Its configuration, with the real ports when 0 was asked for.
        service_url: ``pulsar://host:port`` for clients.
        admin_url: ``http://host:port`` of the admin API (``""`` when not served).
        topics: The topic service.
        ownership: The bundle ownership table.
        metadata: The metadata store session.
        ledgers: The in-process ledger store.
        namespaces: The namespace registry.
        clock: The broker's clock.
        schemas: The schema registry (per-topic schema versions).
        compaction: Topic compaction (trigger and status).
        dynamic: The live configuration (``/admin/v2/brokers/configuration``).
        admin: What the admin REST API serves; ``build_admin_app(broker.admin)`` gives the
            application (tests run it without a socket).
        guards: The limits every connection counts against (``emubroker.net.guards``).
        leader_election: This broker's part in the cluster's leader election.
        lookup: Answers lookups across the cluster's brokers (``loadbalance.ownership.lookup``).
        unloader: Unloads this broker's bundles (``loadbalance.ownership.unloading``); a
            bundle's unload is ``await broker.unloader.unload(bundle)``.
        load_reporter: This broker's load report (its registration under
            ``/loadbalance/brokers``).
        load_leader: The load manager's leader tasks (running while this broker leads).
        traffic: Bytes its client connections carried (its own bandwidth).
        service_url_tls: ``pulsar+ssl://host:port`` (``brokerServicePortTls``), else empty.
        admin_url_tls: ``https://host:port`` (``webServicePortTls``), else empty.
    """

    config: BrokerConfig
    service_url: str
    admin_url: str
    topics: TopicService
    ownership: OwnershipTable
    metadata: MetadataStore
    ledgers: LedgerStore
    namespaces: NamespaceRegistry
    clock: Clock
    _services: BrokerServices
    _task_group: TaskGroup
    schemas: SchemaRegistry | None = None
    compaction: CompactionService | None = None
    dynamic: DynamicConfig | None = None
    admin: AdminContext | None = None
    leader_election: LeaderElectionService | None = None
    lookup: BundleLookup | None = None
    unloader: BundleUnloader | None = None
    load_reporter: LoadReporter | None = None
    load_leader: LoadBalancerLeader | None = None
    traffic: TrafficCounter | None = None
    service_url_tls: str = ""
    admin_url_tls: str = ""
    guards: NetGuards | None = None

    async def shutdown(self) -> None:
        """Hand the bundles over before stopping (SIGTERM).

        Unregister first, so the leader places nothing more here, then unload every bundle
        within ``brokerShutdownTimeoutMs``.
        """
        if self.load_reporter is not None:
            await self.load_reporter.disable()
        if self.unloader is not None:
            await self.unloader.unload_all(self.config.brokerShutdownTimeoutMs / 1000)

    def handler_factory(self, session: Session) -> ConnectionHandler:
        """The command handler of a new session (``net.HandlerFactory``)."""
        return ConnectionHandler(self._services, session)

    def start_session(self, stream: ByteStream) -> None:
        """Serve one more connection over ``stream`` (any byte stream, e.g. in memory)."""
        session = self.new_session(stream)
        self._task_group.start_soon(session.run)

    def new_session(self, stream: ByteStream) -> Session:
        """A session for ``stream`` wired to this broker; the caller runs ``session.run()``."""
        config = self.config
        return Session(
            stream,
            self.handler_factory,
            clock=self.clock,
            max_frame_size=config.maxMessageSize + FRAME_PADDING,
            keepalive_interval=config.keepAliveIntervalSeconds,
            traffic=self.traffic,
            guards=self.guards,
        )

    async def connect_in_memory(
        self, host: str, port: int, *, certificate: bytes | None = None
    ) -> StreamTransport:
        """A client transport to this broker over an in-memory stream.

        A ``protocol.client`` ``Connector`` (host and port are ignored): the broker's own
        health check connects with it. ``certificate`` (DER) is the client certificate the
        connection presents (the broker client's ``AuthenticationTls``, ``net.certified``).
        """
        # Imported on first use: ``protocol.client`` is the client, which serving never needs.
        from protocol.client.transport import StreamTransport, memory_byte_stream_pair

        client_end, server_end = memory_byte_stream_pair()
        self.start_session(
            server_end if certificate is None else CertifiedStream(server_end, certificate)
        )
        return StreamTransport(client_end)


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


def _admin_context(
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


def broker_id_of(config: BrokerConfig) -> str:
    """The broker id as Pulsar spells it (``PulsarService.getBrokerId``): host:webServicePort."""
    return f"{config.advertised_host()}:{config.webServicePort}"


async def _bind_optional(host: str, port: int | None) -> list[socket.socket]:
    # A TLS port is bound only when configured (Pulsar's Optional<Integer> ports).
    return [] if port is None else await bind_tcp_sockets(host, port)


def _close_sockets(sockets: list[socket.socket]) -> None:
    for sock in sockets:
        sock.close()


@asynccontextmanager
async def open_storage(
    *,
    data_dir: str | None = None,
    metadata_url: str | None = None,
    bookie_url: str | None = None,
    fsync: FsyncPolicy = FsyncPolicy.BATCH,
    session_timeout: float = DEFAULT_SESSION_TIMEOUT,
) -> AsyncIterator[tuple[MetadataStore | None, LedgerBackend | None]]:
    """The broker's storage: in memory, a durable stub in this process, or an external stub.

    Args:
        data_dir: Host the stub and the metadata service in this process, durable in this
            directory (``emubroker standalone --data-dir``).
        metadata_url: ``stub://host:port`` of an external metadata service, or
            ``etcd://host:port[,host:port...][/chroot]`` of an etcd cluster.
        bookie_url: ``stub://host:port`` of an external bookie stub.
        fsync: The hosted stub's journal fsync policy.
        session_timeout: Seconds an external metadata session outlives its last heartbeat
            (``metadataStoreSessionTimeoutMillis``).

    Yields:
        ``(metadata, ledgers)`` for :func:`open_broker`: where entries live (a
        ``storage.LedgerBackend``); ``(None, None)`` for memory.

    Raises:
        RuntimeError: ``data_dir`` is used by another process.
        MetadataStoreError, StorageError: An external service cannot be reached.
    """
    async with AsyncExitStack() as stack:
        metadata: MetadataStore | None = None
        ledgers: LedgerBackend | None = None
        if data_dir is not None:
            # Only ``--data-dir`` hosts the stub in-process: brokers of a cluster skip importing
            # the server, ~6 % of their start-up CPU (docs/performance.md, cluster start-up).
            from storage_stub.server import open_stub_server

            server = await stack.enter_async_context(
                open_stub_server(data_dir=data_dir, fsync=fsync)
            )
            client = await stack.enter_async_context(server.open_local_client())
            metadata = await stack.enter_async_context(
                await RemoteMetadataStore.open(client, session_timeout=session_timeout)
            )
            ledgers = BookieBackend(client)
        if metadata_url is not None and is_etcd_url(metadata_url):
            # The etcd client (nine modules) is imported only by the brokers that use it.
            from emubroker.metadata.etcd import open_etcd_metadata_store

            metadata = await stack.enter_async_context(
                open_etcd_metadata_store(metadata_url, session_timeout=session_timeout)
            )
        elif metadata_url is not None:
            metadata = await stack.enter_async_context(
                open_remote_metadata_store(metadata_url, session_timeout=session_timeout)
            )
        if bookie_url is not None:
            ledgers = BookieBackend(await stack.enter_async_context(open_stub_client(bookie_url)))
        yield metadata, ledgers


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
        pulsar_sockets = (
            await bind_tcp_sockets(config.bindAddress, config.brokerServicePort) if listen else []
        )
        # Closed on the way out whatever happens; a no-op for sockets a server already closed.
        stack.callback(_close_sockets, pulsar_sockets)
        admin_sockets = (
            await bind_tcp_sockets(config.bindAddress, config.webServicePort) if admin else []
        )
        stack.callback(_close_sockets, admin_sockets)
        pulsar_tls_sockets = await _bind_optional(
            config.bindAddress, config.brokerServicePortTls if listen else None
        )
        stack.callback(_close_sockets, pulsar_tls_sockets)
        admin_tls_sockets = await _bind_optional(
            config.bindAddress, config.webServicePortTls if admin else None
        )
        stack.callback(_close_sockets, admin_tls_sockets)
        ports: dict[str, int] = {}
        for key, bound in (
            ("brokerServicePort", pulsar_sockets),
            ("webServicePort", admin_sockets),
            ("brokerServicePortTls", pulsar_tls_sockets),
            ("webServicePortTls", admin_tls_sockets),
        ):
            if bound:
                ports[key] = bound[0].getsockname()[1]
        config = msgspec.structs.replace(config, **ports)
        service_url = f"pulsar://{host}:{config.brokerServicePort}"
        admin_url = f"http://{host}:{config.webServicePort}" if admin else ""
        service_url_tls = (
            f"pulsar+ssl://{host}:{config.brokerServicePortTls}"
            if config.brokerServicePortTls is not None
            else ""
        )
        admin_url_tls = (
            f"https://{host}:{config.webServicePortTls}"
            if config.webServicePortTls is not None and admin
            else ""
        )

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

        async def close_bundle_topics(bundle: NamespaceBundle, graceful: bool) -> int:
            return await topics.close_topics(
                lambda name: ownership.bundle_of(name) == bundle, graceful=graceful
            )

        unloader = BundleUnloader(
            ownership,
            close_bundle_topics,
            clock=clock,
            unload_timeout=config.namespaceBundleUnloadingTimeoutMs / 1000,
            # The ring is built with the load balancer below, before any unload can run.
            trace=lambda record: trace_ring.append(record),
            broker_id=broker_id_of(config),
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
        admin_context = _admin_context(
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
                    host, port, certificate=_broker_client_certificate(dynamic.config)
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
        if pulsar_sockets:
            listener = await listener_from_sockets(pulsar_sockets, clock=clock)
            await tg.start(
                partial(
                    serve_pulsar,
                    listener,
                    broker.handler_factory,
                    clock=clock,
                    max_frame_size=config.maxMessageSize + FRAME_PADDING,
                    keepalive_interval=config.keepAliveIntervalSeconds,
                    traffic=traffic,
                    guards=guards,
                )
            )
        if pulsar_tls_sockets:
            await tg.start(
                partial(
                    serve_pulsar,
                    await listener_from_sockets(pulsar_tls_sockets, clock=clock),
                    broker.handler_factory,
                    clock=clock,
                    max_frame_size=config.maxMessageSize + FRAME_PADDING,
                    keepalive_interval=config.keepAliveIntervalSeconds,
                    ssl_context=security.ssl_context,
                    traffic=traffic,
                    guards=guards,
                )
            )
        if admin_sockets or admin_tls_sockets:
            await tg.start(
                partial(
                    serve_admin,
                    build_admin_app(admin_context),
                    admin_sockets,
                    tls_sockets=admin_tls_sockets,
                    ssl_context=security.ssl_context,
                )
            )
        # DEBUG: the command line prints its ready line with the same URLs.
        log.debug(
            "broker serving %s (admin %s)",
            " ".join(filter(None, (service_url, service_url_tls))),
            " ".join(filter(None, (admin_url, admin_url_tls))) or "off",
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
