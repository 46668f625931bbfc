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

5. An unload with a destination broker under a manager that *transfers* (the extensible one with
   ``loadBalancerMultiPhaseBundleUnload``, ``LoadManager.transfers``) is Pulsar's transfer
   (``ServiceUnitStateChannelImpl``: Releasing, Assigning, Owned): the topics close as in step
   2 but their clients are not told yet (``HeldCloses``: their SENDs are dropped unanswered,
   as Pulsar ignores them while a topic transfers); once the node is deleted, the destination
   takes the bundle (``TakeOver``: its authoritative lookup of one of the topics, as a broker
   told "you own it" does), and only then do the clients get CLOSE_PRODUCER / CLOSE_CONSUMER
   with the destination's address (``assignedBrokerServiceUrl``), so that they reconnect
   there without a lookup. Should the destination fail to take it within
   ``namespaceBundleUnloadingTimeoutMs``, the clients are told without an address and look
   the topic up (the leader's placement sends the bundle to the destination all the same).
   A bundle without clients is unloaded as in steps 1-3.

A bundle *lost* (its node went with an expired session: ``ownership`` rule 3) closes its topics
without flushing anything: another broker may own them already, and only it may write.
:meth:`BundleUnloader.unload_all` unloads every bundle held, within ``brokerShutdownTimeoutMs``
(SIGTERM).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, TypeAlias

import anyio

from emubroker.loadbalance.model.extensible_data import Unload
from emubroker.loadbalance.trace.records import LoadBalancerTraceRecord, unload_record
from emubroker.naming import AssignedBroker, NamespaceBundle, TopicName

if TYPE_CHECKING:
    from emubroker.loadbalance.ownership.table import OwnershipTable
    from protocol.clock import Clock

__all__ = ["BundleUnloader", "CloseBundleTopics", "HeldClients", "TakeOver"]


class HeldClients(Protocol):
    """The clients of a transferred bundle's topics, told later (``topics.sinks.HeldCloses``).

    Attributes:
        topics: The topics closed while holding their clients.
    """

    topics: list[TopicName]

    def __bool__(self) -> bool:
        """Whether any client waits to be told."""
        ...

    def send(self, assigned: AssignedBroker | None) -> None:
        """Tell every held client, with where to reconnect (None: they look the topic up)."""
        ...


log = logging.getLogger(__name__)

CloseBundleTopics: TypeAlias = Callable[[NamespaceBundle, bool, HeldClients | None], Awaitable[int]]
"""``close(bundle, graceful, held)``: close the bundle's topics (flushing their cursors when
graceful) and forget them, their clients told now or, with ``held``, later (rule 5); returns how
many were closed."""

TakeOver: TypeAlias = Callable[[str, TopicName], Awaitable[AssignedBroker]]
"""``take_over(broker_id, topic)``: make that broker the owner of ``topic``'s bundle (nobody
owns it now); returns where the bundle's clients reconnect. Raises on any failure (rule 5)."""


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
        transfers: Whether an unload with a destination is a transfer now (rule 5; the load
            manager's ``transfers`` of the live configuration).
        take_over: How a destination takes a transferred bundle; without it, no transfers.
        hold: Makes the holder of a transfer's clients (``topics.sinks.HeldCloses``).
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
        transfers: Callable[[], bool] = lambda: False,
        take_over: TakeOver | None = None,
        hold: Callable[[], HeldClients] | None = None,
    ) -> None:
        self._hold = hold
        self._ownership = ownership
        self._transfers = transfers
        self._take_over = take_over
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
        ``destination`` is the broker the leader will place the bundle on, if it named one, and
        where the bundle is transferred to when the load manager transfers (rule 5).

        Raises:
            MetadataStoreError: Releasing the ownership node failed (the bundle is no longer
                served here; its node goes with the session).
        """
        ownership = self._ownership
        if not ownership.is_owned(bundle):
            return False
        held = self._hold() if self._hold is not None and self._transfers_to(destination) else None
        ownership.disable(bundle)
        log.info("unloading bundle %s", bundle)
        started = self._clock.now()
        assigned: AssignedBroker | None = None
        try:
            try:
                closed = await self._within(self._timeout, bundle, graceful=True, held=held)
            finally:
                await ownership.release(bundle)  # whatever closing the topics did
            if held:
                assigned = await self._hand_over(bundle, destination, held.topics[0])
        finally:
            if held is not None:
                held.send(assigned)  # whatever happened: a held client must not wait forever
        if assigned is not None:
            log.info("transferred bundle %s to %s (%s topics closed)", bundle, destination, closed)
        else:
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

    def _transfers_to(self, destination: str) -> bool:
        """Whether an unload to ``destination`` is a transfer (rule 5)."""
        return (
            bool(destination)
            and destination != self._broker_id
            and self._take_over is not None
            and self._transfers()
        )

    async def _hand_over(
        self, bundle: NamespaceBundle, destination: str, topic: TopicName
    ) -> AssignedBroker | None:
        """The destination takes the bundle (rule 5); None if it did not in time."""
        assert self._take_over is not None  # _transfers_to checked it
        take_over = self._take_over
        assigned: list[AssignedBroker] = []

        async def take() -> None:
            try:
                assigned.append(await take_over(destination, topic))
            except Exception as exc:  # the clients look the topic up instead
                log.warning("bundle %s: %s did not take it over (%s)", bundle, destination, exc)

        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._cancel_after, self._timeout, scope)
                await take()
                tg.cancel_scope.cancel()
        if scope.cancelled_caught:
            log.warning("bundle %s: %s did not take it over in time", bundle, destination)
        return assigned[0] if assigned else None

    async def _within(
        self,
        seconds: float,
        bundle: NamespaceBundle,
        *,
        graceful: bool,
        held: HeldClients | None = None,
    ) -> int:
        closed = 0

        async def close() -> None:
            nonlocal closed
            closed = await self._close_topics(bundle, graceful, held)

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
