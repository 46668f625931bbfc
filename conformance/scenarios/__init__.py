"""The scenarios, one module per area; importing this package registers them all.

Areas: ``wire`` (client-visible answers), ``admin`` (tenants, namespaces, policies; the
further namespace and topic policies in ``admin_policies``),
``topics`` (topic and subscription admin; topic properties in ``topic_properties``),
``cluster`` (brokers, clusters, isolation, failure domains, bundles, permissions), ``stats``
(stats, internal stats, metrics), ``data`` (schemas, compaction, seeks, readers, TTL),
``throttling`` (dispatch rates, per second), ``policies`` (backlog quotas, auto subscription
creation, Key_Shared hash ranges; the ``broker-policies`` profile; topic auto-creation under the
namespace override in ``auto_creation``).
"""

from __future__ import annotations

from conformance.scenarios import (  # noqa: F401  (imported to register their scenarios)
    admin,
    admin_policies,
    auto_creation,
    cluster,
    core,
    data,
    policies,
    stats,
    throttling,
    topic_properties,
    topics,
    wire,
)
from conformance.scenarios.registry import PROFILES, REGISTRY, Entry, select

SCENARIOS = {name: entry.fn for name, entry in REGISTRY.items()}
TOLERANCES = {name: entry.tolerances for name, entry in REGISTRY.items() if entry.tolerances}

__all__ = ["PROFILES", "REGISTRY", "SCENARIOS", "TOLERANCES", "Entry", "select"]
