"""Java's map iteration and sort orders; the expected values were printed by a JVM (OpenJDK 17)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emubroker.loadbalance.model.javaorder import (
    double_key,
    hash_map_order,
    java_sort,
    string_hash,
    table_capacity,
    to_int,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hello", 99162322),
        ("broker1:8080", 93416114),
        ("", 0),
        ("é€😀", 16752006),  # UTF-16 code units, a surrogate pair included
        ("pulsar/standalone/127.0.0.1:8080/0x00000000_0xffffffff", 1740959701),
    ],
)
def test_string_hash_is_javas(text: str, expected: int) -> None:
    assert string_hash(text) == expected


FIVE = [f"broker{i}:8080" for i in range(5)]
ELEVEN_BUNDLES = [
    "tenant/ns0/0x712bbb4b_0xffffffff",
    "tenant/ns1/0x46ee9d83_0xffffffff",
    "tenant/ns2/0x352c856d_0xffffffff",
    "tenant/ns3/0x2a616abe_0xffffffff",
    "tenant/ns4/0x17610c9a_0xffffffff",
    "tenant/ns5/0x674367bd_0xffffffff",
    "tenant/ns6/0x738597dc_0xffffffff",
    "tenant/ns0/0x5e688e99_0xffffffff",
    "tenant/ns1/0x61b35c88_0xffffffff",
    "tenant/ns2/0x46976cf8_0xffffffff",
    "tenant/ns3/0x30bfbe20_0xffffffff",
]


def test_hash_map_order_of_five_brokers() -> None:
    expected = ["broker4:8080", "broker1:8080", "broker2:8080", "broker3:8080", "broker0:8080"]
    assert hash_map_order(FIVE) == expected
    assert hash_map_order(reversed(FIVE)) == expected  # no collisions: insertion order is moot
    assert hash_map_order(FIVE, concurrent=True) == expected


def test_hash_map_order_of_bundles() -> None:
    assert hash_map_order(ELEVEN_BUNDLES) == [
        "tenant/ns3/0x2a616abe_0xffffffff",
        "tenant/ns2/0x46976cf8_0xffffffff",
        "tenant/ns5/0x674367bd_0xffffffff",
        "tenant/ns0/0x712bbb4b_0xffffffff",
        "tenant/ns1/0x46ee9d83_0xffffffff",
        "tenant/ns4/0x17610c9a_0xffffffff",
        "tenant/ns2/0x352c856d_0xffffffff",
        "tenant/ns1/0x61b35c88_0xffffffff",
        "tenant/ns6/0x738597dc_0xffffffff",
        "tenant/ns0/0x5e688e99_0xffffffff",
        "tenant/ns3/0x30bfbe20_0xffffffff",
    ]


HASH_MAP_12 = [
    "broker4",
    "broker11",
    "broker7",
    "broker9",
    "broker1",
    "broker6",
    "broker2",
    "broker8",
    "broker10",
    "broker5",
    "broker3",
    "broker0",
]
CONCURRENT_12 = [
    "broker4",
    "broker7",
    "broker1",
    "broker8",
    "broker5",
    "broker3",
    "broker0",
    "broker11",
    "broker9",
    "broker6",
    "broker2",
    "broker10",
]


def test_concurrent_hash_map_resizes_one_put_earlier_and_reverses_runs() -> None:
    keys = [f"broker{i}:8080" for i in range(12)]
    # At 12 entries a HashMap still has 16 buckets; a ConcurrentHashMap has 32.
    assert hash_map_order(keys) == [f"{b}:8080" for b in HASH_MAP_12]
    assert hash_map_order(keys, concurrent=True) == [f"{b}:8080" for b in CONCURRENT_12]


def test_table_capacity() -> None:
    assert [table_capacity(n) for n in (0, 12, 13, 24, 25)] == [16, 16, 32, 32, 64]
    assert [table_capacity(n, concurrent=True) for n in (11, 12, 23, 24)] == [16, 32, 32, 64]
    assert table_capacity(4, initial=4) == 8


# An 18-element array sorted by Java with the comparator (int) (a - b).
VALUES = [
    74.91696031336332, 49.060502495284574, 70.81771577767972, 95.26562410702714,
    84.99131008472726, 52.06006329933173, 51.92484514933899, 74.20671371961801,
    47.29746072086039, 59.9329268673568, 77.06967535783168, 52.13964351920845,
    86.66634810625496, 52.92255852108676, 52.25927322338576, 52.79055669593927,
    52.24486227336471, 77.46136610954166,
]  # fmt: skip
JAVA_ORDER = [8, 1, 5, 6, 11, 13, 14, 15, 16, 9, 2, 0, 7, 10, 17, 4, 12, 3]


def test_java_sort_with_a_truncating_comparator() -> None:
    result = java_sort(range(len(VALUES)), lambda a, b: to_int(VALUES[a] - VALUES[b]))
    assert result == JAVA_ORDER
    assert result != sorted(range(len(VALUES)), key=VALUES.__getitem__)  # order matters here


@given(st.lists(st.integers(-5, 5), max_size=40))
def test_java_sort_sorts_stably_with_a_consistent_comparator(values: list[int]) -> None:
    indices = list(range(len(values)))
    expected = sorted(indices, key=values.__getitem__)
    assert java_sort(indices, lambda a, b: values[a] - values[b]) == expected


def test_double_key_orders_like_double_compare() -> None:
    values = [math.nan, 1.0, -0.0, 0.0, -math.inf, math.inf]
    assert sorted(values, key=double_key)[:5] == [-math.inf, -0.0, 0.0, 1.0, math.inf]
    assert math.isnan(sorted(values, key=double_key)[-1])


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.9, 1),
        (-1.9, -1),
        (math.nan, 0),
        (1e20, 2**31 - 1),
        (-1e20, -(2**31)),
        (math.inf, 2**31 - 1),
    ],
)
def test_to_int_is_javas_cast(value: float, expected: int) -> None:
    assert to_int(value) == expected


def test_concurrent_hash_map_resize_reverses_the_head_of_a_bucket() -> None:
    # Same table size (32) for both maps; the resize at 12 entries put b636944 before b936710.
    keys = [
        "b511554",
        "b29724",
        "b936710",
        "b876363",
        "b408744",
        "b453789",
        "b636944",
        "b799308",
        "b804423",
        "b2208",
        "b729633",
        "b467022",
        "b279267",
        "b756589",
    ]
    hash_map = "b408744 b756589 b729633 b29724 b876363 b453789 b467022 b936710 b636944 b804423"
    concurrent = "b408744 b756589 b729633 b29724 b876363 b453789 b467022 b636944 b936710 b804423"
    tail = " b2208 b279267 b511554 b799308"
    assert hash_map_order(keys) == (hash_map + tail).split()
    assert hash_map_order(keys, concurrent=True) == (concurrent + tail).split()
