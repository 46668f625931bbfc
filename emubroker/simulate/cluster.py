"""A cluster of brokers in this process: one metadata tree, one bookie stub, memory streams.

:func:`open_simulated_cluster` starts the bookie stub in-process and N brokers that share a
:class:`~emubroker.metadata.MemoryMetadataTree` (each with its own session, so leader election,
ownership and session expiry work as across processes) and reach the stub through their own
local channel (bookie mode, as ``emubroker cluster`` runs them). Nothing listens: clients reach
broker ``i`` (``pulsar://127.0.0.1:<6650+i>``, id ``127.0.0.1:<8080+i>``) through
:meth:`SimulatedCluster.connect`, a ``protocol.client`` ``Connector`` over in-memory streams.

Brokers die and come back as processes do (:meth:`SimulatedCluster.kill`, ``stop``,
``restart``):

- a **kill** (SIGKILL) is a crash: the broker's channel to the stub is cut and its metadata
  store refuses everything at once, then its tasks are cancelled, which drops its clients'
  connections. Its metadata session (its locks, bundle ownerships, the leader node) lives on
  until ``metadataStoreSessionTimeoutMillis`` has passed on the cluster's clock, as a crashed
  broker's session lives until it times out; then the other brokers see it go, a new leader is
  elected and the bundles are placed again; their new owners fence the ledgers in the stub
  and recover the topics;
- a **stop** (SIGTERM) is Pulsar's graceful shutdown (``Broker.shutdown``: unregister, unload
  every bundle), then the broker closes and its session ends at once;
- a **restart** starts the broker again under the same name with a new session. A session of
  its earlier life that has not timed out yet is ended first: the new process is the same
  broker, and Pulsar's operators restart a crashed broker expecting it back.

The load manager's leader reaches a bundle's owner through :class:`SimulatedCluster` as its
``OwnerAdmin``: Pulsar's leader calls the owner's admin API to unload or split a bundle; here
the owner is in the same process and is asked directly (its ``BundleUnloader`` and its bundle
splitter, what those admin calls perform), so clients are closed, look up again and reconnect
to the bundle's next owner (the shedder's destination, through the leader's affinity).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import anyio

from emubroker.app import Broker, open_broker
from emubroker.loadbalance.ownership.owner_calls import OwnerCallError
from emubroker.metadata import MemoryMetadataTree
from emubroker.storage import BookieBackend
from protocol.errors import ConnectionBrokenError
from storage_stub.client import DEFAULT_REQUEST_TIMEOUT, StubClient
from storage_stub.local import LocalChannel
from storage_stub.server import open_stub_server

if TYPE_CHECKING:
    from anyio.abc import TaskGroup, TaskStatus

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.ownership.records import BrokerInfo
    from emubroker.metadata import MemoryMetadataStore
    from emubroker.naming import NamespaceBundle
    from protocol.client.transport import StreamTransport
    from protocol.clock import Clock
    from storage_stub.server import StubServer

__all__ = [
    "FIRST_SERVICE_PORT",
    "FIRST_WEB_PORT",
    "BrokerDownError",
    "SimulatedCluster",
    "UnknownBrokerError",
    "open_simulated_cluster",
]

log = logging.getLogger(__name__)

FIRST_SERVICE_PORT: Final = 6650
FIRST_WEB_PORT: Final = 8080
HOST: Final = "127.0.0.1"


class UnknownBrokerError(LookupError):
    """A client or the leader named a broker this simulated cluster does not have."""


class BrokerDownError(RuntimeError):
    """An action needs a broker that is not running (or one that is, to restart it)."""


@dataclass
class _Node:
    """One broker slot: its configuration and, while it runs, what a kill must reach."""

    config: BrokerConfig
    broker: Broker | None = None
    store: MemoryMetadataStore | None = None
    channel: LocalChannel | None = None
    scope: anyio.CancelScope | None = None
    stopping: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    killed: bool = False
    dead_session: int | None = None  # a crashed life's session, until it times out


class SimulatedCluster:
    """The brokers, by index, running or not."""

    def __init__(
        self,
        configs: Sequence[BrokerConfig],
        *,
        tree: MemoryMetadataTree,
        stub: StubServer,
        clock: Clock,
        tg: TaskGroup,
    ) -> None:
        self._nodes = [_Node(config) for config in configs]
        self._tree = tree
        self._stub = stub
        self._clock = clock
        self._tg = tg

    @property
    def brokers(self) -> list[Broker]:
        """The running brokers, in index order."""
        return [node.broker for node in self._nodes if node.broker is not None]

    @property
    def stub(self) -> StubServer:
        """The bookie stub every broker writes to."""
        return self._stub

    @property
    def configs(self) -> list[BrokerConfig]:
        """Every broker's configuration, running or not, by index."""
        return [node.config for node in self._nodes]

    @property
    def service_url(self) -> str:
        """Every broker's service URL, comma-separated (a client's service URL list)."""
        return "pulsar://" + ",".join(
            f"{HOST}:{config.brokerServicePort}" for config in self.configs
        )

    def broker(self, index: int) -> Broker:
        """Broker ``index``, running.

        Raises:
            UnknownBrokerError: There is no such broker.
            BrokerDownError: It is not running.
        """
        if not 0 <= index < len(self._nodes):
            raise UnknownBrokerError(f"no broker {index} (brokers are 0 to {len(self._nodes) - 1})")
        broker = self._nodes[index].broker
        if broker is None:
            raise BrokerDownError(f"broker-{index} is not running")
        return broker

    def broker_at(self, port: int) -> Broker:
        """The running broker whose binary-protocol port is ``port``.

        Raises:
            UnknownBrokerError: No broker has it.
            ConnectionBrokenError: Its broker is down (as a refused TCP connection).
        """
        for node in self._nodes:
            if node.config.brokerServicePort == port:
                # A broker being killed is down already: its tasks are ending, and a session
                # started on them would fail with RuntimeError, not as a refused connection.
                if node.broker is None or node.killed:
                    raise ConnectionBrokenError(f"cannot connect to {HOST}:{port}: broker is down")
                return node.broker
        raise UnknownBrokerError(f"no simulated broker listens on port {port}")

    async def connect(self, host: str, port: int) -> StreamTransport:
        """A ``Connector``: a transport to the broker on ``port``, over memory streams."""
        return await self.broker_at(port).connect_in_memory(host, port)

    # ---- processes ------------------------------------------------------------------------------

    async def start(self, index: int) -> None:
        """Start broker ``index`` (again); returns once it serves.

        Raises:
            BrokerDownError: It is running already.
        """
        node = self._node(index)
        if node.broker is not None:
            raise BrokerDownError(f"broker-{index} is running already")
        if node.dead_session is not None:
            self._tree.end_session(node.dead_session)
            node.dead_session = None
        node.stopping, node.done, node.killed = anyio.Event(), anyio.Event(), False
        await self._tg.start(self._serve, node)

    async def kill(self, index: int) -> None:
        """Crash broker ``index`` (see the module docstring); its session times out later."""
        node = self._node(index)
        if node.broker is None or node.store is None or node.channel is None:
            raise BrokerDownError(f"broker-{index} is not running")
        node.killed = True
        # In this order, with no checkpoint in between: the broker's tasks run again only after
        # its storage is unreachable and its metadata store refuses everything.
        node.channel.shutdown()
        session = node.store.abandon()
        if node.scope is not None:
            node.scope.cancel()
        await node.done.wait()
        node.dead_session = session
        timeout = node.config.metadataStoreSessionTimeoutMillis / 1000
        self._tg.start_soon(self._expire, node, session, timeout)

    async def stop(self, index: int) -> None:
        """Stop broker ``index`` gracefully: hand its bundles over, then close."""
        node = self._node(index)
        if node.broker is None:
            raise BrokerDownError(f"broker-{index} is not running")
        await node.broker.shutdown()
        await self._close(node)

    async def close(self) -> None:
        """Close every running broker, the last first (no hand-over: the cluster goes)."""
        for node in reversed(self._nodes):
            if node.broker is not None:
                await self._close(node)

    def _node(self, index: int) -> _Node:
        if not 0 <= index < len(self._nodes):
            raise UnknownBrokerError(f"no broker {index} (brokers are 0 to {len(self._nodes) - 1})")
        return self._nodes[index]

    @staticmethod
    async def _close(node: _Node) -> None:
        node.stopping.set()
        await node.done.wait()

    async def _expire(self, node: _Node, session: int, after: float) -> None:
        await self._clock.sleep(after)
        if node.dead_session == session:  # not ended by a restart meanwhile
            node.dead_session = None
            log.info("the metadata session of crashed %s timed out", _name(node))
            self._tree.end_session(session)

    async def _serve(self, node: _Node, *, task_status: TaskStatus[None]) -> None:
        try:
            with anyio.CancelScope() as scope:
                node.scope = scope
                async with AsyncExitStack() as stack:
                    store = self._tree.open_session()
                    stack.push_async_callback(store.aclose)  # after the broker: its locks too
                    heartbeats = await stack.enter_async_context(anyio.create_task_group())
                    channel = LocalChannel(
                        self._stub.service, request_timeout=DEFAULT_REQUEST_TIMEOUT
                    )
                    stack.callback(channel.shutdown)  # before the heartbeats' group exits
                    heartbeats.start_soon(channel.run_heartbeats)
                    broker = await stack.enter_async_context(
                        open_broker(
                            node.config,
                            clock=self._clock,
                            metadata=store,
                            listen=False,
                            admin=False,
                            ledgers=BookieBackend(StubClient(channel)),
                            owner_admin=self,
                            trace_writes_in_thread=False,
                        )
                    )
                    node.broker, node.store, node.channel = broker, store, channel
                    task_status.started()
                    await node.stopping.wait()
        except Exception:
            # A crashed broker's last steps fail (its storage is gone): that is the point.
            if not node.killed:
                raise
            log.debug("%s failed on its way down after the kill", _name(node), exc_info=True)
        finally:
            node.broker = node.store = node.channel = node.scope = None
            node.done.set()

    # ---- OwnerAdmin -----------------------------------------------------------------------------

    def _owner(self, owner: BrokerInfo) -> Broker:
        for broker in self.brokers:
            if f"http://{HOST}:{broker.config.webServicePort}" == owner.http_url:
                return broker
        raise OwnerCallError(f"no simulated broker at {owner.http_url}")

    async def unload(
        self, owner: BrokerInfo, bundle: NamespaceBundle, *, reason: str, destination: str
    ) -> None:
        """The leader's unload call to ``owner`` (``OwnerAdmin``)."""
        broker = self._owner(owner)
        if broker.unloader is None:
            raise OwnerCallError(f"{owner.http_url} cannot unload bundles")
        await broker.unloader.unload(bundle, reason=reason, destination=destination)

    async def split(self, owner: BrokerInfo, bundle: NamespaceBundle, *, unload: bool) -> None:
        """The leader's split call to ``owner`` (``OwnerAdmin``), with its default algorithm."""
        broker = self._owner(owner)
        if broker.admin is None or broker.admin.bundle_splitter is None:
            raise OwnerCallError(f"{owner.http_url} cannot split bundles")
        algorithm = broker.config.defaultNamespaceBundleSplitAlgorithm
        await broker.admin.bundle_splitter.split(bundle, algorithm, unload=unload)


def _name(node: _Node) -> str:
    return f"broker {HOST}:{node.config.webServicePort}"


@asynccontextmanager
async def open_simulated_cluster(
    configs: Sequence[BrokerConfig], *, clock: Clock
) -> AsyncIterator[SimulatedCluster]:
    """Start the stub and one broker per configuration, in order; stop them on exit.

    Each configuration's ``brokerServicePort`` and ``webServicePort`` name its broker (the
    simulator gives ``6650 + i`` and ``8080 + i``). Broker 0, started first, leads.
    """
    async with open_stub_server(clock=clock) as stub, anyio.create_task_group() as tg:
        cluster = SimulatedCluster(
            configs, tree=MemoryMetadataTree(), stub=stub, clock=clock, tg=tg
        )
        try:
            for index in range(len(configs)):
                await cluster.start(index)
            yield cluster
        finally:
            with anyio.CancelScope(shield=True):
                await cluster.close()
            tg.cancel_scope.cancel()  # sessions of crashed brokers waiting to time out
