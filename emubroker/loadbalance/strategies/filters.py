"""Broker filters of the placement pipeline (spec §3.2 steps 3 and 6, §4.7).

Each filter takes the candidate set and returns the brokers it keeps; a filter that cannot
decide raises :class:`BrokerFilterError`, after which the modular pipeline falls back to the
namespace-policy candidates.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

import msgspec

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.model.data import LoadData
    from emubroker.loadbalance.model.extensible_data import BrokerLoadData

__all__ = [
    "BrokerFilterError",
    "SemanticVersion",
    "filter_brokers_with_large_topic_count",
    "filter_by_load_manager_class",
    "filter_by_max_topic_count",
    "filter_by_version",
    "latest_version",
]


class BrokerFilterError(Exception):
    """A broker filter could not decide (Pulsar's ``BrokerFilterException``)."""


# semver.org 2.0.0, the grammar of the jsemver library Pulsar uses.
_SEMVER: Final = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)


def _compare_identifiers(left: tuple[str, ...], right: tuple[str, ...]) -> int:
    """Pre-release/build precedence; an absent part ranks above any present one."""
    if left == right:
        return 0
    if not left or not right:
        return 1 if not left else -1
    for a, b in zip(left, right, strict=False):
        if a == b:
            continue
        if a.isdigit() and b.isdigit():
            return -1 if int(a) < int(b) else 1
        if a.isdigit() != b.isdigit():
            return -1 if a.isdigit() else 1  # numeric identifiers rank lower
        return -1 if a < b else 1
    return -1 if len(left) < len(right) else 1


class SemanticVersion(msgspec.Struct, frozen=True):
    """A semantic version (``com.github.zafarkhaja.semver.Version``)."""

    major: int
    minor: int
    patch: int
    pre_release: tuple[str, ...] = ()
    build: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> SemanticVersion:
        """Parse ``MAJOR.MINOR.PATCH[-pre][+build]``.

        Raises:
            ValueError: Not a semantic version.
        """
        match = _SEMVER.fullmatch(text)
        if match is None:
            raise ValueError(f"invalid version string {text!r}")
        pre, build = match[4], match[5]
        return cls(
            int(match[1]),
            int(match[2]),
            int(match[3]),
            tuple(pre.split(".")) if pre else (),
            tuple(build.split(".")) if build else (),
        )

    def compare(self, other: SemanticVersion) -> int:
        """Semver precedence (build metadata ignored); also what ``equals`` uses."""
        mine, theirs = (self.major, self.minor, self.patch), (other.major, other.minor, other.patch)
        if mine != theirs:
            return -1 if mine < theirs else 1
        return _compare_identifiers(self.pre_release, other.pre_release)

    def compare_build_aware(self, other: SemanticVersion) -> int:
        """``Version.BUILD_AWARE_ORDER``: precedence, then build metadata."""
        return self.compare(other) or _compare_identifiers(self.build, other.build)


def latest_version(brokers: Collection[str], load_data: LoadData) -> SemanticVersion:
    """The newest ``brokerVersionString`` among ``brokers`` (build-aware order).

    Raises:
        BrokerFilterError: No brokers, a broker without data, or a missing or invalid version.
    """
    if not brokers:
        raise BrokerFilterError("Unable to determine latest version since broker set was empty")
    latest: SemanticVersion | None = None
    for broker in brokers:
        data = load_data.broker_data.get(broker)
        if data is None:
            raise BrokerFilterError(f'No broker data for broker "{broker}"')
        text = data.local_data.broker_version_string
        if not text:
            raise BrokerFilterError(f'No version string in load report for broker "{broker}"')
        try:
            version = SemanticVersion.parse(text)
        except ValueError:
            raise BrokerFilterError(
                f'Invalid version string in load report for broker "{broker}": "{text}"'
            ) from None
        if latest is None or latest.compare_build_aware(version) < 0:
            latest = version
    assert latest is not None
    return latest


def filter_by_version(
    brokers: Collection[str], load_data: LoadData, conf: BrokerConfig
) -> list[str]:
    """With ``preferLaterVersions``, keep the brokers running the latest version.

    Raises:
        BrokerFilterError: The latest version cannot be determined.
    """
    if not conf.preferLaterVersions:
        return list(brokers)
    try:
        latest = latest_version(brokers, load_data)
    except BrokerFilterError as exc:
        raise BrokerFilterError(f"Cannot determine newest broker version: {exc}") from exc
    return [
        b
        for b in brokers
        if SemanticVersion.parse(
            load_data.broker_data[b].local_data.broker_version_string or ""
        ).compare(latest)
        == 0
    ]


def filter_by_load_manager_class(
    brokers: Collection[str], load_data: LoadData, conf: BrokerConfig
) -> list[str]:
    """Drop brokers whose report names another load manager class (or none)."""
    other = {
        b
        for b, data in load_data.broker_data.items()
        if data.local_data.load_manager_class_name != conf.loadManagerClassName
    }
    return [b for b in brokers if b not in other]


def filter_brokers_with_large_topic_count(
    brokers: Collection[str], load_data: LoadData, max_topics: int
) -> list[str]:
    """Keep brokers with ``topics + preallocated topics <= max_topics``; none left: keep all."""
    kept = []
    for broker in brokers:
        data = load_data.broker_data.get(broker)
        total = 0
        if data is not None:
            total = data.local_data.num_topics + sum(
                b.topics for b in data.preallocated_bundle_data.values()
            )
        if total <= max_topics:
            kept.append(broker)
    return kept if kept else list(brokers)


def _topics(data: BrokerLoadData | None) -> int:
    return data.topics if data is not None else 0


def filter_by_max_topic_count(
    brokers: Collection[str], loads: Mapping[str, BrokerLoadData], conf: BrokerConfig
) -> list[str]:
    """Extensible ``BrokerMaxTopicCountFilter``: drop brokers at or above the maximum.

    A broker without load data counts as having no topics. Unlike the modular filter there is
    no fallback when every broker is dropped.
    """
    limit = conf.loadBalancerBrokerMaxTopics
    return [b for b in brokers if _topics(loads.get(b)) < limit]
