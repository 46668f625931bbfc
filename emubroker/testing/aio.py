"""The cluster controls as coroutines: ``await cluster.aio.kill(owner)`` in async tests.

Each coroutine runs the synchronous control in a worker thread (``anyio.to_thread``), so it
works on whatever loop awaits it (asyncio, trio, pytest's anyio plugin or pytest-trio) and never
blocks that loop while brokers start, stop or answer admin calls.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from anyio import to_thread

if TYPE_CHECKING:
    from collections.abc import Callable

    from emubroker.testing.backend import BrokerHandle
    from emubroker.testing.controls import ClusterControls, DispatchLevel
    from emubroker.testing.storage import StorageFaults
    from emubroker.testing.targets import Bundle
    from storage_stub.messages import StatsReply

__all__ = ["AsyncPulsarCluster", "AsyncStorageFaults"]

T = TypeVar("T")


async def _off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await to_thread.run_sync(partial(fn, *args, **kwargs))


class AsyncStorageFaults:
    """``cluster.aio.storage``: :class:`~emubroker.testing.storage.StorageFaults` as coroutines."""

    def __init__(self, storage: StorageFaults) -> None:
        self._storage = storage

    async def inject(self, **faults: Any) -> None:
        await _off_loop(self._storage.inject, **faults)

    async def clear(self) -> None:
        await _off_loop(self._storage.clear)

    async def statistics(self) -> StatsReply:
        return await _off_loop(self._storage.statistics)


class AsyncPulsarCluster:
    """``cluster.aio``: the cluster's controls (``testing.controls``) as coroutines.

    The URLs and broker handles need no I/O: read them from the cluster itself.
    """

    def __init__(self, cluster: ClusterControls) -> None:
        self.sync = cluster
        self.storage = AsyncStorageFaults(cluster.storage)

    async def leader(self) -> BrokerHandle:
        return await _off_loop(lambda: self.sync.leader)

    async def owner_of(self, topic: str) -> BrokerHandle | None:
        return await _off_loop(self.sync.owner_of, topic)

    async def bundle_of(self, topic: str) -> Bundle:
        return await _off_loop(self.sync.bundle_of, topic)

    async def bundles(self, namespace: str) -> list[Bundle]:
        return await _off_loop(self.sync.bundles, namespace)

    async def unload(
        self, target: str | Bundle, *, to: BrokerHandle | int | str | None = None
    ) -> None:
        await _off_loop(self.sync.unload, target, to=to)

    async def split(self, bundle: str | Bundle, **options: Any) -> None:
        await _off_loop(self.sync.split, bundle, **options)

    async def kill(self, broker: BrokerHandle | int | str) -> None:
        await _off_loop(self.sync.kill, broker)

    async def stop(self, broker: BrokerHandle | int | str) -> None:
        await _off_loop(self.sync.stop, broker)

    async def restart(self, broker: BrokerHandle | int | str) -> None:
        await _off_loop(self.sync.restart, broker)

    async def set_dispatch_rate(
        self, level: DispatchLevel, target: str | None = None, **rate: Any
    ) -> None:
        await _off_loop(self.sync.set_dispatch_rate, level, target, **rate)

    async def set_config(self, key: str, value: object) -> None:
        await _off_loop(self.sync.set_config, key, value)

    async def admin(self, method: str, path: str, body: Any = None) -> Any:
        return await _off_loop(self.sync.admin, method, path, body)

    async def wait_until_owned(self, topic: str, **options: Any) -> BrokerHandle:
        return await _off_loop(self.sync.wait_until_owned, topic, **options)

    async def wait_for_leader(self, **options: Any) -> BrokerHandle:
        return await _off_loop(self.sync.wait_for_leader, **options)
