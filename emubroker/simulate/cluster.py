"""A cluster of brokers in this process: one metadata tree, one bookie stub, memory streams.

:func:`open_simulated_cluster` starts the bookie stub in-process and N brokers that share a
:class:`~emubroker.metadata.MemoryMetadataTree` (each with its own session, so leader election,
ownership and session expiry work as across processes) and reach the stub through its local
client (bookie mode, as ``emubroker cluster`` runs them). Nothing listens: clients reach broker
``i`` (``pulsar://127.0.0.1:<6650+i>``, id ``127.0.0.1:<8080+i>``) through
:meth:`SimulatedCluster.connect`, a ``protocol.client`` ``Connector`` over in-memory streams.

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from emubroker.app import Broker, open_broker
from emubroker.loadbalance.owner_calls import OwnerCallError
from emubroker.metadata import MemoryMetadataTree
from emubroker.storage import BookieBackend
from storage_stub.server import open_stub_server

if TYPE_CHECKING:
    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.ownership import BrokerInfo
    from emubroker.naming import NamespaceBundle
    from protocol.client.transport import StreamTransport
    from protocol.clock import Clock

__all__ = [
    "FIRST_SERVICE_PORT",
    "FIRST_WEB_PORT",
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


@dataclass
class SimulatedCluster:
    """The running brokers, by index."""

    brokers: list[Broker]

    @property
    def service_url(self) -> str:
        """Every broker's service URL, comma-separated (a client's service URL list)."""
        return "pulsar://" + ",".join(
            f"{HOST}:{broker.config.brokerServicePort}" for broker in self.brokers
        )

    def broker_at(self, port: int) -> Broker:
        """The broker whose binary-protocol port is ``port``.

        Raises:
            UnknownBrokerError: No broker has it.
        """
        for broker in self.brokers:
            if broker.config.brokerServicePort == port:
                return broker
        raise UnknownBrokerError(f"no simulated broker listens on port {port}")

    async def connect(self, host: str, port: int) -> StreamTransport:
        """A ``Connector``: a transport to the broker on ``port``, over memory streams."""
        return await self.broker_at(port).connect_in_memory(host, port)

    def _owner(self, owner: BrokerInfo) -> Broker:
        for broker in self.brokers:
            if f"http://{HOST}:{broker.config.webServicePort}" == owner.http_url:
                return broker
        raise OwnerCallError(f"no simulated broker at {owner.http_url}")

    async def unload(self, owner: BrokerInfo, bundle: NamespaceBundle) -> None:
        """The leader's unload call to ``owner`` (``OwnerAdmin``)."""
        broker = self._owner(owner)
        if broker.unloader is None:
            raise OwnerCallError(f"{owner.http_url} cannot unload bundles")
        await broker.unloader.unload(bundle)

    async def split(self, owner: BrokerInfo, bundle: NamespaceBundle, *, unload: bool) -> None:
        """The leader's split call to ``owner`` (``OwnerAdmin``), with its default algorithm."""
        broker = self._owner(owner)
        if broker.admin is None or broker.admin.bundle_splitter is None:
            raise OwnerCallError(f"{owner.http_url} cannot split bundles")
        algorithm = broker.config.defaultNamespaceBundleSplitAlgorithm
        await broker.admin.bundle_splitter.split(bundle, algorithm, unload=unload)


@asynccontextmanager
async def open_simulated_cluster(
    configs: Sequence[BrokerConfig], *, clock: Clock
) -> AsyncIterator[SimulatedCluster]:
    """Start the stub and one broker per configuration, in order; stop them on exit.

    Each configuration's ``brokerServicePort`` and ``webServicePort`` name its broker (the
    simulator gives ``6650 + i`` and ``8080 + i``). Broker 0, started first, leads.
    """
    tree = MemoryMetadataTree()
    async with open_stub_server(clock=clock) as stub, AsyncExitStack() as stack:
        cluster = SimulatedCluster([])
        for config in configs:
            store = tree.open_session()
            stack.push_async_callback(store.aclose)  # after the broker: its locks go with it
            bookie = await stack.enter_async_context(stub.open_local_client())
            broker = await stack.enter_async_context(
                open_broker(
                    config,
                    clock=clock,
                    metadata=store,
                    listen=False,
                    admin=False,
                    ledgers=BookieBackend(bookie),
                    owner_admin=cluster,
                    trace_writes_in_thread=False,
                )
            )
            cluster.brokers.append(broker)
        yield cluster
