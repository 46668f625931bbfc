"""Tests for ``emubroker.naming``: names, bundle ranges and the topic hash (spec §0.3, §5)."""

from __future__ import annotations

import itertools
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emubroker.naming import (
    DEFAULT_NAMESPACE,
    FULL_RANGE,
    MAX_HASH,
    BundleRange,
    InvalidBundleRangeError,
    InvalidNameError,
    InvalidNamespaceNameError,
    InvalidTopicNameError,
    NamespaceBundle,
    NamespaceName,
    TopicDomain,
    TopicName,
    bundle_boundaries,
    bundle_for,
    topic_hash,
)

# ---- topic names ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given_name", "full"),
    [
        ("my-topic", "persistent://public/default/my-topic"),
        ("acme/orders/created", "persistent://acme/orders/created"),
        ("persistent://acme/orders/created", "persistent://acme/orders/created"),
        ("non-persistent://acme/orders/t", "non-persistent://acme/orders/t"),
        ("persistent://pulsar/global/ns1/topic-1", "persistent://pulsar/global/ns1/topic-1"),
    ],
)
def test_parse_expands_to_complete_name(given_name: str, full: str) -> None:
    assert str(TopicName.parse(given_name)) == full


def test_parsed_fields() -> None:
    topic = TopicName.parse("non-persistent://acme/orders/created")
    assert topic.domain is TopicDomain.NON_PERSISTENT
    assert not topic.is_persistent
    assert topic.tenant == "acme"
    assert topic.namespace == NamespaceName("acme", "orders")
    assert str(topic.namespace) == "acme/orders"
    assert topic.local_name == "created"


def test_short_name_lives_in_public_default() -> None:
    topic = TopicName.parse("t")
    assert topic.namespace == DEFAULT_NAMESPACE
    assert topic.domain is TopicDomain.PERSISTENT


def test_v1_name_keeps_its_cluster() -> None:
    topic = TopicName.parse("persistent://pulsar/global/ns1/topic-1")
    assert topic.namespace == NamespaceName("pulsar", "ns1", cluster="global")
    assert str(topic.namespace) == "pulsar/global/ns1"


def test_names_compare_and_hash_by_value() -> None:
    a = TopicName.parse("t")
    b = TopicName.parse("persistent://public/default/t")
    assert a == b
    assert hash(a) == hash(b)
    assert {a, b} == {a}
    assert a != TopicName.parse("non-persistent://public/default/t")


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("", "short topic name"),
        ("/", "short topic name"),
        ("   ", "non-blank"),
        ("\t\u2003", "non-blank"),  # Java's isBlank: a tab and an em space
        ("persistent://public/default/.", "cannot be '.'"),
        ("persistent://public/default/..", "cannot be '..'"),
        ("a//b/c", "invalid cluster"),  # Pulsar reads it as a V1 name with an empty cluster
        ("a/b", "short topic name"),
        ("a/b/c/d", "short topic name"),
        ("http://a/b/c", "domain must be"),
        ("persistent://a/b", "expected <domain>"),
        ("persistent://a/b/c/d/e", "expected <domain>"),
        ("persistent://a/b/", "non-blank"),
        ("persistent:///b/c", "invalid tenant"),
        ("persistent://a b/ns/t", "invalid tenant"),
        ("persistent://a/n$s/t", "invalid namespace"),
        ("persistent://a/ü/t", "invalid namespace"),
    ],
)
def test_invalid_topic_names_raise_readable_errors(bad: str, why: str) -> None:
    with pytest.raises(InvalidTopicNameError, match=why):
        TopicName.parse(bad)


@pytest.mark.parametrize(
    ("name", "complete"),
    [
        ("/t", "persistent://public/default/t"),  # StringUtils.split drops empty segments
        ("t/", "persistent://public/default/t"),
        ("PERSISTENT://public/default/t", "persistent://public/default/t"),
        ("Non-Persistent://public/default/t", "non-persistent://public/default/t"),
        ("a\x00b", "persistent://public/default/a\x00b"),  # any character but '/' in the local name
        ("persistent://public/default/ sp ace", "persistent://public/default/ sp ace"),
        ("persistent://public/default/\u00a0", "persistent://public/default/\u00a0"),
        ("persistent://public/default/h\u00e9llo%41", "persistent://public/default/h\u00e9llo%41"),
    ],
)
def test_odd_names_pulsar_accepts(name: str, complete: str) -> None:
    assert str(TopicName.parse(name)) == complete


