"""The scenario registry: each scenario's function, its area, its broker profile, its tolerances.

A scenario runs against a broker and returns what a user observes (JSON-able). Names (tenants,
namespaces, topics, subscriptions) are the same on both brokers, so they are compared as they
are; each scenario uses its own topics, so the order scenarios run in does not matter.

A *profile* names extra ``broker.conf`` keys a scenario needs at start-up (keys neither broker
changes at run time, such as the dispatch limiter's implementation): the runner starts both
brokers once per profile in use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from conformance.probe import Probe

Scenario = Callable[[Probe], dict[str, Any]]
T = "persistent://public/default/"
TIMEOUT_MS = 10_000

# Extra broker.conf keys per profile; "" is conformance/broker.conf alone.
PROFILES: dict[str, list[str]] = {
    "": [],
    "classic-limiter": [
        "dispatchRateLimiterFactoryClassName="
        "org.apache.pulsar.broker.service.persistent.DispatchRateLimiterFactoryClassic"
    ],
    # The Go client's test broker's Key_Shared selector, and a quick backlog quota check.
    "broker-policies": [
        "subscriptionKeySharedUseConsistentHashing=false",
        "backlogQuotaCheckIntervalInSeconds=1",
    ],
}


@dataclass(frozen=True)
class Entry:
    """A registered scenario."""

    fn: Scenario
    area: str
    profile: str = ""
    tolerances: dict[str, float] = field(default_factory=dict)


REGISTRY: dict[str, Entry] = {}


def scenario(
    area: str, profile: str = "", tolerances: dict[str, float] | None = None
) -> Callable[[Scenario], Scenario]:
    """Register a scenario under its function's name, in an area (``--only AREA`` runs it)."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}")

    def register(fn: Scenario) -> Scenario:
        if fn.__name__ in REGISTRY:
            raise ValueError(f"scenario {fn.__name__} registered twice")
        REGISTRY[fn.__name__] = Entry(fn, area, profile, dict(tolerances or {}))
        return fn

    return register


def select(words: list[str] | None) -> list[str]:
    """The scenario names that ``--only`` words pick: scenario names or area names.

    Raises ValueError naming the words that are neither.
    """
    if not words:
        return list(REGISTRY)
    areas = {entry.area for entry in REGISTRY.values()}
    unknown = [w for w in words if w not in REGISTRY and w not in areas]
    if unknown:
        raise ValueError(f"unknown scenario(s) or area(s): {', '.join(unknown)}")
    return [n for n, e in REGISTRY.items() if n in words or e.area in words]
