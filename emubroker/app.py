"""The composition root: builds the broker's services, wires them and serves them.

``open_broker(config)`` is an async context manager yielding a running :class:`Broker`: metadata
store (in-memory unless one is given), the in-process ledger store, the topic service, the
ownership table, the binary-protocol listener and the admin HTTP server. ``serve_broker`` is the
``serve_*`` form (STYLE.md §1.15) used by the CLI.

Metadata bootstrap follows Pulsar's layout (spec/pulsar-behaviour.md §6.1): cluster
``/admin/clusters/<cluster>``, tenant ``/admin/policies/public`` and namespaces
``/admin/policies/public/default`` and ``/admin/policies/public/default-2`` (what
``pulsar standalone`` creates), as msgspec JSON, written only when missing. The topic service asks
a :class:`NamespaceRegistry`, an in-memory view of those nodes kept current by a metadata watch.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import anyio
import msgspec

from emubroker.admin import MetricsCollector, build_admin_app, serve_admin
from emubroker.config import BrokerConfig
from emubroker.handlers import BrokerServices, ConnectionHandler
from emubroker.loadbalance import BrokerInfo, OwnershipTable
from emubroker.metadata import MemoryMetadataStore, NotificationKind, WatchOverflowError
from emubroker.naming import InvalidNameError, NamespaceName, bundle_boundaries
from emubroker.net import Session, bind_tcp_sockets, listener_from_sockets, serve_pulsar
from emubroker.topics.service import TopicService
from emubroker.topics.settings import TopicSettings
from protocol.clock import AnyioClock
from protocol.framing import FRAME_PADDING
from storage_stub.ledger import LedgerStore

if TYPE_CHECKING:
    import socket

    from anyio.abc import ByteStream, TaskGroup, TaskStatus

    from emubroker.metadata import MetadataStore
    from protocol.clock import Clock

__all__ = [
    "DEFAULT_NAMESPACES",
    "Broker",
    "NamespaceRegistry",
    "bootstrap_metadata",
    "open_broker",
    "serve_broker",
]

log = logging.getLogger(__name__)

DEFAULT_TENANT = "public"
DEFAULT_NAMESPACES = (NamespaceName("public", "default"), NamespaceName("public", "default-2"))
"""What ``pulsar standalone`` creates at first start."""

POLICIES_ROOT = "/admin/policies"


class ClusterData(msgspec.Struct, frozen=True, rename="camel"):
    """Pulsar's ``ClusterData`` (the subset a standalone broker writes)."""

    service_url: str
    broker_service_url: str


class TenantInfo(msgspec.Struct, frozen=True, rename="camel"):
    """Pulsar's ``TenantInfo``."""

    admin_roles: list[str]
    allowed_clusters: list[str]


class BundlesData(msgspec.Struct, frozen=True, rename="camel"):
    """Pulsar's ``BundlesData``: boundaries as ``0x%08x`` strings."""

    boundaries: list[str]
    num_bundles: int


class Policies(msgspec.Struct, frozen=True):
    """Pulsar's namespace ``Policies`` (the subset we use; JSON names are Pulsar's)."""

    bundles: BundlesData
    replication_clusters: list[str]