def test_the_encoded_local_name_is_one_safe_path_segment() -> None:
    assert TopicName.parse("my-topic_1.x").encoded_local_name == "my-topic_1.x"
    assert TopicName.parse("a\x00b%").encoded_local_name == "a%00b%25"
    assert TopicName.parse("a:b=c").encoded_local_name == "a%3Ab%3Dc"


def test_invalid_names_are_value_errors() -> None:
    assert issubclass(InvalidTopicNameError, InvalidNameError)
    assert issubclass(InvalidNameError, ValueError)


@pytest.mark.parametrize(
    ("local", "index"),
    [
        ("t-partition-0", 0),
        ("t-partition-12", 12),
        ("t-partition-2147483647", 2147483647),
        ("t-partition-2147483648", -1),  # not a Java int
        ("t-partition-01", -1),  # not canonical
        ("t-partition--1", -1),
        ("t-partition-", -1),
        ("t-partition-x", -1),
        ("t-partition-١", -1),  # a non-ASCII digit
        ("t", -1),
        ("a-partition-1-partition-3", 3),
    ],
)
def test_partition_index(local: str, index: int) -> None:
    assert TopicName.parse(f"persistent://a/b/{local}").partition_index == index


def test_partitioned_topic_name_strips_the_suffix() -> None:
    part = TopicName.parse("persistent://a/b/t-partition-3")
    assert str(part.partitioned_topic_name) == "persistent://a/b/t"
    plain = TopicName.parse("persistent://a/b/t")
    assert plain.partitioned_topic_name is plain


def test_partition_builds_from_the_base_topic() -> None:
    topic = TopicName.parse("persistent://a/b/t")
    assert str(topic.partition(0)) == "persistent://a/b/t-partition-0"
    assert topic.partition(7).partition_index == 7
    assert topic.partition(1).partition(2) == topic.partition(2)
    with pytest.raises(ValueError, match="partition index must be >= 0"):
        topic.partition(-1)


_segment = st.from_regex(r"[-=:.A-Za-z0-9_]{1,12}", fullmatch=True)


@given(
    domain=st.sampled_from(TopicDomain),
    tenant=_segment,
    ns=_segment,
    local=st.text(st.characters(exclude_characters="/"), min_size=1, max_size=20),
)
def test_complete_names_round_trip(domain: TopicDomain, tenant: str, ns: str, local: str) -> None:
    name = f"{domain}://{tenant}/{ns}/{local}"
    if not local.strip():
        with pytest.raises(InvalidTopicNameError):
            TopicName.parse(name)
        return
    assert str(TopicName.parse(name)) == name


# ---- namespace names ------------------------------------------------------------------------


def test_namespace_parse_and_str() -> None:
    assert NamespaceName.parse("public/default") == DEFAULT_NAMESPACE
    assert str(NamespaceName.parse("pulsar/global/ns1")) == "pulsar/global/ns1"


@pytest.mark.parametrize("bad", ["public", "a/b/c/d", "/b", "a/", "a/b c"])
def test_invalid_namespace_names(bad: str) -> None:
    with pytest.raises(InvalidNamespaceNameError):
        NamespaceName.parse(bad)


# ---- bundles --------------------------------------------------------------------------------


def test_bundle_range_name_format() -> None:
    assert BundleRange(0x40000000, 0x80000000).name == "0x40000000_0x80000000"
    assert str(BundleRange(0, 0x10)) == "0x00000000_0x00000010"
    assert FULL_RANGE.name == "0x00000000_0xffffffff"


def test_bundle_range_parse_round_trips() -> None:
    assert BundleRange.parse("0xc0000000_0xffffffff") == BundleRange(0xC0000000, MAX_HASH)


@pytest.mark.parametrize(
    "bad", ["0x0_0x10", "0x00000000-0x00000010", "0xC0000000_0xFFFFFFFF", "0x00000010_0x00000010"]
)
def test_bundle_range_parse_rejects_bad_names(bad: str) -> None:
    with pytest.raises(InvalidBundleRangeError):
        BundleRange.parse(bad)


@pytest.mark.parametrize(
    ("lower", "upper"),
    [(5, 5), (6, 5), (-1, 5), (0, 2**32), (MAX_HASH - 1, MAX_HASH - 1), (MAX_HASH, MAX_HASH - 1)],
)
def test_bundle_range_rejects_empty_or_out_of_space(lower: int, upper: int) -> None:
    with pytest.raises(InvalidBundleRangeError, match="invalid bundle range"):
        BundleRange(lower, upper)


