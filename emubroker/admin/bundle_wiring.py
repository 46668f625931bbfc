"""Wiring of the bundle splitter: the topic service and the topic rates it reads, its unload.

The composition root (``app/admin_context.py``) calls :func:`build_bundle_splitter`; the load
layer's :class:`~emubroker.loadbalance.ownership.bundle_split.BundleSplitter` reaches the topics
only through the callables built here (``topics`` and ``loadbalance`` are independent layers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from emubroker.loadbalance.ownership.bundle_split import BundleSplitter
from protocol.commands import TopicsMode
from protocol.errors import TopicNotFoundError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from emubroker.admin.topic_stats import TopicStatsView
    from emubroker.dynamic_config import DynamicConfig
    from emubroker.loadbalance.ownership.table import OwnershipTable
    from emubroker.loadbalance.strategies.split import TopicLoad
    from emubroker.metadata import MetadataStore
    from emubroker.namespace_registry import NamespaceRegistry
    from emubroker.naming import NamespaceBundle, NamespaceName
    from emubroker.topics import TopicService
    from protocol.clock import Clock

__all__ = [
    "TopicRates",
    "build_bundle_splitter",
    "namespace_topics",
    "topic_loads",
]


class TopicRates(NamedTuple):
    """A topic's rates as ``flow_or_qps_equally_divide`` reads them (``TopicLoad``)."""

    msg_rate_in: float
    msg_rate_out: float
    msg_throughput_in: float
    msg_throughput_out: float


def topic_loads(stats: TopicStatsView, topics: Sequence[str]) -> Mapping[str, TopicLoad]:
    """Current rates of the loaded ones among ``topics`` (the split's topic statistics)."""
    stats.refresh()
    loads: dict[str, TopicLoad] = {}
    for name in topics:
        rates = stats.rates(name)
        if rates is not None:
            loads[name] = TopicRates(rates.msg_in, rates.msg_out, rates.bytes_in, rates.bytes_out)
    return loads


def namespace_topics(topics: TopicService, namespace: NamespaceName) -> list[str]:
    """Every topic of the namespace known here, partitions apart (none for an unknown one)."""
    try:
        return topics.topics_of_namespace(namespace, TopicsMode.ALL)
    except TopicNotFoundError:
        return []  # created by another broker a moment ago: no topics here yet


def build_bundle_splitter(
    store: MetadataStore,
    ownership: OwnershipTable,
    clock: Clock,
    *,
    dynamic: DynamicConfig,
    namespaces: NamespaceRegistry,
    topics: TopicService,
    stats: TopicStatsView,
    unload: Callable[[NamespaceBundle], Awaitable[object]],
) -> BundleSplitter:
    """The broker's bundle splitter (``PUT .../{bundle}/split``).

    ``unload`` is the cluster's unload of a bundle (``loadbalance.ownership.unloading``), through
    which a split with ``unload=true`` unloads its children (§6.3).
    """

    async def unload_child(bundle: NamespaceBundle) -> None:
        await unload(bundle)

    return BundleSplitter(
        store,
        ownership,
        clock,
        config=lambda: dynamic.config,
        topics_of=lambda namespace: namespace_topics(topics, namespace),
        topic_loads=lambda names: topic_loads(stats, names),
        published=namespaces.apply,
        unload=unload_child,
    )
