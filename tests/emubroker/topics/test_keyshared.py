from __future__ import annotations

import pytest

from emubroker.topics.keyshared import (
    AutoSplitSelector,
    RangeSplitSelector,
    StickySelector,
    sticky_key_hash,
)
from protocol.commands import IntRange
from protocol.errors import ConsumerAssignError


def test_sticky_key_hash_is_non_negative_31_bit() -> None:
    # 0xb3dd93fa has the top bit set; Pulsar masks with Integer.MAX_VALUE.
    assert sticky_key_hash(b"abc") == 0x33DD93FA


def test_sticky_selector_routes_by_slot_and_refuses_overlaps() -> None:
    sel: StickySelector[str] = StickySelector()
    sel.add("a", "a", [IntRange(start=0, end=32767)])
    sel.add("b", "b", [IntRange(start=32768, end=65535)])
    assert sel.select(5) == "a"
    assert sel.select(65536 + 40000) == "b"  # slot = hash % 65536
    with pytest.raises(ConsumerAssignError, match="overlaps"):
        sel.add("c", "c", [IntRange(start=100, end=200)])
    sel.remove("a")
    assert sel.select(5) is None
    sel.add("c", "c", [IntRange(start=100, end=200)])
    assert sel.select(150) == "c"
    assert sel.select(99) is None


def test_sticky_selector_refuses_no_or_invalid_ranges() -> None:
    sel: StickySelector[str] = StickySelector()
    with pytest.raises(ConsumerAssignError, match="no ranges"):
        sel.add("a", "a", [])
    with pytest.raises(ConsumerAssignError, match="invalid hash range"):
        sel.add("a", "a", [IntRange(start=10, end=70000)])


def test_sticky_selector_refuses_overlaps_among_a_consumers_own_ranges() -> None:
    sel: StickySelector[str] = StickySelector()
    with pytest.raises(ConsumerAssignError, match=r"\[5, 9\] .* overlaps the taken range \[0, 5\]"):
        sel.add("a", "a", [IntRange(start=5, end=9), IntRange(start=0, end=5)])
    with pytest.raises(ConsumerAssignError, match="overlaps"):
        sel.add("a", "a", [IntRange(start=3, end=3), IntRange(start=3, end=3)])
    sel.add("a", "a", [IntRange(start=0, end=4), IntRange(start=10, end=20)])
    with pytest.raises(
        ConsumerAssignError, match=r"\[5, 10\] of consumer 'b' overlaps .* \[10, 20\]"
    ):
        sel.add("b", "b", [IntRange(start=5, end=10)])
    assert (sel.select(4), sel.select(5), sel.select(10)) == ("a", None, "a")


@pytest.mark.timeout(10)  # checking each range against every other took minutes
def test_sticky_selector_takes_every_slot_as_its_own_range() -> None:
    sel: StickySelector[str] = StickySelector()
    sel.add("even", "even", [IntRange(start=i, end=i) for i in range(0, 65536, 2)])
    sel.add("odd", "odd", [IntRange(start=i, end=i) for i in range(65535, 0, -2)])
    assert [sel.select(i) for i in (0, 1, 65534, 65535)] == ["even", "odd", "even", "odd"]
    with pytest.raises(ConsumerAssignError, match="overlaps"):
        sel.add("late", "late", [IntRange(start=i, end=i) for i in range(65535, 40000, -1)])


def test_auto_split_is_deterministic_and_independent_of_join_order() -> None:
    one: AutoSplitSelector[str] = AutoSplitSelector(points=100)
    two: AutoSplitSelector[str] = AutoSplitSelector(points=100)
    for name in ("x", "y", "z"):
        one.add(name, name, [])
    for name in ("z", "x", "y"):
        two.add(name, name, [])
    hashes = [sticky_key_hash(f"key-{i}".encode()) for i in range(300)]
    picks = [one.select(h) for h in hashes]
    assert picks == [two.select(h) for h in hashes]
    assert set(picks) == {"x", "y", "z"}  # every consumer gets some keys


def test_auto_split_moves_only_the_removed_consumers_keys() -> None:
    sel: AutoSplitSelector[str] = AutoSplitSelector(points=100)
    for name in ("x", "y", "z"):
        sel.add(name, name, [])
    hashes = [sticky_key_hash(f"key-{i}".encode()) for i in range(300)]
    before = [sel.select(h) for h in hashes]
    sel.remove("z")
    after = [sel.select(h) for h in hashes]
    for b, a in zip(before, after, strict=True):
        if b != "z":
            assert a == b
        else:
            assert a in {"x", "y"}
    sel.remove("x")
    sel.remove("y")
    assert sel.select(hashes[0]) is None