def test_single_point_at_the_top_of_the_hash_space_is_a_bundle() -> None:
    # NamespaceBundle takes the closed range [0xffffffff, 0xffffffff]: non-empty, top closed.
    top = BundleRange.parse("0xffffffff_0xffffffff")
    assert top == BundleRange(MAX_HASH, MAX_HASH)
    assert top.name == "0xffffffff_0xffffffff"
    assert top.contains(MAX_HASH)
    assert not top.contains(MAX_HASH - 1)
    assert not top.contains(0)


def test_contains_is_upper_exclusive_except_at_max_hash() -> None:
    low = BundleRange(0, 0x40000000)
    assert low.contains(0)
    assert low.contains(0x3FFFFFFF)
    assert not low.contains(0x40000000)
    last = BundleRange(0xC0000000, MAX_HASH)
    assert last.contains(MAX_HASH)
    assert not last.contains(0xBFFFFFFF)
    assert 0xC0000000 in last


def test_namespace_bundle_name() -> None:
    bundle = NamespaceBundle(DEFAULT_NAMESPACE, BundleRange(0x40000000, 0x80000000))
    assert str(bundle) == "public/default/0x40000000_0x80000000"


def test_default_four_bundles_match_the_spec() -> None:
    assert bundle_boundaries(4) == (0, 0x40000000, 0x80000000, 0xC0000000, MAX_HASH)


def test_one_bundle_covers_everything() -> None:
    assert bundle_boundaries(1) == (0, MAX_HASH)


@pytest.mark.parametrize("n", [4, 7])
def test_last_boundary_is_max_hash_not_n_times_seg(n: int) -> None:
    seg = 2**32 // n
    assert n * seg != MAX_HASH
    assert bundle_boundaries(n) == (*(k * seg for k in range(n)), MAX_HASH)


@pytest.mark.parametrize("n", [0, -1, 2**32])
def test_bundle_boundaries_rejects_bad_counts(n: int) -> None:
    with pytest.raises(ValueError, match="number of bundles"):
        bundle_boundaries(n)


# ---- topic hash -----------------------------------------------------------------------------


def test_topic_hash_matches_spec_example() -> None:
    topic = "persistent://pulsar/global/ns1/topic-1"
    assert topic_hash(topic) == 0x2924FAD1
    assert topic_hash(TopicName.parse(topic)) == 0x2924FAD1
    assert str(bundle_for(0x2924FAD1, bundle_boundaries(4))) == "0x00000000_0x40000000"


def test_crc32_reference_value() -> None:
    # The spec's second example fixes the polynomial: crc32("a") = 0xe8b7be43.
    assert zlib.crc32(b"a") == 0xE8B7BE43


def test_short_names_hash_as_their_complete_name() -> None:
    assert topic_hash("t") == zlib.crc32(b"persistent://public/default/t")


def test_partitions_hash_separately() -> None:
    topic = TopicName.parse("persistent://a/b/t")
    assert topic_hash(topic.partition(0)) == zlib.crc32(b"persistent://a/b/t-partition-0")
    assert topic_hash(topic.partition(0)) != topic_hash(topic.partition(1))


def test_topic_hash_is_utf8() -> None:
    assert topic_hash("persistent://a/b/tópico") == zlib.crc32("persistent://a/b/tópico".encode())


@pytest.mark.parametrize(
    ("hash_value", "expected"),
    [
        (0, "0x00000000_0x40000000"),
        (0x3FFFFFFF, "0x00000000_0x40000000"),
        (0x40000000, "0x40000000_0x80000000"),
        (0xBFFFFFFF, "0x80000000_0xc0000000"),
        (0xC0000000, "0xc0000000_0xffffffff"),
        (0xFFFFFFFE, "0xc0000000_0xffffffff"),
        (MAX_HASH, "0xc0000000_0xffffffff"),
    ],
)
def test_bundle_for_edges(hash_value: int, expected: str) -> None:
    assert bundle_for(hash_value, bundle_boundaries(4)).name == expected


@pytest.mark.parametrize("hash_value", [-1, 2**32])
def test_bundle_for_rejects_hash_outside_boundaries(hash_value: int) -> None:
    with pytest.raises(ValueError, match="outside the bundle boundaries"):
        bundle_for(hash_value, bundle_boundaries(4))


@given(n=st.integers(1, 64), hash_value=st.integers(0, MAX_HASH))
def test_bundle_for_returns_the_one_containing_range(n: int, hash_value: int) -> None:
    boundaries = bundle_boundaries(n)
    found = bundle_for(hash_value, boundaries)
    assert found.contains(hash_value)
    ranges = [BundleRange(lo, hi) for lo, hi in itertools.pairwise(boundaries)]
    assert [r for r in ranges if r.contains(hash_value)] == [found]
