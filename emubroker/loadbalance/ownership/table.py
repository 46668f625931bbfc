"""Bundle ownership: which broker serves a topic (spec/pulsar-behaviour.md §3.1, §6.1, §6.3).

A topic belongs to the namespace bundle whose hash range contains the CRC-32 of its name
(``naming.topic_hash``/``bundle_for``). A bundle is owned by the broker holding the ephemeral
metadata node ``/namespace/<tenant>/<ns>/<0xlower_0xupper>`` whose value is Pulsar's
``NamespaceEphemeralData`` JSON; whoever creates it first (``expected_version=-1``) owns it, the
ZooKeeper lock Pulsar's ``OwnershipCache`` takes. Rules:

The records (``BrokerInfo``, ``BundleOwner``, the node's JSON) are ``records``'.

1. This broker answers for the bundles it holds without a store round trip (Pulsar's
   ``ownedBundlesCache``); for the others it reads the node, and keeps what it read while its
   watch (rule 3) runs, until the watch tells of a change to that node (Pulsar's
   ``ownershipReadOnlyCache``, a metadata cache its notifications invalidate). Only owners are
   kept, never "nobody": a bundle nobody owns is about to be placed.
2. An owned bundle is *active* until its unload begins (§6.3 step 1); from then on this broker
   reports it as ``disabled`` (lookups answer "being unloaded") and serves no new producer or
   consumer for it, until the node is deleted (step 3).
3. The node lives as long as this broker's metadata session. When it goes without this broker
   releasing it (the session expired: the broker was frozen, or lost the store for longer than
   ``metadataStoreSessionTimeoutMillis``), the bundle is *lost*: :meth:`OwnershipTable.watch`
   forgets it and tells ``on_lost``, which closes its topics without writing anything more
   (another broker may already own them), as Pulsar does when a ``ResourceLock`` expires.
   A watch that lost notifications re-reads the node of every bundle held.
4. This broker proves its ownership every third of the session timeout
   (:meth:`OwnershipTable.prove`) by reading one of its nodes, as a ZooKeeper client pings its
   session: the store answered and the session that holds every node of this broker is alive
   (a node deleted behind its back is rule 3's watch's to find). Should that node not be this
   session's, every node is read. A broker that cannot reach the metadata store for a whole
   session timeout can no longer prove it owns anything (its session has ended on the store, or
   soon will, and another broker may take its bundles): it drops every bundle as lost.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

import anyio

from emubroker.loadbalance.ownership.records import (
    BrokerInfo,
    BundleOwner,
    owner_from_record,
    ownership_record,
)
from emubroker.metadata import (
    BadVersionError,
    MetadataStoreError,
    NotFoundError,
    NotificationKind,
    StoreClosedError,
    WatchOverflowError,
)
from emubroker.metadata.paths import OWNERSHIP_ROOT, ownership_path
from emubroker.naming import (
    NamespaceBundle,
    NamespaceName,
    bundle_boundaries,
    bundle_for,
    topic_hash,
)
from protocol.clock import AnyioClock

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from anyio.abc import TaskStatus

    from emubroker.metadata import MetadataStore
    from emubroker.naming import TopicName
    from protocol.clock import Clock

__all__ = ["OwnershipTable"]

log = logging.getLogger(__name__)

_WATCH_RETRY_DELAY = 1.0
"""Seconds before a failed ownership watch is opened again."""

_BUNDLES_KEPT = 100_000
"""Topics whose bundle is kept (``bundle_of``); past it the memory starts again."""


class OwnershipTable:
    """Maps topics to bundles and bundles to their owning broker (see the module docstring).

    Args:
        store: This broker's metadata session; the lock nodes are ephemeral in it, so they vanish
            when the broker (its session) goes away.
        me: This broker's URLs, written into the nodes it creates.
        bundles_per_namespace: Bundles of a namespace without recorded boundaries
            (``defaultNumberOfNamespaceBundles``).
        on_lost: Called with a bundle this broker held and lost (rule 3).
        clock: Times the retries of a failed watch.
    """

    def __init__(
        self,
        store: MetadataStore,
        me: BrokerInfo,
        *,
        bundles_per_namespace: int,
        on_lost: Callable[[NamespaceBundle], Awaitable[None]] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._store = store
        self._clock = clock or AnyioClock()
        self.me = me
        self.on_lost = on_lost
        self._default_boundaries = bundle_boundaries(bundles_per_namespace)
        self._boundaries: dict[NamespaceName, tuple[int, ...]] = {}
        # Each topic's bundle with the boundaries it was found in: lookups, attachments and the
        # load reports ask per topic (thousands at scale); a split's new boundaries redo it.
        self._bundles: dict[TopicName, tuple[tuple[int, ...], NamespaceBundle]] = {}
        # Bundles this broker holds -> whether they are active (rules 1 and 2).
        self._owned: dict[NamespaceBundle, bool] = {}
        # The lock node of each bundle held, so that a deletion notification finds its bundle
        # at once (a broker of a large cluster holds hundreds; the watch sees every deletion).
        self._held_paths: dict[str, NamespaceBundle] = {}
        self._releasing: set[NamespaceBundle] = set()
        # Bumped whenever a bundle starts leaving (disable, release, loss): a topic load that
        # began before a bump must not register what it opened (``hand_overs``).
        self._hand_overs: dict[NamespaceBundle, int] = {}
        # Other brokers' lock nodes as read, by path (rule 1): kept only while the watch runs;
        # a read that a notification overtook is not kept (it may be older than the change).
        self._others: dict[str, BundleOwner] = {}
        self._watching = False
        self._notifications = 0
        self._record = ownership_record(me)

    # ---- topics and bundles -------------------------------------------------------------------

    def set_boundaries(self, namespace: NamespaceName, boundaries: tuple[int, ...]) -> None:
        """Record a namespace's bundle boundaries (from its policies; splits update them)."""
        self._boundaries[namespace] = boundaries

    def boundaries(self, namespace: NamespaceName) -> tuple[int, ...]:
        """A namespace's bundle boundaries as this broker knows them."""
        return self._boundaries.get(namespace, self._default_boundaries)

    def bundle_of(self, topic: TopicName) -> NamespaceBundle:
        """The bundle a topic belongs to (§5.2)."""
        boundaries = self.boundaries(topic.namespace)
        kept = self._bundles.get(topic)
        if kept is not None and kept[0] is boundaries:
            return kept[1]
        bundle = NamespaceBundle(topic.namespace, bundle_for(topic_hash(topic), boundaries))
        if len(self._bundles) >= _BUNDLES_KEPT:
            self._bundles.clear()
        self._bundles[topic] = (boundaries, bundle)
        return bundle

    # ---- what this broker holds ---------------------------------------------------------------

    def owned_bundles(self) -> list[NamespaceBundle]:
        """Bundles this broker owns (being unloaded included), sorted by name."""
        return sorted(self._owned, key=str)

    def is_owned(self, bundle: NamespaceBundle) -> bool:
        """Whether this broker holds the bundle's lock (active or being unloaded)."""
        return bundle in self._owned

    def is_serving(self, bundle: NamespaceBundle) -> bool:
        """Whether this broker owns the bundle and is not unloading it.

        Pulsar's ``checkOwnershipAsync``: owned and active.
        """
        return self._owned.get(bundle, False)

    def known_owner(self, bundle: NamespaceBundle) -> BundleOwner | None:
        """The active owner of ``bundle`` as known without the store (rule 1), else None.

        This broker for a bundle it serves, another broker as kept from an earlier read; None
        when only a read (or a placement) can tell, and for a bundle this broker is unloading.
        """
        active = self._owned.get(bundle)
        if active is not None:
            return BundleOwner(self.me) if active else None
        return self._others.get(ownership_path(bundle))

    def hand_overs(self, bundle: NamespaceBundle) -> int:
        """How many times the bundle started leaving this broker (unload or loss)."""
        return self._hand_overs.get(bundle, 0)

    def _handing_over(self, bundle: NamespaceBundle) -> None:
        self._hand_overs[bundle] = self._hand_overs.get(bundle, 0) + 1

    def disable(self, bundle: NamespaceBundle) -> None:
        """Mark an owned bundle as being unloaded (rule 2); a no-op for others."""
        if bundle in self._owned:
            self._owned[bundle] = False
            self._handing_over(bundle)

    # ---- the lock nodes -----------------------------------------------------------------------

    async def get_owner(self, bundle: NamespaceBundle) -> BundleOwner | None:
        """Who owns ``bundle`` now, or None (Pulsar's ``getOwnerAsync``; rule 1).

        Raises:
            MetadataStoreError: The metadata store failed.
        """
        active = self._owned.get(bundle)
        if active is not None:
            return BundleOwner(self.me, disabled=not active)
        path = ownership_path(bundle)
        owner = self._others.get(path)
        if owner is not None:
            return owner
        seen = self._notifications
        node = await self._store.get(path)
        if node is None:
            return None
        owner = owner_from_record(node.value)
        if (
            self._watching
            and seen == self._notifications
            and not node.created_by_self
            and owner.broker != self.me
        ):
            self._others[path] = owner
        return owner

    async def try_acquire(self, bundle: NamespaceBundle) -> BundleOwner:
        """Take ``bundle`` for this broker unless somebody holds it; returns the owner either way.

        Raises:
            MetadataStoreError: The metadata store failed.
        """
        active = self._owned.get(bundle)
        if active is not None:
            return BundleOwner(self.me, disabled=not active)
        path = ownership_path(bundle)
        for _ in range(2):
            try:
                await self._store.put(path, self._record, expected_version=-1, ephemeral=True)
            except BadVersionError:
                node = await self._store.get(path)
                if node is None:
                    continue  # released between our put and get: try again
                if node.value == self._record and not node.created_by_self:
                    # Left by an earlier session of this broker (restarted on the same ports
                    # before it expired): take it over, as Pulsar's lock revalidation does.
                    with contextlib.suppress(NotFoundError, BadVersionError):
                        await self._store.delete(path, node.version)
                    continue
                owner = owner_from_record(node.value)
                if owner.broker.service_url != self.me.service_url or not node.created_by_self:
                    return owner
                # Ours from this very session (a concurrent acquire won): adopt it.
            self._owned[bundle] = True
            self._held_paths[path] = bundle
            log.info("acquired ownership of bundle %s", bundle)
            return BundleOwner(self.me)
        raise BadVersionError(f"ownership of {bundle} keeps changing")

    async def owner_of_bundle(self, bundle: NamespaceBundle) -> BrokerInfo:
        """The broker that owns ``bundle``, taking it for this broker if nobody does.

        What a split uses to take its children (``bundle_split``).

        Raises:
            MetadataStoreError: The metadata store failed.
        """
        return (await self.try_acquire(bundle)).broker

    async def release(self, bundle: NamespaceBundle) -> None:
        """Give up a bundle we own (unload, §6.3 step 3); a no-op for bundles we do not own.

        Raises:
            MetadataStoreError: The metadata store failed (the bundle is forgotten anyway; the
                node goes with the session).
        """
        if bundle not in self._owned:
            return
        del self._owned[bundle]
        path = ownership_path(bundle)
        del self._held_paths[path]
        self._handing_over(bundle)
        self._releasing.add(bundle)
        try:
            node = await self._store.get(path)
            if node is not None and node.created_by_self:
                await self._store.delete(path, node.version)
        except (NotFoundError, BadVersionError):
            pass  # already gone, or no longer ours
        finally:
            self._releasing.discard(bundle)
        log.info("released ownership of bundle %s", bundle)

    # ---- losing bundles (rule 3) --------------------------------------------------------------

    async def watch(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Watch the lock nodes of the bundles held until the store closes (rule 3)."""
        started = False
        while True:
            try:
                async with self._store.watch(OWNERSHIP_ROOT) as notifications:
                    self._watching = True
                    try:
                        if not started:
                            task_status.started()
                            started = True
                        else:
                            await self._verify(list(self._owned))
                        async for notification in notifications:
                            self._notifications += 1
                            self._others.pop(notification.path, None)
                            if notification.kind is NotificationKind.DELETED:
                                await self._deleted(notification.path)
                    finally:
                        self._forget_others()
                return
            except WatchOverflowError:
                log.warning("ownership watch lost notifications; checking every bundle held")
            except StoreClosedError:
                return
            except MetadataStoreError as exc:
                log.warning("ownership watch failed (%s); watching again", exc)
                await self._clock.sleep(_WATCH_RETRY_DELAY)

    async def prove(
        self, session_timeout: float, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Prove ownership every third of ``session_timeout`` until cancelled (rule 4).

        The nodes of the bundles held are read; once none could be read for
        ``session_timeout`` seconds, every bundle is dropped as lost.
        """
        task_status.started()
        proven = self._clock.now()
        while True:
            await self._clock.sleep(session_timeout / 3)
            if not self._owned:
                proven = self._clock.now()
                continue
            try:
                # One read, not one per bundle held (hundreds on a broker of a large cluster).
                if not await self._still_held(next(iter(self._owned))):
                    await self._verify(list(self._owned))
            except StoreClosedError:
                return
            except MetadataStoreError as exc:
                if self._clock.now() - proven < session_timeout:
                    log.warning("cannot prove ownership of bundles (%s); retrying", exc)
                    continue
                log.warning(
                    "metadata store unreachable for %s s: dropping every bundle held",
                    session_timeout,
                )
                for bundle in list(self._owned):
                    await self._lose(bundle)
            proven = self._clock.now()

    def _forget_others(self) -> None:
        # Unwatched, the nodes read may change unseen: read them again from now on.
        self._watching = False
        self._notifications += 1
        self._others.clear()

    async def _deleted(self, path: str) -> None:
        bundle = self._held_paths.get(path)
        if bundle is not None and bundle not in self._releasing:
            await self._verify([bundle])

    async def _still_held(self, bundle: NamespaceBundle) -> bool:
        node = await self._store.get(ownership_path(bundle))
        return node is not None and node.created_by_self

    async def _verify(self, bundles: list[NamespaceBundle]) -> None:
        for bundle in bundles:
            if bundle not in self._owned or bundle in self._releasing:
                continue
            node = await self._store.get(ownership_path(bundle))
            if node is not None and node.created_by_self:
                continue  # the deletion was old news: the node is ours again
            if bundle not in self._owned:
                continue  # released while we read
            await self._lose(bundle)

    async def _lose(self, bundle: NamespaceBundle) -> None:
        if self._owned.pop(bundle, None) is None:
            return
        del self._held_paths[ownership_path(bundle)]
        self._handing_over(bundle)
        log.warning("lost ownership of bundle %s (metadata session ended)", bundle)
        if self.on_lost is not None:
            await self.on_lost(bundle)
