"""The dashboard's JSON, built from load-balancer trace rows (pure functions).

Live and replay draw the same page from the same shapes: a broker's load is what its load report
says (a ``report`` row, or the report in the metadata store turned into one), a decision is a
``shed``, ``placement``, ``split`` or ``unload`` row. The shapes (docs/dashboard.md):

- broker: ``{"id", "leader", "reachable", "load": {...} | None}``;
- namespace: ``{"name", "bundles": [{"bundle", "range", "lower", "upper", "owner"}]}``, bundles
  sorted by their lower bound, ``owner`` None while nobody owns one;
- decision: ``{"at_ms", "event", "broker", "bundle", "source", "dest", "strategy", "reason",
  "label", "numbers": {...}}`` with only the numbers that apply to its row kind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from emubroker.naming import BundleRange, InvalidNameError, NamespaceBundle, NamespaceName

if TYPE_CHECKING:
    from collections.abc import Iterable

    from emubroker.loadbalance.trace.records import LoadBalancerTraceRecord

__all__ = [
    "DECISIONS",
    "bundle_entry",
    "decision_of",
    "load_of",
    "namespaces_of",
    "split_bundle",
]

DECISIONS: Final = ("shed", "placement", "split", "unload")
"""Row kinds drawn on the timeline (``report`` rows are loads)."""

# The numbers a decision carries (docs/load-balancer-trace.md), in the order the page lists them.
_NUMBERS: Final = (
    "broker_load",
    "cluster_load",
    "dest_load",
    "threshold",
    "to_offload",
    "bundle_msg_rate",
    "bundle_throughput",
    "bundle_topics",
    "candidates",
    "duration_ms",
)


def load_of(row: LoadBalancerTraceRecord) -> dict[str, float]:
    """A broker's load from its ``report`` row: percentages, rates and counts."""
    return {
        "cpu": row.cpu_percent,
        "memory": row.memory_percent,
        "directMemory": row.direct_memory_percent,
        "bandwidthIn": row.bandwidth_in_percent,
        "bandwidthOut": row.bandwidth_out_percent,
        "weightedMaxUsage": row.weighted_max_usage,
        "msgRateIn": row.msg_rate_in,
        "msgRateOut": row.msg_rate_out,
        "throughputIn": row.msg_throughput_in,
        "throughputOut": row.msg_throughput_out,
        "bundles": row.num_bundles,
        "topics": row.num_topics,
        "producers": row.num_producers,
        "consumers": row.num_consumers,
    }


def decision_of(row: LoadBalancerTraceRecord) -> dict[str, Any]:
    """A timeline entry from a decision row (numbers that are -1, "not applicable", left out)."""
    numbers: dict[str, Any] = {}
    for name in _NUMBERS:
        value = getattr(row, name)
        if value != -1:
            numbers[name] = value
    if row.offload_unit:
        numbers["offload_unit"] = row.offload_unit
    if row.split_children:
        numbers["split_children"] = row.split_children
    return {
        "at_ms": row.wall_ns // 1_000_000,
        "event": row.event,
        "broker": row.broker,
        "bundle": row.bundle,
        "source": row.source_broker,
        "dest": row.dest_broker,
        "strategy": row.strategy,
        "reason": row.reason,
        "label": row.label,
        "cycle": row.cycle,
        "numbers": numbers,
    }


def split_bundle(name: str) -> NamespaceBundle | None:
    """``tenant/namespace/0x..._0x...`` as a bundle, None when it is not one."""
    namespace, _, bundle_range = name.rpartition("/")
    try:
        return NamespaceBundle(NamespaceName.parse(namespace), BundleRange.parse(bundle_range))
    except (InvalidNameError, ValueError):
        return None


def bundle_entry(bundle: NamespaceBundle, owner: str | None) -> dict[str, Any]:
    """One bundle of a namespace's bar."""
    return {
        "bundle": str(bundle),
        "range": bundle.bundle_range.name,
        "lower": bundle.bundle_range.lower,
        "upper": bundle.bundle_range.upper,
        "owner": owner,
    }


def namespaces_of(owners: Iterable[tuple[NamespaceBundle, str | None]]) -> list[dict[str, Any]]:
    """The namespaces' bars from ``(bundle, owner)`` pairs, namespaces and bundles in order."""
    by_namespace: dict[str, list[tuple[NamespaceBundle, str | None]]] = {}
    for bundle, owner in owners:
        by_namespace.setdefault(str(bundle.namespace), []).append((bundle, owner))
    return [
        {
            "name": name,
            "bundles": [
                bundle_entry(b, o)
                for b, o in sorted(pairs, key=lambda pair: pair[0].bundle_range.lower)
            ],
        }
        for name, pairs in sorted(by_namespace.items())
    ]
