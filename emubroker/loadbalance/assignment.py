"""Which broker gets an unowned bundle: the leader's choice behind the ``BrokerSelector`` seam.

The leader answers a lookup for a bundle nobody owns by naming a broker (spec §3.1 step 3). The
choice is a :class:`BrokerSelector`; the load manager replaces :class:`FewestBundlesSelector`
with Pulsar's ``selectBrokerForAssignment`` (§3.2) behind the same two methods. Rules of this
one:

1. Only registered brokers (``/loadbalance/brokers``) are candidates; none: no answer.
2. A one-shot affinity set by an unload with ``destinationBroker`` wins if that broker is
   registered; it is keyed by the bundle's range only and consumed by the next choice for any
   bundle of that range (§8.14).
3. A bundle already preallocated to a live broker keeps it (Pulsar's preallocated bundles: the
   leader may be asked again before the chosen broker took the bundle).
4. Otherwise the broker owning the fewest bundles, counting the ownership nodes and the leader's
   preallocations not yet taken; ties go to the smallest broker id.

A preallocation is forgotten once its bundle's node exists (or it is older than
:data:`PREALLOCATION_TTL`: the chosen broker never came).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING, Final, Protocol

import msgspec

from emubroker.loadbalance.broker_registry import available_brokers, read_reports
from emubroker.metadata.paths import OWNERSHIP_ROOT
from emubroker.metadata.walk import walk
from emubroker.naming import BundleRange, InvalidNameError, NamespaceBundle, NamespaceName

if TYPE_CHECKING:
    from emubroker.metadata import MetadataStore
    from protocol.clock import Clock

__all__ = ["PREALLOCATION_TTL", "BrokerSelector", "FewestBundlesSelector", "owned_bundle_counts"]

log = logging.getLogger(__name__)

PREALLOCATION_TTL: Final = 30.0
"""Seconds a preallocation waits for its broker to take the bundle."""


class BrokerSelector(Protocol):
    """The leader's choice of a broker for an unowned bundle."""

    async def select(self, bundle: NamespaceBundle) -> str | None:
        """The id (``host:webServicePort``) of the broker to own ``bundle``; None: none."""
        ...

    def set_affinity(self, bundle_range: str, broker_id: str) -> None:
        """Send the next bundle of this range to ``broker_id`` (unload ``destinationBroker``)."""
        ...


class _Owner(msgspec.Struct, rename="camel"):
    native_url: str = ""  # all a count needs of NamespaceEphemeralData


async def owned_bundle_counts(store: MetadataStore) -> tuple[Counter[str], set[NamespaceBundle]]:
    """Bundles owned per broker id, and every owned bundle.

    The owners are the ownership nodes' URLs, mapped to broker ids through the load reports.

    Raises:
        MetadataStoreError: The store failed.
    """
    by_url = {
        report.pulsar_service_url: broker_id
        for broker_id, report in (await read_reports(store)).items()
        if report.pulsar_service_url
    }
    counts: Counter[str] = Counter()
    owned: set[NamespaceBundle] = set()
    for (tenant, namespace, bundle_range), value in await walk(store, OWNERSHIP_ROOT, 3):
        try:
            bundle = NamespaceBundle(
                NamespaceName(tenant, namespace), BundleRange.parse(bundle_range)
            )
            url = msgspec.json.decode(value, type=_Owner).native_url
        except (InvalidNameError, msgspec.DecodeError):
            continue
        owned.add(bundle)
        broker = by_url.get(url)
        if broker is not None:
            counts[broker] += 1
    return counts, owned


class FewestBundlesSelector:
    """The broker owning the fewest bundles (see the module docstring).

    Args:
        store: The metadata store (registered brokers, ownership nodes).
        clock: Ages the preallocations.
    """

    def __init__(self, store: MetadataStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self._preallocated: dict[NamespaceBundle, tuple[str, float]] = {}
        self._affinity: dict[str, str] = {}

    def set_affinity(self, bundle_range: str, broker_id: str) -> None:
        """See ``BrokerSelector.set_affinity`` (rule 2)."""
        self._affinity[bundle_range] = broker_id

    async def select(self, bundle: NamespaceBundle) -> str | None:
        """See ``BrokerSelector.select`` (rules 1-4).

        Raises:
            MetadataStoreError: The store failed.
        """
        brokers = await available_brokers(self._store)
        if not brokers:
            return None
        wanted = self._affinity.pop(bundle.bundle_range.name, None)
        if wanted is not None and wanted in brokers:
            return self._preallocate(bundle, wanted)
        counts, owned = await owned_bundle_counts(self._store)
        now = self._clock.now()
        for taken, (_, since) in list(self._preallocated.items()):
            if taken in owned or now - since > PREALLOCATION_TTL:
                del self._preallocated[taken]
        earlier = self._preallocated.get(bundle)
        if earlier is not None and earlier[0] in brokers:
            return earlier[0]
        for broker, _ in self._preallocated.values():
            counts[broker] += 1
        chosen = min(sorted(brokers), key=lambda broker: counts[broker])
        return self._preallocate(bundle, chosen)

    def _preallocate(self, bundle: NamespaceBundle, broker: str) -> str:
        self._preallocated[bundle] = (broker, self._clock.now())
        log.info("bundle %s assigned to broker %s", bundle, broker)
        return broker
