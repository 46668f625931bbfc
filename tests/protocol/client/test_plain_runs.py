"""`BatchBuilder.add_plain`'s runs: cached heads per 128 consecutive ids equal the generic bytes.

A producer numbers its messages consecutively, so `add_plain` caches the header pieces shared by
128 ids of one payload size. These tests drive it with consecutive ids across every varint length
boundary, with payload sizes that repeat, alternate or change every message, with jumps and
values out of range, batch after batch on one builder, and compare each batch with the one
built from `SingleMessageMetadata` records (`generic_batch`).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.client.messages import BatchBuilder
from protocol.codec import encode_record
from protocol.commands import SingleMessageMetadata
from protocol.errors import LocalProtocolError
from tests.protocol.client.test_plain_sends import generic_batch

U64_MAX = 2**64 - 1

# Starting ids just below a change of varint length (and the ends of the uint64 range).
STARTS = st.sampled_from(
    [0, 100, 2**64 - 300] + [max(0, 2 ** (7 * k) - d) for k in range(1, 10) for d in (1, 60, 130)]
) | st.integers(0, U64_MAX - 300)


@st.composite
def message_runs(draw: st.DrawFn) -> list[tuple[bytes, int]]:
    """Messages with mostly consecutive ids and payload sizes in runs, alternating or random."""
    sequence_id = draw(STARTS)
    shape = draw(st.sampled_from(["one size", "runs", "alternating", "random"]))
    sizes = draw(st.lists(st.integers(0, 200), min_size=1, max_size=3))
    messages = []
    for i in range(draw(st.integers(1, 300))):
        if shape == "one size":
            size = sizes[0]
        elif shape == "runs":
            size = sizes[(i // 50) % len(sizes)]
        elif shape == "alternating":
            size = sizes[i % len(sizes)]
        else:
            size = draw(st.integers(0, 200))
        if draw(st.integers(0, 99)) == 0:  # an explicit id: a jump either way
            sequence_id = draw(st.integers(0, U64_MAX - 300))
        messages.append((b"p" * size, sequence_id))
        sequence_id += 1
    return messages


@given(batches=st.lists(message_runs(), min_size=1, max_size=3), with_checksum=st.booleans())
def test_runs_of_ids_and_sizes_equal_the_generic_path(
    batches: list[list[tuple[bytes, int]]], with_checksum: bool
) -> None:
    batch = BatchBuilder()  # one builder: runs go on across batches
    for messages in batches:
        batch.start(messages[0][1], 1_700_000_000_000, None, 0.0)
        for payload, sequence_id in messages:
            batch.add_plain(payload, sequence_id)
        frame = batch.build(3, "prod", with_checksum)[1]
        assert frame == generic_batch(3, "prod", 1_700_000_000_000, None, messages, with_checksum)


def test_a_run_goes_on_batch_after_batch_and_through_every_length() -> None:
    batch = BatchBuilder()
    sequence_id = 0
    for length in range(1, 11):  # ids around each varint length's first value
        sequence_id = max(sequence_id, 2 ** (7 * (length - 1)) - 5) if length > 1 else 0
        for _ in range(3):
            messages = [(b"abc", sequence_id + i) for i in range(7)]
            batch.start(sequence_id, 5, None, 0.0)
            for payload, seq in messages:
                batch.add_plain(payload, seq)
            assert batch.build(1, "p")[1] == generic_batch(1, "p", 5, None, messages, True)
            sequence_id += 7


@pytest.mark.parametrize("sequence_id", [-1, -(2**63), U64_MAX + 1])
def test_out_of_range_ids_fail_as_the_codec_does_inside_a_run(sequence_id: int) -> None:
    with pytest.raises(LocalProtocolError):
        encode_record(SingleMessageMetadata(payload_size=3, sequence_id=sequence_id))
    batch = BatchBuilder()
    batch.start(0, 5, None, 0.0)
    for seq in range(3):  # a run at size 3 is open
        batch.add_plain(b"abc", seq)
    with pytest.raises(LocalProtocolError):
        batch.add_plain(b"abc", sequence_id)
    messages = [(b"abc", seq) for seq in range(4)]
    batch.add_plain(b"abc", 3)  # the run is intact
    assert batch.build(1, "p")[1] == generic_batch(1, "p", 5, None, messages, True)
