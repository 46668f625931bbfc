"""Topic and namespace names, namespace bundles and the topic → bundle hash.

Parsing follows Pulsar's ``common.naming.TopicName`` / ``NamespaceName``: a complete name is
``<domain>://<tenant>/<namespace>/<local>``; a short name ``<local>`` lives in ``public/default``
and ``<tenant>/<namespace>/<local>`` is persistent. Legacy V1 names with a cluster segment
(``persistent://pulsar/global/ns1/topic-1``, spec/pulsar-behaviour.md §5.2 and §6.1) parse too,
so that ``str(TopicName.parse(s)) == s`` for every complete name a client may send (with the
domain in lower case).

Which names are valid (docs/broker-behaviour.md, "Topic names"): tenant, namespace and cluster
follow ``NamedEntity`` (ASCII letters, digits and ``-=:._``, non-empty); the local name may hold
any character but ``/`` and must not be blank (Java's ``isBlank``), as in Pulsar, and must not be
``.`` or ``..``, which Pulsar accepts but cannot store. Where a topic names a metadata node its
local name is URL-encoded (:attr:`TopicName.encoded_local_name`).

Bundles follow spec/pulsar-behaviour.md §0.3 and §5: a namespace's hash space
``[0, 0xffffffff]`` is cut at sorted boundaries, each bundle is ``[lower, upper)`` except that
an upper bound of ``0xffffffff`` is inclusive, and a topic belongs to the bundle containing the
CRC-32 of its complete name.
"""

from __future__ import annotations

import bisect
import enum
import re
import unicodedata
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, NamedTuple
from urllib.parse import quote

import msgspec

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "DEFAULT_NAMESPACE",
    "FULL_RANGE",
    "MAX_HASH",
    "PARTITIONED_TOPIC_SUFFIX",
    "AssignedBroker",
    "BundleRange",
    "InvalidBundleRangeError",
    "InvalidNameError",
    "InvalidNamespaceNameError",
    "InvalidTopicNameError",
    "NamespaceBundle",
    "NamespaceName",
    "TopicDomain",
    "TopicName",
    "bundle_boundaries",
    "bundle_for",
    "name_hash",
    "topic_hash",
]

MAX_HASH: Final = 0xFFFFFFFF
PARTITIONED_TOPIC_SUFFIX: Final = "-partition-"

# Pulsar's NamedEntity.checkName: ``^[-=:.\w]*$`` with Java's ASCII-only ``\w``.
_NAME_RE: Final = re.compile(r"[-=:.A-Za-z0-9_]+")
# Pulsar's TopicName.getPartitionIndex accepts only a canonical non-negative Java int:
# "t-partition-01" and "t-partition--1" are not partitions.
_PARTITION_RE: Final = re.compile(r"0|[1-9][0-9]*")
_MAX_PARTITION: Final = 2**31 - 1
_BUNDLE_RE: Final = re.compile(r"0x([0-9a-f]{8})_0x([0-9a-f]{8})")


# Java's Character.isWhitespace, which StringUtils.isBlank applies to a topic's local name:
# Unicode space separators except the no-break ones, and these control characters.
_JAVA_SPACE_CONTROLS: Final = frozenset("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f")
_NO_BREAK_SPACES: Final = frozenset("\u00a0\u2007\u202f")


def _java_blank(text: str) -> bool:
    # Every Java whitespace character is whitespace to str.isspace too, so a name with one
    # character str.isspace rejects (nearly every name) is not blank, decided without the
    # per-character Unicode look-ups (every topic name is checked, thousands at set-up).
    if text and not text.isspace():
        return False
    return all(
        ch in _JAVA_SPACE_CONTROLS
        or (unicodedata.category(ch) in ("Zs", "Zl", "Zp") and ch not in _NO_BREAK_SPACES)
        for ch in text
    )


class AssignedBroker(NamedTuple):
    """Where the clients of a transferred bundle reconnect without a lookup.

    CLOSE_PRODUCER / CLOSE_CONSUMER's ``assignedBrokerServiceUrl`` and
    ``assignedBrokerServiceUrlTls`` (the TLS one empty when the broker has no TLS port).
    """

    service_url: str
    service_url_tls: str = ""


class InvalidNameError(ValueError):
    """A topic, namespace or bundle name that Pulsar would reject."""


