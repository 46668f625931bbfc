"""Unloading bundles, as Pulsar's ``OwnedBundle.handleUnloadRequest`` does (spec §6.3).

:meth:`BundleUnloader.unload` is the one way a bundle leaves its owner on purpose (the admin
API's unloads, a split's children, a graceful shutdown):

1. The bundle turns inactive: lookups answer "being unloaded" (``MetadataError``) and new
   producers and consumers are refused, so clients look up again.
2. Its topics close: producers and consumers get CLOSE_PRODUCER / CLOSE_CONSUMER (the client
   keeps its connection and looks up again), appends in flight finish, the cursors are flushed,
   and nothing about the topics stays cached here (the next owner reads the stored state). At
   most ``namespaceBundleUnloadingTimeoutMs``: a close that takes longer is abandoned (logged)
   and the bundle released anyway, as Pulsar does.
3. The ownership node is deleted; the next lookup goes to the leader, which places the bundle.
4. An unload someone asked for (``reason``: ``admin``, the leader's ``shedding``, a split's
   ``split`` for its children) writes one ``unload`` row to the load-balancer trace, at the owner
   that performed it, whoever relayed the call; a shutdown writes none (a stopping broker's rows
   go with it).

A bundle *lost* (its node went with an expired session: ``ownership`` rule 3) closes its topics
without flushing anything: another broker may own them already, and only it may write.
:meth:`BundleUnloader.unload_all` unloads every bundle held, within ``brokerShutdownTimeoutMs``
(SIGTERM).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeAlias

import anyio

from emubroker.loadbalance.model.extensible_data import Unload
from emubroker.loadbalance.trace.records import LoadBalancerTraceRecord, unload_record
from emubroker.naming import NamespaceBundle

if TYPE_CHECKING:
    from emubroker.loadbalance.ownership.table import OwnershipTable
    from protocol.clock import Clock

__all__ = ["BundleUnloader", "CloseBundleTopics"]

log = logging.getLogger(__name__)

CloseBundleTopics: TypeAlias = Callable[[NamespaceBundle, bool], Awaitable[int]]
"""``close(bundle, graceful)``: close the bundle's topics (flushing their cursors when graceful)
and forget them; returns how many were closed."""


class BundleUnloader:
    """Unloads this broker's bundles (see the module docstring).

    Args:
        ownership: This broker's ownership table.
        close_topics: Closes a bundle's topics (the topic service's part).
        clock: Times the unload timeouts.
        unload_timeout: Seconds an unload may spend closing topics
            (``namespaceBundleUnloadingTimeoutMs``).
        trace: Where ``unload`` rows go (the broker's trace ring), if anywhere.
        broker_id: This broker's id (the rows' ``broker`` and ``source_broker``).
    """

    def __init__(
        self,
        ownership: OwnershipTable,
        close_topics: CloseBundleTopics,
        *,
        clock: Clock,
        unload_timeout: float,
        trace: Callable[[LoadBalancerTraceRecord], None] | None = None,
        broker_id: str = "",
    ) -> None:
        self._ownership = ownership
        self._trace = trace
        self._broker_id = broker_id
        self._close_topics = close_topics
        self._clock = clock
        self._timeout = unload_timeout

    async def unload(
        self, bundle: NamespaceBundle, *, reason: str = "", destination: str = ""
    ) -> bool:
        """Unload an owned bundle (rules 1-4); False if this broker does not own it.

        ``reason`` (``admin``, ``shedding``, ``split``) asks for the ``unload`` row (rule 4);
        ``destination`` is the broker the leader will place the bundle on, if it named one.

        Raises:
            MetadataStoreError: Releasing the ownership node failed (the bundle is no longer
                served here; its node goes with the session).
        """
        ownership = self._ownership
        if not ownership.is_owned(bundle):
            return False
        ownership.disable(bundle)
        log.info("unloading bundle %s", bundle)
        started = self._clock.now()
        try:
            closed = await self._within(self._timeout, bundle, graceful=True)
        finally:
            await ownership.release(bundle)  # whatever closing the topics did
        log.info("unloaded bundle %s (%s topics closed)", bundle, closed)
        if reason and self._trace is not None:
            me = self._broker_id
            decision = Unload(source_broker=me, service_unit=str(bundle), dest_broker=destination)
            self._trace(
                unload_record(
                    decision,
                    event="unload",
                    wall_ns=self._clock.wall_ns(),
                    monotonic=self._clock.now(),
                    broker=me,
                    reason=reason,
                    duration_ms=(self._clock.now() - started) * 1000,
                )
            )
        return True

    async def unload_all(self, seconds: float) -> None:
        """Unload every bundle held, together, within ``seconds`` (graceful shutdown)."""
        bundles = self._ownership.owned_bundles()
        if not bundles:
            return
        log.info("unloading %d bundles before stopping", len(bundles))
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._cancel_after, seconds, scope)
                async with anyio.create_task_group() as unloads:
                    for bundle in bundles:
                        unloads.start_soon(self._unload_quietly, bundle)
                tg.cancel_scope.cancel()
        if scope.cancelled_caught:
            log.warning("shutdown: bundles not unloaded within %s s", seconds)

    async def lost(self, bundle: NamespaceBundle) -> None:
        """A bundle whose ownership went with the session: close its topics, write nothing."""
        closed = await self._within(self._timeout, bundle, graceful=False)
        log.warning("bundle %s lost: %s topics closed", bundle, closed)

    async def _unload_quietly(self, bundle: NamespaceBundle) -> None:
        try:
            await self.unload(bundle)
        except Exception:
            log.exception("could not unload bundle %s", bundle)

    async def _within(self, seconds: float, bundle: NamespaceBundle, *, graceful: bool) -> int:
        closed = 0

        async def close() -> None:
            nonlocal closed
            closed = await self._close_topics(bundle, graceful)

        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._cancel_after, seconds, scope)
                await close()
                tg.cancel_scope.cancel()
        if scope.cancelled_caught:
            log.warning("closing the topics of bundle %s timed out after %s s", bundle, seconds)
        return closed

    async def _cancel_after(self, seconds: float, scope: anyio.CancelScope) -> None:
        await self._clock.sleep(seconds)
        scope.cancel()
