"""Java's iteration and sort orders, where Pulsar's load manager lets them decide a result.

Pulsar's strategies walk ``HashMap``/``ConcurrentHashMap`` entries and sort with ``List.sort``.
Three results depend on that order and not only on the data:

- ties: "the first broker with the maximum rate" (UniformLoadShedder), "take bundles by
  throughput, descending" (a stable sort keeps the map order among equal throughputs);
- sums of doubles: TransferShedder's load average adds broker loads in map order, and Pulsar's
  own test asserts ``0.36400000000000005``, which adding in another order does not give;
- AvgShedder sorts brokers with a comparator that truncates score differences to ``int``, which
  is not transitive, so the result depends on the sorting algorithm.

A Java ``HashMap`` iterates bucket by bucket (bucket = spread hash masked by the table size);
within a bucket, in insertion order. A ``ConcurrentHashMap`` does the same except that a resize
reverses part of each bucket (``ConcurrentHashMap.transfer`` prepends the nodes before the last
run). The table doubles when the size passes 3/4 of it: after the put for ``HashMap``, at it for
``ConcurrentHashMap``. Buckets turned into trees (8 or more colliding keys in a table of 64 or
more) keep another order; we do not model them, and no realistic set of broker or bundle names
produces them.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Final, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

__all__ = [
    "double_key",
    "hash_map_order",
    "java_sort",
    "string_hash",
    "table_capacity",
    "to_int",
]

T = TypeVar("T")

_DEFAULT_CAPACITY: Final = 16
_MIN_MERGE: Final = 32
"""Java's TimSort sorts arrays shorter than this with one binary insertion sort."""
_INT_MAX: Final = 2**31 - 1
_INT_MIN: Final = -(2**31)


@functools.lru_cache(maxsize=1 << 16)
def string_hash(text: str) -> int:
    """Java's ``String.hashCode()`` as an unsigned 32-bit value (over UTF-16 code units)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def _spread(text: str) -> int:
    h = string_hash(text)
    return (h ^ (h >> 16)) & 0x7FFFFFFF


def table_capacity(size: int, *, concurrent: bool = False, initial: int = _DEFAULT_CAPACITY) -> int:
    """The table length a map reaches after ``size`` puts into an empty map of ``initial``."""
    capacity = initial
    while (size >= capacity * 3 // 4) if concurrent else (size > capacity * 3 // 4):
        capacity *= 2
    return capacity


def hash_map_order(
    keys: Iterable[str], *, concurrent: bool = False, initial: int = _DEFAULT_CAPACITY
) -> list[str]:
    """The order a Java map iterates ``keys`` put in this order into a new map.

    Args:
        keys: Distinct keys, in insertion order.
        concurrent: A ``ConcurrentHashMap`` rather than a ``HashMap``.
        initial: The table length the map starts with (16 for ``new HashMap<>()``; retained by
            ``clear()``, so a map reused across cycles keeps the largest table it reached).
    """
    return list(_order(tuple(keys), concurrent, initial))


@functools.lru_cache(maxsize=256)
def _order(keys: tuple[str, ...], concurrent: bool, initial: int) -> tuple[str, ...]:
    # Cached: the leader asks for the same broker and bundle sets cycle after cycle.
    if not concurrent:
        # HashMap resizes split buckets without reordering them: only the final table matters.
        mask = table_capacity(len(keys), initial=initial) - 1
        return tuple(sorted(keys, key=lambda k: _spread(k) & mask))
    return tuple(_concurrent_order(list(keys), initial))


def _concurrent_order(keys: list[str], initial: int) -> list[str]:
    capacity = initial
    table: list[list[str]] = [[] for _ in range(capacity)]
    for count, key in enumerate(keys, start=1):
        table[_spread(key) & (capacity - 1)].append(key)
        if count >= capacity * 3 // 4:
            table = _transfer(table, capacity)
            capacity *= 2
    return [key for bucket in table for key in bucket]


def _transfer(table: list[list[str]], n: int) -> list[list[str]]:
    # ConcurrentHashMap.transfer: the tail run whose keys all go the same way moves as is; the
    # nodes before it are pushed one by one onto the front of their new bucket.
    grown: list[list[str]] = [[] for _ in range(2 * n)]
    for index, bucket in enumerate(table):
        if not bucket:
            continue
        run_start = 0
        run_bit = _spread(bucket[0]) & n
        for position in range(1, len(bucket)):
            bit = _spread(bucket[position]) & n
            if bit != run_bit:
                run_bit, run_start = bit, position
        low: list[str] = []
        high: list[str] = []
        for key in bucket[:run_start]:
            (high if _spread(key) & n else low).insert(0, key)
        (high if run_bit else low).extend(bucket[run_start:])
        grown[index], grown[index + n] = low, high
    return grown


def java_sort(items: Sequence[T], compare: Callable[[T, T], int]) -> list[T]:
    """Sort as ``java.util.Arrays.sort(Object[], Comparator)`` does, even with a broken comparator.

    Below 32 elements TimSort finds the leading run (reversing it when strictly descending) and
    binary-inserts the rest, which we reproduce exactly. Longer inputs use Python's stable sort:
    identical for any consistent comparator, possibly different for an inconsistent one.
    """
    result = list(items)
    n = len(result)
    if n < 2:
        return result
    if n >= _MIN_MERGE:
        return sorted(result, key=functools.cmp_to_key(compare))
    run = 1
    if compare(result[1], result[0]) < 0:
        run = 2
        while run < n and compare(result[run], result[run - 1]) < 0:
            run += 1
        result[:run] = reversed(result[:run])
    else:
        run = 2
        while run < n and compare(result[run], result[run - 1]) >= 0:
            run += 1
    for start in range(run, n):
        pivot = result[start]
        left, right = 0, start
        while left < right:
            mid = (left + right) >> 1
            if compare(pivot, result[mid]) < 0:
                right = mid
            else:
                left = mid + 1
        result[left + 1 : start + 1] = result[left:start]
        result[left] = pivot
    return result


def double_key(value: float) -> tuple[bool, float, float]:
    """A sort key ordering doubles as Java's ``Double.compare``: ``-0.0 < 0.0`` and NaN last."""
    return (value != value, value, math.copysign(1.0, value))


def to_int(value: float) -> int:
    """Java's ``(int)`` cast of a double: truncate toward zero, saturate, NaN gives 0."""
    if value != value:
        return 0
    if value >= _INT_MAX:
        return _INT_MAX
    if value <= _INT_MIN:
        return _INT_MIN
    return int(value)
