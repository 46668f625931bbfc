"""Splitting a bundle this broker owns, as ``NamespaceService.splitAndOwnBundle`` does (§5.3, §5.4).

The admin API (``PUT .../{bundle}/split``) calls :meth:`BundleSplitter.split` on the bundle's
owner. The steps are Pulsar's, in its order:

1. The algorithm computes split positions from the bundle's topics (``split.split_positions``);
   none (fewer than two topics, no position inside the bundle, no overloaded run) ends the call
   with nothing changed, which the admin API still answers with 204.
2. The new boundaries replace the bundle in the namespace's local policies
   (``/admin/local-policies/<ns>``; created from the namespace policies first if absent, as
   ``copyToLocalPolicies`` does).
3. This broker acquires every child bundle *before* the layout is published, so nobody else can
   own a child; then the local policies are written compare-and-set on their version, then the
   namespace policies. A concurrent writer makes the attempt start over, up to
   :data:`SPLIT_RETRIES` more times, :data:`SPLIT_RETRY_DELAY` apart.
4. The parent's ownership is released; its topics now hash into the children, which this broker
   owns, so producers and consumers stay connected.
5. With ``unload`` every child is unloaded, so that clients look up again and the leader places
   the children (Pulsar does this in the background; here the call waits for it, and a failed
   unload is logged, not reported: the split itself succeeded).

Topic lists, topic rates and the unload are injected callables: the load layer does not import the
topic service (``topics`` and ``loadbalance`` are independent layers).
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Final, Protocol

import msgspec

from emubroker.loadbalance.strategies.split import split_bundle, split_positions
from emubroker.metadata import BadVersionError
from emubroker.naming import BundleRange, NamespaceBundle, bundle_boundaries, name_hash
from emubroker.policies import PolicyStore, bundles_data
from emubroker.policies.local import LocalPolicies, read_local_policies, write_local_policies

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.ownership.records import BrokerInfo
    from emubroker.loadbalance.strategies.split import TopicLoad
    from emubroker.metadata import MetadataStore
    from emubroker.naming import NamespaceName
    from emubroker.policies import BundlesData, Policies
    from protocol.clock import Clock

__all__ = [
    "SPLIT_RETRIES",
    "SPLIT_RETRY_DELAY",
    "BundleOwnership",
    "BundleSplitter",
    "InvalidSplitError",
    "SplitFailedError",
    "parse_boundaries",
    "stored_children",
]

log = logging.getLogger(__name__)

SPLIT_RETRIES: Final = 7
"""``NamespaceService.BUNDLE_SPLIT_RETRY_LIMIT``: further attempts after a version conflict."""
SPLIT_RETRY_DELAY: Final = 0.1
"""Seconds between attempts (Pulsar's 100 ms)."""
FLOW_OR_QPS: Final = "flow_or_qps_equally_divide"


class InvalidSplitError(ValueError):
    """The request cannot split this bundle (Pulsar's ``IllegalArgumentException``: 412)."""


class SplitFailedError(Exception):
    """The split could not complete (Pulsar's ``ServiceUnitNotReadyException`` and the like)."""


class BundleOwnership(Protocol):
    """The bundle ownership the splitter needs (``OwnershipTable`` provides it)."""

    @property
    def me(self) -> BrokerInfo: ...

    async def owner_of_bundle(self, bundle: NamespaceBundle) -> BrokerInfo: ...

    async def release(self, bundle: NamespaceBundle) -> None: ...


def parse_boundaries(bundles: BundlesData | None) -> tuple[int, ...]:
    """Integer boundaries of a ``BundlesData`` (one full bundle when it has none).

    Raises:
        ValueError: A boundary is not a hex number.
    """
    if bundles is None or not bundles.boundaries:
        return bundle_boundaries(1)
    return tuple(int(b, 16) for b in bundles.boundaries)


class BundleSplitter:
    """Splits bundles this broker owns and publishes the new layout.

    Args:
        store: The broker's metadata session (local policies).
        ownership: Acquires the children, releases the parent.
        clock: Paces the retries.
        config: The live configuration (algorithm limits, the default algorithm).
        topics_of: A namespace's topics, complete names with every partition
            (``getOwnedTopicListForNamespaceBundle`` filters them by bundle).
        topic_loads: Rates of the given loaded topics, for ``flow_or_qps_equally_divide``.
        published: Called with the namespace policies just written, before the parent is
            released, so this broker hashes topics into the children at once.
        unload: Unloads a bundle (closes its topics, releases it); None: children stay loaded.
    """

    def __init__(
        self,
        store: MetadataStore,
        ownership: BundleOwnership,
        clock: Clock,
        *,
        config: Callable[[], BrokerConfig],
        topics_of: Callable[[NamespaceName], Sequence[str]],
        topic_loads: Callable[[Sequence[str]], Mapping[str, TopicLoad]],
        published: Callable[[NamespaceName, Policies], None],
        unload: Callable[[NamespaceBundle], Awaitable[None]] | None = None,
    ) -> None:
        self._store = store
        self._policies = PolicyStore(store)
        self._ownership = ownership
        self._clock = clock
        self._config = config
        self._topics_of = topics_of
        self._topic_loads = topic_loads
        self._published = published
        self._unload = unload

    def topics_in(self, bundle: NamespaceBundle) -> list[str]:
        """The namespace's topics whose hash falls in ``bundle`` (partitions counted apart)."""
        return [
            t
            for t in self._topics_of(bundle.namespace)
            if bundle.bundle_range.contains(name_hash(t))
        ]

    async def split(
        self,
        bundle: NamespaceBundle,
        algorithm: str,
        *,
        positions: Sequence[int] | None = None,
        unload: bool = False,
    ) -> tuple[NamespaceBundle, ...]:
        """Split ``bundle``, which this broker owns; returns the children (none: not split).

        Args:
            bundle: A bundle of the namespace's current layout.
            algorithm: One of ``split.ALGORITHMS``.
            positions: For ``specified_positions_divide``.
            unload: Unload the children afterwards.

        Raises:
            InvalidSplitError: No positions for ``specified_positions_divide``, or a bundle that
                spans one hash value.
            SplitFailedError: ``flow_or_qps_equally_divide`` without its topic statistics, a
                layout that no longer has the bundle, a child owned elsewhere, or writers that
                kept winning.
            MetadataStoreError: The metadata store failed.
        """
        cut = self._positions(bundle, algorithm, positions)
        if not cut:
            log.info("no valid boundary found in %s to split bundle %s", positions, bundle)
            return ()
        for attempt in range(SPLIT_RETRIES + 1):
            try:
                children = await self._split_once(bundle, cut)
            except BadVersionError:
                if attempt == SPLIT_RETRIES:
                    break
                await self._clock.sleep(SPLIT_RETRY_DELAY)
                continue
            await self._ownership.release(bundle)
            log.info("split bundle %s into %s", bundle, ", ".join(str(c) for c in children))
            if unload:
                await self._unload_all(children)
            return children
        raise SplitFailedError(
            f"{bundle} not success update nsBundles, counter {SPLIT_RETRIES}, "
            "reason concurrent modification"
        )

    def _positions(
        self, bundle: NamespaceBundle, algorithm: str, positions: Sequence[int] | None
    ) -> list[int] | None:
        conf = self._config()
        if algorithm == FLOW_OR_QPS and conf.defaultNamespaceBundleSplitAlgorithm != FLOW_OR_QPS:
            # Pulsar collects the topic stats this algorithm reads only when it is the default
            # (getBundleSplitOption); otherwise the call fails with a cast error (500).
            raise SplitFailedError(
                f"{FLOW_OR_QPS} needs topic statistics, which the broker collects only with "
                f"defaultNamespaceBundleSplitAlgorithm={FLOW_OR_QPS}"
            )
        topics = self.topics_in(bundle)
        try:
            return split_positions(
                algorithm,
                bundle.bundle_range,
                conf,
                topics=topics,
                positions=list(positions) if positions else None,
                topic_stats=self._topic_loads(topics) if algorithm == FLOW_OR_QPS else None,
            )
        except ValueError as exc:
            raise InvalidSplitError(str(exc)) from None

    async def _split_once(
        self, bundle: NamespaceBundle, cut: list[int]
    ) -> tuple[NamespaceBundle, ...]:
        namespace = bundle.namespace
        local, version = await self._local_policies(namespace)
        boundaries = parse_boundaries(local.bundles)
        if not _has_bundle(boundaries, bundle):
            raise SplitFailedError(f"bundle {bundle} not found under namespace")
        try:
            result = split_bundle(boundaries, bundle.bundle_range, positions=cut)
        except ValueError as exc:
            raise InvalidSplitError(str(exc)) from None
        children = tuple(NamespaceBundle(namespace, child) for child in result.children)
        acquired: list[NamespaceBundle] = []
        try:
            for child in children:
                owner = await self._ownership.owner_of_bundle(child)
                if owner != self._ownership.me:
                    raise SplitFailedError(
                        f"failed to acquire ownership of split bundle for namespace [{namespace}], "
                        f"{child} is owned by {owner.service_url}"
                    )
                acquired.append(child)
            layout = bundles_data(result.boundaries)
            await write_local_policies(
                self._store, namespace, msgspec.structs.replace(local, bundles=layout), version
            )
        except Exception:
            for child in acquired:
                await self._ownership.release(child)
            raise
        policies = await self._policies.update_namespace(
            namespace, lambda old: msgspec.structs.replace(old, bundles=layout)
        )
        self._published(namespace, policies)
        return children

    async def _local_policies(self, namespace: NamespaceName) -> tuple[LocalPolicies, int]:
        """The local policies and their version, copied from the namespace policies if absent."""
        found = await read_local_policies(self._store, namespace)
        if found is not None:
            return found.policies, found.version
        policies = await self._policies.get_namespace(namespace)
        if policies is None:
            raise SplitFailedError(f"Policies of namespace {namespace} do not exist")
        local = LocalPolicies(bundles=policies.bundles)
        return local, await write_local_policies(self._store, namespace, local, -1)

    async def _unload_all(self, children: tuple[NamespaceBundle, ...]) -> None:
        if self._unload is None:
            log.warning("split bundles %s not unloaded: this broker cannot unload", children)
            return
        for child in children:
            try:
                await self._unload(child)
            except Exception:
                log.exception("unloading split bundle %s failed", child)


def _has_bundle(boundaries: tuple[int, ...], bundle: NamespaceBundle) -> bool:
    """Whether ``bundle`` is one of the bundles between consecutive ``boundaries``."""
    lower, upper = bundle.bundle_range.lower, bundle.bundle_range.upper
    try:
        index = boundaries.index(lower)
    except ValueError:
        return False
    return index + 1 < len(boundaries) and boundaries[index + 1] == upper


async def stored_children(store: MetadataStore, bundle: NamespaceBundle) -> list[NamespaceBundle]:
    """The bundles of the stored layout inside ``bundle``'s range (its children once split).

    Raises:
        MetadataStoreError: The store failed.
        ValueError: The stored boundaries are not hex numbers.
    """
    policies = await PolicyStore(store).get_namespace(bundle.namespace)
    boundaries = parse_boundaries(None if policies is None else policies.bundles)
    lower, upper = bundle.bundle_range.lower, bundle.bundle_range.upper
    inside = [b for b in boundaries if lower <= b <= upper]
    return [
        NamespaceBundle(bundle.namespace, BundleRange(a, b)) for a, b in itertools.pairwise(inside)
    ]