class NamespaceRegistry:
    """Which namespaces exist: a synchronous view of ``/admin/policies/<tenant>/<ns>`` nodes.

    The topic service asks on every topic creation, so the answer must not need a store round
    trip; :meth:`watch` keeps the view current as namespaces are created and deleted.
    """

    def __init__(self) -> None:
        self._namespaces: set[NamespaceName] = set()

    def exists(self, namespace: NamespaceName) -> bool:
        """Whether the namespace exists (V1 names with a cluster never do)."""
        return namespace in self._namespaces

    def __call__(self, namespace: NamespaceName) -> bool:
        return namespace in self._namespaces

    def namespaces(self) -> list[NamespaceName]:
        """Every known namespace, sorted."""
        return sorted(self._namespaces, key=str)

    async def load(self, store: MetadataStore) -> None:
        """Read every namespace from the store (replacing the current view)."""
        found: set[NamespaceName] = set()
        for tenant in await store.children(POLICIES_ROOT):
            for local in await store.children(f"{POLICIES_ROOT}/{tenant}"):
                if await store.exists(f"{POLICIES_ROOT}/{tenant}/{local}"):
                    found.add(NamespaceName(tenant, local))
        self._namespaces = found

    async def watch(
        self, store: MetadataStore, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Follow namespace creations and deletions until cancelled."""
        while True:
            async with store.watch(POLICIES_ROOT) as notifications:
                await self.load(store)  # after subscribing: no change can fall in between
                task_status.started()
                task_status = anyio.TASK_STATUS_IGNORED
                try:
                    async for note in notifications:
                        self._apply(note.path, note.kind)
                except WatchOverflowError:
                    log.warning("namespace watch overflowed; re-reading")
                    continue
            return  # the store was closed

    def _apply(self, path: str, kind: NotificationKind) -> None:
        parts = path[len(POLICIES_ROOT) + 1 :].split("/")
        if len(parts) != 2:
            return  # a tenant node or something deeper
        try:
            namespace = NamespaceName(parts[0], parts[1])
        except InvalidNameError:
            return
        if kind is NotificationKind.DELETED:
            self._namespaces.discard(namespace)
        else:
            self._namespaces.add(namespace)


async def bootstrap_metadata(store: MetadataStore, config: BrokerConfig, *, http_url: str) -> None:
    """Create the cluster, the ``public`` tenant and its default namespaces if missing."""
    encode = msgspec.json.encode
    cluster_path = f"/admin/clusters/{config.clusterName}"
    if not await store.exists(cluster_path):
        service_url = f"pulsar://{config.advertised_host()}:{config.brokerServicePort}"
        await store.put(cluster_path, encode(ClusterData(http_url, service_url)))
    tenant_path = f"{POLICIES_ROOT}/{DEFAULT_TENANT}"
    if not await store.exists(tenant_path):
        await store.put(tenant_path, encode(TenantInfo([], [config.clusterName])))
    boundaries = bundle_boundaries(config.defaultNumberOfNamespaceBundles)
    policies = Policies(
        bundles=BundlesData([f"0x{b:08x}" for b in boundaries], len(boundaries) - 1),
        replication_clusters=[config.clusterName],
    )
    for namespace in DEFAULT_NAMESPACES:
        path = f"{POLICIES_ROOT}/{namespace}"
        if not await store.exists(path):
            await store.put(path, encode(policies))


def topic_settings(config: BrokerConfig) -> TopicSettings:
    """The topic layer's settings from the broker configuration."""
    return TopicSettings(
        cluster_name=config.clusterName,
        allow_auto_topic_creation=config.allowAutoTopicCreation,
        allow_auto_topic_creation_type=config.allowAutoTopicCreationType,
        default_num_partitions=config.defaultNumPartitions,
        dispatcher_max_read_batch_size=config.dispatcherMaxReadBatchSize,
        max_unacked_messages_per_consumer=config.maxUnackedMessagesPerConsumer,
        managed_ledger_max_entries_per_ledger=config.managedLedgerMaxEntriesPerLedger,
        delayed_delivery_enabled=config.delayedDeliveryEnabled,
        key_shared_hash_points=config.subscriptionKeySharedConsistentHashingReplicaPoints,
    )


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
        )


def _close_sockets(sockets: list[socket.socket]) -> None:
    for sock in sockets:
        sock.close()


@asynccontextmanager
async def open_broker(
    config: BrokerConfig | None = None,
    *,
    clock: Clock | None = None,
    metadata: MetadataStore | None = None,
    listen: bool = True,
    admin: bool = True,
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
        ports: dict[str, int] = {}
        if pulsar_sockets:
            ports["brokerServicePort"] = pulsar_sockets[0].getsockname()[1]
        if admin_sockets:
            ports["webServicePort"] = admin_sockets[0].getsockname()[1]
        config = msgspec.structs.replace(config, **ports)
        service_url = f"pulsar://{host}:{config.brokerServicePort}"
        admin_url = f"http://{host}:{config.webServicePort}" if admin else ""

        await bootstrap_metadata(store, config, http_url=admin_url)
        namespaces = NamespaceRegistry()
        ledgers = LedgerStore()
        topics = await stack.enter_async_context(
            TopicService(
                config=topic_settings(config),
                clock=clock,
                ledgers=ledgers,
                namespaces=namespaces,
                metadata=store,
            )
        )
        ownership = OwnershipTable(
            store,
            BrokerInfo(service_url, admin_url),
            bundles_per_namespace=config.defaultNumberOfNamespaceBundles,
        )
        services = BrokerServices(
            config=config,
            topics=topics,
            ownership=ownership,
            namespace_exists=namespaces,
            listeners=config.listeners(),
        )
        tg = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tg.cancel_scope.cancel)
        await tg.start(namespaces.watch, store)
        broker = Broker(
            config,
            service_url,
            admin_url,
            topics,
            ownership,
            store,
            ledgers,
            namespaces,
            clock,
            services,
            tg,
        )
        if pulsar_sockets:
            listener = await listener_from_sockets(pulsar_sockets)
            await tg.start(
                partial(
                    serve_pulsar,
                    listener,
                    broker.handler_factory,
                    clock=clock,
                    max_frame_size=config.maxMessageSize + FRAME_PADDING,
                    keepalive_interval=config.keepAliveIntervalSeconds,
                )
            )
        if admin_sockets:
            metrics = MetricsCollector(topics.statistics, clock=clock, cluster=config.clusterName)
            await tg.start(serve_admin, build_admin_app(metrics), admin_sockets)
        log.info("broker serving %s (admin %s)", service_url, admin_url or "off")
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