def _pulsar_ring_pick(members: list[tuple[str, str, int]], key_hash: int, points: int) -> str:
    """Pulsar 4.x's AUTO_SPLIT choice written out directly: slots 1..65535, points at
    ``name NUL name_index NUL i``, the first consumer to claim a slot keeps it."""
    owners: dict[int, str] = {}
    for consumer, name, index in members:
        for i in range(points):
            slot = sticky_key_hash(f"{name}\0{index}\0{i}".encode()) % 65535 + 1
            owners.setdefault(slot, consumer)
    slot = key_hash % 65535 + 1
    after = [s for s in owners if s >= slot]
    return owners[min(after) if after else min(owners)]


def test_auto_split_places_points_as_pulsar_4_does() -> None:
    sel: AutoSplitSelector[str] = AutoSplitSelector(points=20)
    members = [("c1", "alpha", 0), ("c2", "beta", 0), ("c3", "alpha", 1)]  # same name: index 1
    for consumer, name, _ in members:
        sel.add(consumer, name, [])
    for i in range(300):
        h = sticky_key_hash(f"key-{i}".encode())
        assert sel.select(h) == _pulsar_ring_pick(members, h, 20)


def test_auto_split_reuses_the_lowest_free_name_index() -> None:
    sel: AutoSplitSelector[str] = AutoSplitSelector(points=20)
    for consumer in ("c1", "c2", "c3"):
        sel.add(consumer, "same", [])
    sel.remove("c2")  # frees index 1
    sel.add("c4", "same", [])
    members = [("c1", "same", 0), ("c3", "same", 2), ("c4", "same", 1)]
    for i in range(300):
        h = sticky_key_hash(f"key-{i}".encode())
        assert sel.select(h) == _pulsar_ring_pick(members, h, 20)


def test_range_split_halves_the_widest_range_as_consumers_join() -> None:
    # Pulsar's HashRangeAutoSplitStickyKeyConsumerSelector: range ends 65536 (first), then
    # 32768 (second: the lower half goes to it), then 16384 (the widest is 0..32768).
    sel: RangeSplitSelector[str] = RangeSplitSelector()
    assert sel.select(7) is None
    sel.add("a", "a", [])
    assert [sel.select(h) for h in (0, 1, 65535)] == ["a", "a", "a"]
    sel.add("b", "b", [])
    assert [sel.select(h) for h in (1, 32768, 32769, 65535)] == ["b", "b", "a", "a"]
    sel.add("c", "c", [])
    assert [sel.select(h) for h in (1, 16384, 16385, 32768, 32769)] == ["c", "c", "b", "b", "a"]
    # The slot is hash % 65536, with 0 read as 1 (0 means "no hash" in Pulsar).
    assert sel.select(65536 + 40000) == "a"
    assert sel.select(65536) == "c"


def test_range_split_gives_a_leaving_range_to_the_one_above_or_the_top_to_the_one_below() -> None:
    sel: RangeSplitSelector[str] = RangeSplitSelector()
    for name in ("a", "b", "c"):  # ends: c 16384, b 32768, a 65536
        sel.add(name, name, [])
    sel.remove("b")  # b's slots go to a, the range above
    assert [sel.select(h) for h in (16384, 16385, 40000)] == ["c", "a", "a"]
    sel.remove("a")  # the top range: c (below it) now ends at 65536
    assert [sel.select(h) for h in (1, 40000, 65535)] == ["c", "c", "c"]
    sel.add("d", "d", [])  # and the range splits again from the whole
    assert [sel.select(h) for h in (1, 32768, 32769)] == ["d", "d", "c"]
    sel.remove("nobody")  # unknown consumers are ignored


def test_range_split_refuses_a_consumer_once_no_range_can_be_split() -> None:
    sel: RangeSplitSelector[int] = RangeSplitSelector(size=4)  # 65536 works alike, slowly
    for i in range(4):
        sel.add(i, f"c{i}", [])
    assert [sel.select(h) for h in (1, 2, 3, 4)] == [2, 1, 3, 2]  # slot 4 % 4 = 0 reads as 1
    with pytest.raises(ConsumerAssignError, match="No more range"):
        sel.add(-1, "late", [])