class InvalidTopicNameError(InvalidNameError):
    """A topic name that does not parse."""


class InvalidNamespaceNameError(InvalidNameError):
    """A namespace name that does not parse."""


class InvalidBundleRangeError(InvalidNameError):
    """A bundle range that is malformed or outside ``[0, 0xffffffff]``."""


class TopicDomain(enum.StrEnum):
    """Whether a topic's messages are stored (``persistent``) or not."""

    PERSISTENT = "persistent"
    NON_PERSISTENT = "non-persistent"


def _check_segment(kind: str, value: str, whole: str) -> None:
    if not _NAME_RE.fullmatch(value):
        raise InvalidNamespaceNameError(
            f"invalid {kind} {value!r} in {whole!r}: use letters, digits and - _ = : ."
        )


class NamespaceName(msgspec.Struct, frozen=True):
    """A namespace, ``tenant/namespace`` (or V1 ``tenant/cluster/namespace``).

    Attributes:
        tenant: The tenant (V1: the property).
        local: The namespace's own name within the tenant.
        cluster: The cluster segment of a legacy V1 name, else ``None``.
    """

    tenant: str
    local: str
    cluster: str | None = None

    def __post_init__(self) -> None:
        whole = str(self)
        _check_segment("tenant", self.tenant, whole)
        _check_segment("namespace", self.local, whole)
        if self.cluster is not None:
            _check_segment("cluster", self.cluster, whole)

    @classmethod
    def parse(cls, name: str) -> NamespaceName:
        """Parse ``tenant/namespace`` or ``tenant/cluster/namespace``.

        Raises:
            InvalidNamespaceNameError: The name has the wrong shape or characters.
        """
        parts = name.split("/")
        if len(parts) == 2:
            return cls(parts[0], parts[1])
        if len(parts) == 3:
            return cls(parts[0], parts[2], cluster=parts[1])
        raise InvalidNamespaceNameError(
            f"invalid namespace name {name!r}: expected <tenant>/<namespace>"
        )

    def __str__(self) -> str:
        if self.cluster is None:
            return f"{self.tenant}/{self.local}"
        return f"{self.tenant}/{self.cluster}/{self.local}"


DEFAULT_NAMESPACE: Final = NamespaceName("public", "default")


