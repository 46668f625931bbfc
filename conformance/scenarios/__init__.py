"""The scenarios, one module per area; importing this package registers them all.

Areas: ``wire`` (client-visible answers), ``admin`` (tenants, namespaces, policies),
``topics`` (topic and subscription admin), ``cluster`` (brokers, clusters, isolation, failure
domains, bundles, permissions), ``stats`` (stats, internal stats, metrics), ``data`` (schemas,
compaction, seeks, readers, TTL), ``throttling`` (dispatch rates, per second).
"""

from __future__ import annotations

from conformance.scenarios import (  # noqa: F401  (imported to register their scenarios)
    admin,
    cluster,
    core,
    data,
    policies,
    stats,
    throttling,
    topics,
    wire,
)
from conformance.scenarios.registry import PROFILES, REGISTRY, Entry, select

SCENARIOS = {name: entry.fn for name, entry in REGISTRY.items()}
TOLERANCES = {name: entry.tolerances for name, entry in REGISTRY.items() if entry.tolerances}

__all__ = ["PROFILES", "REGISTRY", "SCENARIOS", "TOLERANCES", "Entry", "select"]
