"""The leader's unloads and splits, carried out by the bundle's owner (spec §4.1, §5.4, §6.3).

Pulsar's leader never unloads or splits a bundle itself: it calls
``unloadNamespaceBundle(namespace, range, destinationBroker)`` and
``splitNamespaceBundle(namespace, range, unload, null)`` through its admin client, and the call
reaches the broker that owns the bundle. :class:`OwnerCalls` does the same:

- a ``destinationBroker`` first becomes the leader's one-shot placement affinity for the bundle
  range (what the leader's own unload endpoint does), so the next lookup lands there;
- the owner is read from the bundle's ownership node; nobody owning it is nothing to do (the
  endpoint's 204), the leader owning it unloads or splits it locally, and any other owner gets the
  admin call (:class:`OwnerAdmin`, over its REST API in a broker: ``admin.owner_admin``);
- each call is bounded by :data:`OWNER_CALL_TIMEOUT` on the injected clock; a dead owner, a
  refused call or a timeout raises :class:`OwnerCallError`, which the shedding and split runners
  log and count (the leader carries on).

:meth:`OwnerCalls.unload` is a
:class:`~emubroker.loadbalance.runtime.shedding_runtime.BundleUnloader` and :meth:`OwnerCalls.split`
a :class:`~emubroker.loadbalance.runtime.split_runtime.BundleSplitRequest`: the leader's seams,
which tests and the in-process harness may fill with their own.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final, Protocol, TypeVar

import anyio

from emubroker.loadbalance.strategies.isolation import bundle_range_of, namespace_of
from emubroker.naming import BundleRange, NamespaceBundle, NamespaceName

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from emubroker.loadbalance.ownership.records import BrokerInfo, BundleOwner
    from protocol.clock import Clock

__all__ = ["OWNER_CALL_TIMEOUT", "OwnerAdmin", "OwnerCallError", "OwnerCalls", "parse_bundle"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

OWNER_CALL_TIMEOUT: Final = 60.0
"""Seconds an unload or split may take at the owner (``PulsarAdmin``'s default read timeout)."""


class OwnerCallError(Exception):
    """The owner could not be reached, refused the call, or did not answer in time."""


class OwnerAdmin(Protocol):
    """The admin calls the leader sends to another broker (its ``PulsarAdmin`` client)."""

    async def unload(
        self, owner: BrokerInfo, bundle: NamespaceBundle, *, reason: str, destination: str
    ) -> None:
        """``PUT .../{bundle}/unload?authoritative=true`` at ``owner``.

        ``reason`` and ``destination`` go into the owner's ``unload`` trace row.

        Raises:
            OwnerCallError: The call failed.
        """
        ...

    async def split(self, owner: BrokerInfo, bundle: NamespaceBundle, *, unload: bool) -> None:
        """``PUT .../{bundle}/split?unload=...&authoritative=true`` at ``owner``.

        Raises:
            OwnerCallError: The call failed.
        """
        ...


class _Ownership(Protocol):
    @property
    def me(self) -> BrokerInfo: ...

    async def get_owner(self, bundle: NamespaceBundle) -> BundleOwner | None: ...


def parse_bundle(bundle: str) -> NamespaceBundle:
    """``tenant/namespace/0x..._0x...`` as a :class:`NamespaceBundle`.

    Raises:
        InvalidNameError: Not a bundle name.
    """
    return NamespaceBundle(
        NamespaceName.parse(namespace_of(bundle)), BundleRange.parse(bundle_range_of(bundle))
    )


class OwnerCalls:
    """Unloads and splits bundles wherever they are owned (see the module docstring).

    Args:
        ownership: This broker's ownership table (who owns a bundle).
        clock: Times each call.
        remote: The admin calls to other brokers.
        unload_local: Unloads a bundle this broker owns (``BundleUnloader.unload``), given the
            reason and destination of its ``unload`` trace row.
        split_local: Splits a bundle this broker owns with the default algorithm, unloading the
            children when asked; returns the children (``BundleSplitter.split``).
        set_affinity: The leader's placement affinity (``BrokerSelector.set_affinity``).
        children_of: The bundles now covering a split bundle's range (read after a remote split).
        timeout: Seconds allowed per call.
    """

    def __init__(
        self,
        ownership: _Ownership,
        clock: Clock,
        *,
        remote: OwnerAdmin,
        unload_local: Callable[[NamespaceBundle, str, str], Awaitable[object]],
        split_local: Callable[[NamespaceBundle, bool], Awaitable[Sequence[NamespaceBundle]]],
        set_affinity: Callable[[str, str], None],
        children_of: Callable[[NamespaceBundle], Awaitable[Sequence[NamespaceBundle]]],
        timeout: float = OWNER_CALL_TIMEOUT,
    ) -> None:
        self._ownership = ownership
        self._clock = clock
        self._remote = remote
        self._unload_local = unload_local
        self._split_local = split_local
        self._set_affinity = set_affinity
        self._children_of = children_of
        self._timeout = timeout
        self.failed_calls = 0

    async def unload(
        self, bundle: str, destination_broker: str | None = None, *, reason: str = "admin"
    ) -> None:
        """Unload ``bundle`` at its owner; it lands on ``destination_broker`` when named.

        ``reason`` (``admin``, or the leader's ``shedding``) is the owner's ``unload`` trace row's.

        Raises:
            OwnerCallError: The owner could not unload it.
        """
        target = parse_bundle(bundle)
        if destination_broker:
            self._set_affinity(target.bundle_range.name, destination_broker)
        owner = await self._owner(target)
        if owner is None:
            log.info("namespace bundle %s is not owned by any broker", bundle)
            return
        if owner == self._ownership.me:
            await self._bounded(
                f"unloading {bundle}",
                self._unload_local(target, reason, destination_broker or ""),
            )
            return
        await self._bounded(
            f"unloading {bundle} at {owner.http_url}",
            self._remote.unload(owner, target, reason=reason, destination=destination_broker or ""),
        )

    async def split(self, bundle: str, unload: bool) -> list[str]:
        """Split ``bundle`` at its owner (default algorithm); returns the children's names.

        Raises:
            OwnerCallError: The owner could not split it, or nobody owns it.
        """
        target = parse_bundle(bundle)
        owner = await self._owner(target)
        if owner is None:
            # Pulsar's split endpoint acquires an unowned bundle and splits it; the leader's
            # own split does the same here.
            owner = self._ownership.me
        if owner == self._ownership.me:
            children = await self._bounded(f"splitting {bundle}", self._split_local(target, unload))
        else:
            await self._bounded(
                f"splitting {bundle} at {owner.http_url}",
                self._remote.split(owner, target, unload=unload),
            )
            children = await self._children_of(target)
        return [str(child) for child in children]

    async def _owner(self, bundle: NamespaceBundle) -> BrokerInfo | None:
        try:
            found = await self._ownership.get_owner(bundle)
        except Exception as exc:
            self.failed_calls += 1
            raise OwnerCallError(f"the owner of {bundle} could not be read: {exc}") from exc
        return None if found is None else found.broker

    async def _bounded(self, what: str, call: Awaitable[_T]) -> _T:
        outcome: list[_T] = []
        failure: list[Exception] = []

        async def run(scope: anyio.CancelScope) -> None:
            try:
                outcome.append(await call)
            except Exception as exc:  # reported below, outside the task group
                failure.append(exc)
            scope.cancel()  # the timer

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, tg.cancel_scope)
            tg.start_soon(self._cancel_after, tg.cancel_scope)
        if outcome:
            return outcome[0]
        self.failed_calls += 1
        if failure:
            exc = failure[0]
            if isinstance(exc, OwnerCallError):
                raise exc
            raise OwnerCallError(f"{what} failed: {exc}") from exc
        raise OwnerCallError(f"{what}: no answer within {self._timeout} s")

    async def _cancel_after(self, scope: anyio.CancelScope) -> None:
        await self._clock.sleep(self._timeout)
        scope.cancel()
