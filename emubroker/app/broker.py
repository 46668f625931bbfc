"""A running broker, as ``open_broker`` yields it: its services, and new sessions to it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from emubroker.handlers import ConnectionHandler
from emubroker.net import Session
from emubroker.net.certified import CertifiedStream
from protocol.framing import FRAME_PADDING

if TYPE_CHECKING:
    from anyio.abc import ByteStream, TaskGroup

    from emubroker.admin import AdminContext
    from emubroker.config import BrokerConfig
    from emubroker.dynamic_config import DynamicConfig
    from emubroker.handlers import BrokerServices
    from emubroker.loadbalance.leader.election import LeaderElectionService
    from emubroker.loadbalance.leader.tasks import LoadBalancerLeader
    from emubroker.loadbalance.ownership.lookup import BundleLookup
    from emubroker.loadbalance.ownership.table import OwnershipTable
    from emubroker.loadbalance.ownership.unloading import BundleUnloader
    from emubroker.loadbalance.reporting.reporter import LoadReporter
    from emubroker.metadata import MetadataStore
    from emubroker.namespace_registry import NamespaceRegistry
    from emubroker.net import NetGuards, TrafficCounter
    from emubroker.schemas import SchemaRegistry
    from emubroker.topics.compaction import CompactionService
    from emubroker.topics.service import TopicService
    from protocol.client.transport import StreamTransport
    from protocol.clock import Clock
    from storage_stub.ledger import LedgerStore


class Broker(msgspec.Struct, frozen=True):
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


def broker_id_of(config: BrokerConfig) -> str:
    """The broker id as Pulsar spells it (``PulsarService.getBrokerId``): host:webServicePort."""
    return f"{config.advertised_host()}:{config.webServicePort}"
