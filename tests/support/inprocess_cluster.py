"""Several brokers in one process, sharing a metadata tree and a stub (component tests).

``inprocess_cluster(clock, n)`` opens an in-process stub server and ``n`` brokers on a FakeClock,
each with its own metadata session on one ``MemoryMetadataTree`` and its own client of the stub
(bookie mode, as ``emubroker cluster`` runs them), without sockets: clients reach a broker over
in-memory streams. Broker ``i`` has the id ``127.0.0.1:<8080+i>`` (its ``advertisedAddress``
may be changed per broker); the first one started leads.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from emubroker.app import Broker, broker_id_of, open_broker
from emubroker.config import load_config
from emubroker.loadbalance.ownership.assignment import LoadManagerSelector
from emubroker.loadbalance.ownership.owner_calls import OwnerCallError
from emubroker.loadbalance.ownership.records import BrokerInfo
from emubroker.metadata import MemoryMetadataStore, MemoryMetadataTree
from emubroker.naming import AssignedBroker, NamespaceBundle, TopicName
from emubroker.storage import BookieBackend
from protocol import commands as c
from protocol.clock import FakeClock
from storage_stub.server import StubServer, open_stub_server
from tests.emubroker.admin.conftest import Wire
from tests.support.broker import WireClient


@dataclass
class Node:
    """One broker of the in-process cluster, and its own exit stack (to stop it alone)."""

    broker: Broker
    stack: AsyncExitStack
    store: MemoryMetadataStore
    wire: Wire = field(init=False)

    def __post_init__(self) -> None:
        self.wire = Wire(self.broker)

    @property
    def broker_id(self) -> str:
        return broker_id_of(self.broker.config)

    async def client(self) -> WireClient:
        """A connected client of this broker."""
        return await self.wire.client()

    async def stop(self) -> None:
        await self.wire.aclose()
        await self.stack.aclose()


@dataclass
class InProcessCluster:
    """The brokers, by index, and what they share."""

    tree: MemoryMetadataTree
    stub: StubServer
    clock: FakeClock
    nodes: list[Node]
    overrides: dict[str, Any]
    node_overrides: Callable[[int], dict[str, Any]] | None = None

    def node_of(self, service_url: str) -> Node:
        return next(n for n in self.nodes if n.broker.service_url == service_url)

    async def start(self, index: int) -> Node:
        """Start broker ``index`` (again)."""
        stack = AsyncExitStack()
        config = load_config(
            overrides={
                "brokerServicePort": 6650 + index,
                "webServicePort": 8080 + index,
                **self.overrides,
                **(self.node_overrides(index) if self.node_overrides else {}),
            }
        )
        owner_admin = InProcessOwnerAdmin(self)
        store = self.tree.open_session()
        stack.push_async_callback(store.aclose)  # after the broker: its locks go with it
        bookie = await stack.enter_async_context(self.stub.open_local_client())
        broker = await stack.enter_async_context(
            open_broker(
                config,
                clock=self.clock,
                metadata=store,
                listen=False,
                admin=False,
                ledgers=BookieBackend(bookie),
                owner_admin=owner_admin,
                take_over=owner_admin.take_over,
            )
        )
        node = Node(broker, stack, store)
        if index < len(self.nodes):
            self.nodes[index] = node
        else:
            self.nodes.append(node)
        return node

    async def lookup(self, topic: str, *, start: int = 0) -> tuple[Node, list[c.Command]]:
        """Follow LOOKUP answers from broker ``start`` to the owner; returns it and the answers."""
        node = self.nodes[start]
        authoritative = False
        answers: list[c.Command] = []
        for _ in range(8):
            client = await node.client()
            await client.send(c.LookupTopic(topic=topic, request_id=1, authoritative=authoritative))
            answer = await client.receive_command()
            answers.append(answer)
            assert isinstance(answer, c.LookupTopicResponse), answer
            assert answer.broker_service_url is not None, answer
            node = self.node_of(answer.broker_service_url)
            if answer.response is c.LookupType.CONNECT:
                return node, answers
            authoritative = answer.authoritative
        raise AssertionError(f"too many redirects: {answers}")


class InProcessOwnerAdmin:
    """The leader's admin calls to another broker of the cluster, made on its objects.

    What the owner's ``PUT .../{bundle}/unload`` and ``.../split?unload=`` endpoints do with
    ``authoritative=true`` (the REST path itself is tested against real processes).
    """

    def __init__(self, cluster: InProcessCluster) -> None:
        self._cluster = cluster
        self.calls: list[tuple[str, str, str]] = []  # (action, owner's http url, bundle)

    async def take_over(self, broker_id: str, topic: TopicName) -> AssignedBroker:
        """A transfer's destination takes the bundle: its authoritative lookup of ``topic``."""
        for node in self._cluster.nodes:
            if node.broker_id == broker_id and node.broker.lookup is not None:
                answer = await node.broker.lookup.lookup_topic(topic, authoritative=True)
                return AssignedBroker(answer.broker.service_url, answer.broker.service_url_tls)
        raise OwnerCallError(f"no broker {broker_id}")

    def _owner(self, owner: BrokerInfo) -> Broker:
        for node in self._cluster.nodes:
            if f"http://{node.broker_id}" == owner.http_url:
                return node.broker
        raise OwnerCallError(f"no broker at {owner.http_url}")

    async def unload(
        self, owner: BrokerInfo, bundle: NamespaceBundle, *, reason: str, destination: str
    ) -> None:
        self.calls.append(("unload", owner.http_url, str(bundle)))
        broker = self._owner(owner)
        assert broker.unloader is not None
        await broker.unloader.unload(bundle, reason=reason, destination=destination)

    async def split(self, owner: BrokerInfo, bundle: NamespaceBundle, *, unload: bool) -> None:
        self.calls.append(("split", owner.http_url, str(bundle)))
        broker = self._owner(owner)
        assert broker.admin is not None
        assert broker.admin.bundle_splitter is not None
        algorithm = broker.config.defaultNamespaceBundleSplitAlgorithm
        await broker.admin.bundle_splitter.split(bundle, algorithm, unload=unload)


def placed_by_leader(cluster: InProcessCluster, leader: int = 0) -> str | None:
    """The broker the placement of broker ``leader`` chose last."""
    lookup = cluster.nodes[leader].broker.lookup
    assert lookup is not None
    selector = lookup.selector
    assert isinstance(selector, LoadManagerSelector)
    assert selector.last is not None
    return selector.last.broker


@asynccontextmanager
async def inprocess_cluster(
    clock: FakeClock,
    n: int = 3,
    *,
    node_overrides: Callable[[int], dict[str, Any]] | None = None,
    **overrides: Any,
) -> AsyncIterator[InProcessCluster]:
    """``n`` brokers in this process (see the module docstring).

    ``overrides`` configure every broker; ``node_overrides(i)`` broker ``i`` alone (e.g. its
    ``advertisedAddress``).
    """
    tree = MemoryMetadataTree()
    async with open_stub_server(clock=clock) as stub:
        cluster = InProcessCluster(tree, stub, clock, [], overrides, node_overrides)
        try:
            for index in range(n):
                await cluster.start(index)
            yield cluster
        finally:
            for node in reversed(cluster.nodes):
                await node.stop()