@dataclass(frozen=True, slots=True)
class TopicName:
    """A parsed, validated topic name; ``str()`` gives the complete name.

    Build one with :meth:`parse`. Instances are immutable, hashable and compare by value.

    Attributes:
        domain: Persistent or non-persistent.
        namespace: The namespace the topic lives in.
        local_name: The topic's name within the namespace (with any partition suffix).
    """

    domain: TopicDomain
    namespace: NamespaceName
    local_name: str
    _full: str = field(init=False, repr=False, compare=False)
    # A partition's partitioned topic, made on first use: policies and quotas ask for it per
    # partition and per check (thousands of partitions at scale).
    _partitioned: TopicName | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        full = f"{self.domain.value}://{self.namespace}/{self.local_name}"
        if _java_blank(self.local_name) or "/" in self.local_name:
            raise InvalidTopicNameError(
                f"invalid topic name {full!r}: the local name must be non-blank and have no '/'"
            )
        if self.local_name in (".", ".."):
            # TopicName takes them, but no metadata store can hold them as a path segment
            # (ZooKeeper refuses them too), so Pulsar fails to create such a topic.
            raise InvalidTopicNameError(
                f"invalid topic name {full!r}: the local name cannot be {self.local_name!r}"
            )
        # The complete name is hashed and compared constantly, so build it once.
        object.__setattr__(self, "_full", full)

    @classmethod
    def parse(cls, name: str) -> TopicName:
        """Parse a complete or short topic name, as Pulsar's ``TopicName.get`` does.

        Args:
            name: ``persistent://tenant/ns/topic``, ``non-persistent://…`` (the domain in any
                case), ``tenant/ns/topic`` (persistent) or ``topic``
                (``persistent://public/default/``). A short name's empty segments are dropped
                when counting them (``/topic`` is ``topic``), as Pulsar's ``StringUtils.split``
                drops them.

        Returns:
            The parsed name.

        Raises:
            InvalidTopicNameError: The name cannot be parsed; the message says why.
        """
        domain_text, sep, rest = name.partition("://")
        if not sep:
            parts = [part for part in name.split("/") if part]
            if len(parts) == 1:
                return cls._build(name, TopicDomain.PERSISTENT, "public", None, "default", parts[0])
            if len(parts) == 3:
                return cls.parse(f"{TopicDomain.PERSISTENT.value}://{name}")
            raise InvalidTopicNameError(
                f"invalid short topic name {name!r}: expected <topic> or "
                "<tenant>/<namespace>/<topic>"
            )
        try:
            domain = TopicDomain(domain_text.lower())
        except ValueError:
            raise InvalidTopicNameError(
                f"invalid topic name {name!r}: domain must be 'persistent' or 'non-persistent'"
            ) from None
        parts = rest.split("/")
        if len(parts) == 3:
            return cls._build(name, domain, parts[0], None, parts[1], parts[2])
        if len(parts) == 4:
            return cls._build(name, domain, parts[0], parts[1], parts[2], parts[3])
        raise InvalidTopicNameError(
            f"invalid topic name {name!r}: expected <domain>://<tenant>/<namespace>/<topic>"
        )

    @classmethod
    def _build(
        cls,
        name: str,
        domain: TopicDomain,
        tenant: str,
        cluster: str | None,
        namespace: str,
        local: str,
    ) -> TopicName:
        try:
            ns = NamespaceName(tenant, namespace, cluster)
        except InvalidNamespaceNameError as exc:
            raise InvalidTopicNameError(f"invalid topic name {name!r}: {exc}") from None
        return cls(domain, ns, local)

    def __str__(self) -> str:
        return self._full

    @property
    def encoded_local_name(self) -> str:
        """The local name URL-encoded, for metadata paths and the schema id.

        Pulsar encodes it (``getEncodedLocalName``) wherever a topic names a metadata node, so
        any local name ``parse`` accepts (a NUL byte, ``%``, non-ASCII letters) is one safe path
        segment; ordinary names (letters, digits, ``-_.``) are unchanged.
        """
        return quote(self.local_name, safe="")

    @property
    def tenant(self) -> str:
        """The tenant the topic belongs to."""
        return self.namespace.tenant

    @property
    def is_persistent(self) -> bool:
        """Whether the topic is in the persistent domain."""
        return self.domain is TopicDomain.PERSISTENT

    @property
    def partition_index(self) -> int:
        """The partition number for ``…-partition-<n>`` names, else ``-1``."""
        _, sep, index = self.local_name.rpartition(PARTITIONED_TOPIC_SUFFIX)
        if sep and _PARTITION_RE.fullmatch(index) and int(index) <= _MAX_PARTITION:
            return int(index)
        return -1

    @property
    def partitioned_topic_name(self) -> TopicName:
        """The partitioned topic this partition belongs to, or ``self`` if not a partition."""
        partitioned = self._partitioned
        if partitioned is None:
            if self.partition_index < 0:
                return self  # not kept: a reference to itself would make a cycle
            base, _, _ = self.local_name.rpartition(PARTITIONED_TOPIC_SUFFIX)
            partitioned = TopicName(self.domain, self.namespace, base)
            object.__setattr__(self, "_partitioned", partitioned)
        return partitioned

    def partition(self, index: int) -> TopicName:
        """Return partition ``index`` of this topic's partitioned topic.

        Raises:
            ValueError: ``index`` is negative.
        """
        if index < 0:
            raise ValueError(f"partition index must be >= 0, got {index}")
        base = self.partitioned_topic_name
        return TopicName(base.domain, base.namespace, f"{base.local_name}-partition-{index}")


