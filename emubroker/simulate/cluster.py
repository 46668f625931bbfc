"""A cluster of brokers in this process: one metadata tree, one bookie stub, memory streams.

:func:`open_simulated_cluster` starts the bookie stub in-process and N brokers that share a
:class:`~emubroker.metadata.MemoryMetadataTree` (each with its own session, so leader election,
ownership and session expiry work as across processes) and reach the stub through its local
client (bookie mode, as ``emubroker cluster`` runs them). Nothing listens: clients reach broker
``i`` (``pulsar://127.0.0.1:<6650+i>``, id ``127.0.0.1:<8080+i>``) through
:meth:`SimulatedCluster.connect`, a ``protocol.client`` ``Connector`` over in-memory streams.

The load manager's leader unloads the bundles it sheds through :meth:`SimulatedCluster.unload`:
Pulsar's leader asks the owner over its admin API; here the owner is in the same process and
is asked directly (its ``BundleUnloader``, the same unload an admin call performs), so clients
are closed, look up again and reconnect to the bundle's next owner.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from emubroker.app import Broker, open_broker
from emubroker.metadata import MemoryMetadataTree
from emubroker.naming import BundleRange, NamespaceBundle, NamespaceName
from emubroker.storage import BookieBackend
from storage_stub.server import open_stub_server

if TYPE_CHECKING:
    from emubroker.config import BrokerConfig
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

    async def unload(self, bundle: str, destination_broker: str | None = None) -> None:
        """The leader's unload of ``bundle`` (``tenant/namespace/0x..._0x...``), by its owner.

        A ``destination_broker`` becomes the leader's one-shot placement affinity for the
        bundle's range first, as Pulsar's unload endpoint with ``destinationBroker`` does, so
        the bundle's next lookup lands there.

        Raises:
            UnknownBrokerError: No broker owns the bundle (nothing was unloaded).
        """
        namespace, _, bundle_range = bundle.rpartition("/")
        target = NamespaceBundle(NamespaceName.parse(namespace), BundleRange.parse(bundle_range))
        if destination_broker:
            for broker in self.brokers:
                election, lookup = broker.leader_election, broker.lookup
                if election is not None and election.is_leader() and lookup is not None:
                    lookup.selector.set_affinity(target.bundle_range.name, destination_broker)
        for broker in self.brokers:
            if broker.unloader is not None and broker.ownership.is_owned(target):
                await broker.unloader.unload(target)
                return
        raise UnknownBrokerError(f"no simulated broker owns {bundle}")


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
                    leader_unload=cluster.unload,
                    trace_writes_in_thread=False,
                )
            )
            cluster.brokers.append(broker)
        yield cluster
