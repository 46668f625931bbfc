from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emubroker.topics.cursor import Cursor, mask_from_words, words_from_mask


def test_individual_acks_advance_mark_delete_only_when_contiguous() -> None:
    c = Cursor()
    assert c.ack(1)
    assert c.mark_delete == -1
    assert c.is_acked(1)
    assert not c.is_acked(0)
    assert c.ack(0)
    assert c.mark_delete == 1
    assert c.acked == set()
    assert not c.ack(0)  # already acked


def test_cumulative_ack_drops_state_behind_it() -> None:
    c = Cursor()
    c.ack(3)
    c.ack(6)
    c.ack_batch(5, 0b10, 2)
    assert c.ack_cumulative(4)
    assert c.mark_delete == 4
    assert c.acked == {6}
    assert c.partial == {5: 0b10}
    version = c.version
    assert not c.ack_cumulative(2)  # behind mark-delete: no-op
    assert c.version == version


def test_cumulative_ack_joins_individually_acked_successors() -> None:
    c = Cursor()
    c.ack(2)
    c.ack(3)
    c.ack_cumulative(1)
    assert c.mark_delete == 3


def test_batch_index_acks_intersect_until_empty() -> None:
    c = Cursor()
    # Client sends the bitmap of indexes NOT yet acked: 0b1110 = message 0 acked.
    assert not c.ack_batch(0, 0b1110, 4)
    assert c.unacked_mask(0) == 0b1110
    # A second ack reporting only message 1 acked (0b1101) intersects to 0b1100.
    assert not c.ack_batch(0, 0b1101, 4)
    assert c.unacked_mask(0) == 0b1100
    assert c.ack_batch(0, 0b0011, 4)
    assert c.mark_delete == 0
    assert c.unacked_mask(0) is None


def test_reset_forgets_acks_and_places_mark_delete_before_target() -> None:
    c = Cursor()
    for i in (0, 1, 2, 5):
        c.ack(i)
    c.ack_batch(7, 0b1, 2)
    c.reset(1)
    assert c.mark_delete == 0
    assert not c.is_acked(1)
    assert not c.is_acked(5)
    assert c.unacked_mask(7) is None


def test_backlog_counts_unacked_entries() -> None:
    c = Cursor()
    assert c.backlog(5) == 5
    c.ack(0)
    c.ack(3)
    assert c.backlog(5) == 3
    c.ack_cumulative(4)
    assert c.backlog(5) == 0
    assert c.first_unacked(0, 5) == 5


def test_ack_set_words_round_trip_including_the_sign_bit() -> None:
    mask = (1 << 63) | (1 << 64) | 1
    words = words_from_mask(mask, 70)
    assert words == (-(1 << 63) + 1, 1)
    assert mask_from_words(words, 70) == mask
    assert mask_from_words((-1,), 5) == 0b11111


@given(st.lists(st.integers(min_value=0, max_value=40), max_size=60))
def test_mark_delete_is_the_end_of_the_acked_prefix(acks: list[int]) -> None:
    c = Cursor()
    for i in acks:
        c.ack(i)
    done = set(acks)
    prefix = -1
    while prefix + 1 in done:
        prefix += 1
    assert c.mark_delete == prefix
    assert c.acked == {i for i in done if i > prefix}
    assert c.backlog(41) == 41 - len(done)


@given(st.lists(st.integers(0, 30), max_size=40), st.lists(st.integers(0, 30), max_size=10))
def test_ack_many_is_ack_for_each_index(before: list[int], acks: list[int]) -> None:
    """The ACK hot path acknowledges a grouped ACK's ids in one call (spec §7.3)."""
    bulk = Cursor()
    single = Cursor()
    for index in before[: len(before) // 2]:
        bulk.ack_batch(index, 0b10, 2)  # some partly acked batches: ack must drop them
        single.ack_batch(index, 0b10, 2)
    for cursor in (bulk, single):
        for index in before[len(before) // 2 :]:
            cursor.ack(index)
    version = bulk.version
    newly = bulk.ack_many(acks)
    assert newly == [index for index in acks if single.ack(index)]
    assert (bulk.mark_delete, bulk.acked, bulk.partial) == (
        single.mark_delete,
        single.acked,
        single.partial,
    )
    assert (bulk.version > version) == bool(newly)  # a change, and only a change, is persisted


@given(
    st.integers(-1, 20),
    st.sets(st.integers(0, 40), max_size=15),
    st.integers(0, 30),
    st.integers(0, 15),
)
def test_acked_among_answers_as_is_acked(
    mark_delete: int, acked: set[int], first: int, n: int
) -> None:
    """The dispatcher's per-read answer is ``is_acked`` for every index of the read."""
    c = Cursor(mark_delete)
    c.ack_many(sorted(acked))
    among = c.acked_among(first, first + n)
    assert [i in among for i in range(first, first + n)] == [
        c.is_acked(i) for i in range(first, first + n)
    ]


def _brute_nth_unacked(cursor: Cursor, n: int, end: int) -> int | None:
    seen = 0
    for index in range(cursor.mark_delete + 1, end):
        if not cursor.is_acked(index):
            seen += 1
            if seen == n:
                return index
    return None


@pytest.mark.parametrize("acked", [set(), {3, 4, 9}, {2, 3, 5, 6, 7}, {11}])
def test_nth_unacked_steps_over_acknowledged_entries(acked: set[int]) -> None:
    cursor = Cursor(mark_delete=1)
    for index in acked:
        cursor.ack(index)
    cursor.ack_batch(8, 0b01, 2)  # partly acknowledged: still unacknowledged
    for n in range(0, 13):
        assert cursor.nth_unacked(n, 12) == _brute_nth_unacked(cursor, n, 12), n


@given(st.sets(st.integers(0, 40)), st.integers(1, 45))
def test_nth_unacked_agrees_with_a_walk(acked: set[int], n: int) -> None:
    cursor = Cursor()
    cursor.ack_many(sorted(acked, key=lambda i: -i))
    assert cursor.nth_unacked(n, 41) == _brute_nth_unacked(cursor, n, 41)


def test_nth_unacked_far_into_a_backlog_walks_nothing() -> None:
    # A backlog of a trillion entries (an index space, nothing stored): a walk would never
    # return.
    cursor = Cursor()
    cursor.ack(5)
    cursor.ack(10**12 - 3)
    assert cursor.nth_unacked(10**12 - 10, 10**12) == 10**12 - 10  # one acked before it
    assert cursor.nth_unacked(10**12 - 2, 10**12) == 10**12 - 1
    assert cursor.nth_unacked(10**12 - 1, 10**12) is None  # only 10^12 - 2 are unacked


def test_ack_set_words_of_an_ordinary_batch_cover_every_message() -> None:
    assert words_from_mask(0b1, 130) == (1, 0, 0)
    assert mask_from_words((-1, -1, -1), 130) == (1 << 130) - 1
    assert mask_from_words((0b111,), 2) == 0b11


def test_ack_set_words_of_a_claimed_huge_batch_end_at_the_last_set_bit() -> None:
    huge = 2**31 - 1
    assert words_from_mask(0b101, huge) == (0b101,)
    assert words_from_mask(1 << 64, huge) == (0, 1)
    assert mask_from_words((0b101,), huge) == 0b101