class BundleRange(msgspec.Struct, frozen=True):
    """A hash range ``[lower, upper)``, or ``[lower, upper]`` when upper is ``0xffffffff``.

    Pulsar's ``NamespaceBundle`` takes any non-empty Guava range of that shape, so the single
    point ``[0xffffffff, 0xffffffff]`` is a valid bundle (closed at the top), while
    ``[x, x)`` below the top is empty and refused.

    Attributes:
        lower: Inclusive lower bound.
        upper: Exclusive upper bound (inclusive if ``0xffffffff``).
    """

    lower: int
    upper: int

    def __post_init__(self) -> None:
        in_space = 0 <= self.lower <= self.upper <= MAX_HASH
        if not in_space or (self.lower == self.upper != MAX_HASH):
            raise InvalidBundleRangeError(
                f"invalid bundle range [{self.lower:#x}, {self.upper:#x}]: need "
                "0 <= lower < upper <= 0xffffffff, or lower = upper = 0xffffffff"
            )

    @classmethod
    def parse(cls, name: str) -> BundleRange:
        """Parse Pulsar's ``0x%08x_0x%08x`` range name.

        Raises:
            InvalidBundleRangeError: The name is malformed or the range is empty.
        """
        match = _BUNDLE_RE.fullmatch(name)
        if match is None:
            raise InvalidBundleRangeError(
                f"invalid bundle range name {name!r}: expected 0x%08x_0x%08x in lower-case hex"
            )
        return cls(int(match[1], 16), int(match[2], 16))

    @property
    def name(self) -> str:
        """Pulsar's range name, e.g. ``0x40000000_0x80000000``."""
        return f"0x{self.lower:08x}_0x{self.upper:08x}"

    def __str__(self) -> str:
        return self.name

    def contains(self, hash_value: int) -> bool:
        """Whether ``hash_value`` falls in this range (spec/pulsar-behaviour.md §0.3)."""
        return self.lower <= hash_value < self.upper or hash_value == self.upper == MAX_HASH

    __contains__ = contains


FULL_RANGE: Final = BundleRange(0, MAX_HASH)


class NamespaceBundle(msgspec.Struct, frozen=True):
    """One bundle of a namespace; ``str()`` is ``<namespace>/<range>`` (§0.3).

    Attributes:
        namespace: The namespace the bundle belongs to.
        bundle_range: The bundle's hash range.
    """

    namespace: NamespaceName
    bundle_range: BundleRange

    def __str__(self) -> str:
        return f"{self.namespace}/{self.bundle_range.name}"


def bundle_boundaries(num_bundles: int) -> tuple[int, ...]:
    """Return the boundaries of a new namespace with ``num_bundles`` bundles (§5.1).

    ``seg = 2**32 // n``; the boundaries are ``0, seg, …, (n-1)·seg`` and then ``0xffffffff``
    (not ``n·seg``), as Pulsar's ``PoliciesUtil.getBundles`` does.

    Raises:
        ValueError: ``num_bundles`` is not in ``[1, 0xffffffff]``.
    """
    if not 1 <= num_bundles <= MAX_HASH:
        raise ValueError(f"number of bundles must be in [1, 0xffffffff], got {num_bundles}")
    seg = 2**32 // num_bundles
    return (*range(0, num_bundles * seg, seg), MAX_HASH)


def name_hash(name: str) -> int:
    """Return the unsigned CRC-32 of ``name``'s UTF-8 bytes, exactly as given.

    Pulsar's ``NamespaceBundleFactory.getLongHashCode``: the split algorithms hash the topic
    names a bundle owns without parsing them.
    """
    return zlib.crc32(name.encode())


def topic_hash(topic: TopicName | str) -> int:
    """Return the unsigned CRC-32 of the topic's complete name in UTF-8 (§5.2).

    Args:
        topic: A topic; a string is parsed first, so a short name hashes as its complete name.

    Raises:
        InvalidTopicNameError: ``topic`` is a string that does not parse.
    """
    if isinstance(topic, str):
        topic = TopicName.parse(topic)
    return name_hash(str(topic))


def bundle_for(hash_value: int, boundaries: Sequence[int]) -> BundleRange:
    """Return the bundle whose range contains ``hash_value`` (§5.2).

    Args:
        hash_value: A :func:`topic_hash` value.
        boundaries: A namespace's sorted bundle boundaries, e.g. from :func:`bundle_boundaries`.

    Raises:
        ValueError: Fewer than two boundaries, or the hash lies outside them.
    """
    if len(boundaries) < 2 or not boundaries[0] <= hash_value <= boundaries[-1]:
        raise ValueError(f"hash {hash_value:#x} is outside the bundle boundaries")
    # The greatest boundary <= hash starts the bundle; a hash equal to the last boundary
    # (0xffffffff) belongs to the last bundle, whose upper bound is inclusive.
    index = min(bisect.bisect_right(boundaries, hash_value), len(boundaries) - 1)
    return BundleRange(boundaries[index - 1], boundaries[index])
