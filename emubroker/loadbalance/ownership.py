"""The bundle -> owner table: which broker serves a topic (spec/pulsar-behaviour.md §3.1, §6.1).

A topic belongs to the namespace bundle whose hash range contains the CRC-32 of its name
(``naming.topic_hash``/``bundle_for``). A bundle is owned by the broker holding the ephemeral
metadata node ``/namespace/<tenant>/<ns>/<0xlower_0xupper>`` whose value is Pulsar's
``NamespaceEphemeralData`` JSON. A lookup for an unowned bundle acquires it for this broker by
creating that node (``expected_version=-1``: whoever creates it first owns it, exactly the
ZooKeeper lock Pulsar uses); a bundle somebody else owns answers with the owner's URLs read from
the node. With one broker every bundle ends up ours; with several, the same code returns the
other owner and the handler answers Connect to it, so multi-broker lookup needs no rework here.
Placement by a leader (Redirect) comes with the load manager.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import msgspec

from emubroker.metadata import BadVersionError
from emubroker.metadata.paths import ownership_path
from emubroker.naming import (
    NamespaceBundle,
    NamespaceName,
    bundle_boundaries,
    bundle_for,
    topic_hash,
)

if TYPE_CHECKING:
    from emubroker.metadata import MetadataStore
    from emubroker.naming import TopicName

__all__ = ["BrokerInfo", "NamespaceEphemeralData", "OwnershipTable"]

log = logging.getLogger(__name__)


class BrokerInfo(msgspec.Struct, frozen=True):
    """Where a broker is reached.

    Attributes:
        service_url: ``pulsar://host:port`` of its binary protocol.
        http_url: ``http://host:port`` of its admin API.
        service_url_tls: ``pulsar+ssl://host:port``; empty without a TLS port.
        http_url_tls: ``https://host:port``; empty without an HTTPS port.
    """

    service_url: str
    http_url: str
    service_url_tls: str = ""
    http_url_tls: str = ""


class NamespaceEphemeralData(msgspec.Struct, frozen=True, rename="camel"):
    """Pulsar's ownership record (``NamespaceEphemeralData``), stored as JSON in the lock node."""

    native_url: str
    native_url_tls: str = ""
    http_url: str = ""
    http_url_tls: str = ""
    disabled: bool = False
    advertised_listeners: dict[str, str] = msgspec.field(default_factory=dict)


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(NamespaceEphemeralData)


class OwnershipTable:
    """Maps topics to bundles and bundles to their owning broker.

    Args:
        store: This broker's metadata session; the lock nodes are ephemeral in it, so they vanish
            when the broker (its session) goes away.
        me: This broker's URLs, written into the nodes it creates.
        bundles_per_namespace: Bundles of a namespace without recorded boundaries
            (``defaultNumberOfNamespaceBundles``).
    """

    def __init__(self, store: MetadataStore, me: BrokerInfo, *, bundles_per_namespace: int) -> None:
        self._store = store
        self.me = me
        self._default_boundaries = bundle_boundaries(bundles_per_namespace)
        self._boundaries: dict[NamespaceName, tuple[int, ...]] = {}
        # Bundles this broker holds: answered without a store round trip, as Pulsar's
        # OwnershipCache does for locally owned bundles.
        self._owned: set[NamespaceBundle] = set()
        self._record = _ENCODER.encode(
            NamespaceEphemeralData(
                native_url=me.service_url,
                native_url_tls=me.service_url_tls,
                http_url=me.http_url,
                http_url_tls=me.http_url_tls,
            )
        )

    def set_boundaries(self, namespace: NamespaceName, boundaries: tuple[int, ...]) -> None:
        """Record a namespace's bundle boundaries (from its policies; splits will update them)."""
        self._boundaries[namespace] = boundaries

    def bundle_of(self, topic: TopicName) -> NamespaceBundle:
        """The bundle a topic belongs to (§5.2)."""
        boundaries = self._boundaries.get(topic.namespace, self._default_boundaries)
        return NamespaceBundle(topic.namespace, bundle_for(topic_hash(topic), boundaries))

    def owned_bundles(self) -> list[NamespaceBundle]:
        """Bundles this broker owns, sorted by name."""
        return sorted(self._owned, key=str)

    async def owner_of(self, topic: TopicName) -> BrokerInfo:
        """The broker that serves ``topic``, acquiring its bundle for us if nobody owns it.

        Raises:
            MetadataStoreError: The metadata store failed.
        """
        return await self.owner_of_bundle(self.bundle_of(topic))

    async def owner_of_bundle(self, bundle: NamespaceBundle) -> BrokerInfo:
        """The broker that owns ``bundle``, acquiring it for us if nobody does.

        Raises:
            MetadataStoreError: The metadata store failed.
        """
        if bundle in self._owned:
            return self.me
        path = ownership_path(bundle)
        for _ in range(2):
            current = await self._store.get(path)
            if current is not None:
                owner = _DECODER.decode(current.value)
                if owner.native_url == self.me.service_url:
                    self._owned.add(bundle)
                    return self.me
                return BrokerInfo(
                    owner.native_url, owner.http_url, owner.native_url_tls, owner.http_url_tls
                )
            try:
                await self._store.put(path, self._record, expected_version=-1, ephemeral=True)
            except BadVersionError:
                continue  # somebody created it between our get and put: read who
            self._owned.add(bundle)
            log.info("acquired ownership of bundle %s", bundle)
            return self.me
        raise BadVersionError(f"ownership of {bundle} keeps changing")

    async def release(self, bundle: NamespaceBundle) -> None:
        """Give up a bundle we own (unload, §6.3 step 3); a no-op for bundles we do not own."""
        if bundle in self._owned:
            self._owned.discard(bundle)
            if await self._store.exists(ownership_path(bundle)):
                await self._store.delete(ownership_path(bundle))
