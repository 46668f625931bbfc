"""A test cluster in one background thread: N brokers, one metadata tree, one bookie stub.

Every broker runs on the thread's event loop (anyio's asyncio backend, through a blocking
portal, as ``run_broker_in_thread`` runs one) with its own metadata session on a shared
``MemoryMetadataTree`` and its own in-process client of one stub server (bookie mode, as
``emubroker cluster`` runs them). Each binds free loopback ports on its first start and keeps
them across restarts, so its broker id and URLs do not change. Time is real: the official
client on the other side runs in real time.

A kill is a crash: the broker's bookie client is cut and its metadata session ended first (its
locks and ownerships vanish at once, as when a crashed broker's session expires), then its tasks
are cancelled, which drops its connections. Nothing it does on the way out reaches the stub or
the metadata. A stop is Pulsar's graceful shutdown (``Broker.shutdown``: unregister, unload
every bundle), then the same teardown with the session closed normally.
"""

from __future__ import annotations

import contextlib
import logging
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from anyio.from_thread import start_blocking_portal

from emubroker.app import open_broker
from emubroker.config import load_config
from emubroker.metadata import MemoryMetadataTree
from emubroker.storage import BookieBackend
from emubroker.testing.backend import BrokerHandle
from storage_stub.client import DEFAULT_REQUEST_TIMEOUT, StubClient
from storage_stub.local import LocalChannel
from storage_stub.server import open_stub_server

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from concurrent.futures import Future

    from anyio.abc import TaskStatus
    from anyio.from_thread import BlockingPortal

    from emubroker.app import Broker
    from emubroker.metadata import MemoryMetadataStore
    from storage_stub.server import StubServer

__all__ = ["ThreadCluster", "run_thread_cluster"]

log = logging.getLogger(__name__)


@dataclass
class _Node:
    """One broker slot: its ports, and while it runs, what a kill must reach."""

    ports: tuple[int, int] = (0, 0)
    handle: BrokerHandle | None = None
    broker: Broker | None = None
    store: MemoryMetadataStore | None = None
    channel: LocalChannel | None = None
    scope: anyio.CancelScope | None = None
    done: anyio.Event | None = None
    task: Future[None] | None = None
    killed: bool = False


class ThreadCluster:
    """The brokers of :func:`run_thread_cluster` (a ``ClusterBackend``)."""

    mode = "thread"

    def __init__(
        self,
        portal: BlockingPortal,
        tree: MemoryMetadataTree,
        server: StubServer,
        stub: StubClient,
        overrides: Mapping[str, Any],
        count: int,
    ) -> None:
        self.portal = portal
        self.stub = stub
        self._tree = tree
        self._server = server
        self._overrides = dict(overrides)
        self._nodes = [_Node() for _ in range(count)]

    # ---- ClusterBackend -----------------------------------------------------------------------

    def brokers(self) -> list[BrokerHandle]:
        return [node.handle for node in self._nodes if node.handle is not None]

    def is_running(self, index: int) -> bool:
        return self._nodes[index].broker is not None

    def start(self, index: int) -> None:
        node = self._nodes[index]
        # The node's ``done`` event belongs to the loop: made there, in ``_serve``.
        node.task, _ = self.portal.start_task(self._serve, node)

    def kill(self, index: int) -> None:
        self.portal.call(self._kill, self._nodes[index])
        self._reap(self._nodes[index])

    def stop(self, index: int) -> None:
        self.portal.call(self._stop, self._nodes[index])
        self._reap(self._nodes[index])

    def close(self) -> None:
        """Stop every running broker (no hand-over: the whole cluster goes)."""
        for node in self._nodes:
            if node.broker is not None:
                self.portal.call(self._cancel, node)
                self._reap(node)

    # ---- on the loop --------------------------------------------------------------------------

    async def _serve(self, node: _Node, *, task_status: TaskStatus[None]) -> None:
        done = node.done = anyio.Event()
        node.killed = False
        config = load_config(
            overrides={
                **self._overrides,
                "brokerServicePort": node.ports[0],
                "webServicePort": node.ports[1],
            }
        )
        try:
            with anyio.CancelScope() as scope:
                node.scope = scope
                async with AsyncExitStack() as stack:
                    store = self._tree.open_session()
                    stack.push_async_callback(store.aclose)  # after the broker: its locks go too
                    channel = LocalChannel(
                        self._server.service, request_timeout=DEFAULT_REQUEST_TIMEOUT
                    )
                    stack.callback(channel.shutdown)
                    broker = await stack.enter_async_context(
                        open_broker(
                            config,
                            metadata=store,
                            ledgers=BookieBackend(StubClient(channel)),
                            alone=len(self._nodes) == 1,
                        )
                    )
                    node.broker, node.store, node.channel = broker, store, channel
                    port, admin_port = broker.config.brokerServicePort, broker.config.webServicePort
                    node.ports = (port, admin_port)
                    host = broker.config.advertised_host()
                    node.handle = BrokerHandle(
                        index=self._nodes.index(node),
                        id=f"{host}:{admin_port}",
                        service_url=broker.service_url,
                        admin_url=broker.admin_url,
                    )
                    task_status.started()
                    await anyio.sleep_forever()
        except Exception:
            # A crashed broker's last steps fail (its storage is gone): that is the point.
            if not node.killed:
                raise
            log.debug("broker %s failed on its way down after the kill", node.handle, exc_info=True)
        finally:
            node.broker = node.store = node.channel = node.scope = None
            done.set()

    async def _kill(self, node: _Node) -> None:
        if node.channel is None or node.store is None or node.scope is None:
            return
        node.killed = True
        # In this order, with no checkpoint in between: the broker's tasks run again only
        # after its storage is unreachable and its session (locks, ownerships) has ended.
        node.channel.shutdown()
        node.scope.cancel()
        await node.store.aclose()
        await self._ended(node)

    async def _stop(self, node: _Node) -> None:
        if node.broker is None:
            return
        await node.broker.shutdown()
        await self._cancel(node)

    async def _cancel(self, node: _Node) -> None:
        if node.scope is not None:
            node.scope.cancel()
        await self._ended(node)

    @staticmethod
    async def _ended(node: _Node) -> None:
        if node.done is not None:
            await node.done.wait()

    def _reap(self, node: _Node) -> None:
        # The broker's task ended: re-raise what it failed with, if anything (not a kill's).
        if node.task is not None:
            task, node.task = node.task, None
            task.result()


@contextlib.contextmanager
def run_thread_cluster(brokers: int, overrides: Mapping[str, Any]) -> Iterator[ThreadCluster]:
    """Start ``brokers`` brokers in a background thread; stop them and the stub on exit.

    Args:
        brokers: How many.
        overrides: ``broker.conf`` keys every broker starts with.

    Yields:
        The running brokers, broker 0 leading (it started first).
    """
    with contextlib.ExitStack() as stack:
        portal = stack.enter_context(start_blocking_portal("asyncio"))
        server = stack.enter_context(portal.wrap_async_context_manager(open_stub_server()))
        stub = stack.enter_context(portal.wrap_async_context_manager(server.open_local_client()))
        cluster = ThreadCluster(portal, MemoryMetadataTree(), server, stub, overrides, brokers)
        stack.callback(cluster.close)
        for index in range(brokers):
            cluster.start(index)
        yield cluster
