from __future__ import annotations

from loadgen.checks import SeenSet, compress, merge_checks
from loadgen.messages import ProducerTally


def acked(n: int, missing: tuple[int, ...] = ()) -> bytes:
    bitmap = bytearray(b"\x01" * n)
    for seq in missing:
        bitmap[seq] = 0
    return compress(bitmap)


def test_seen_set_counts_duplicates_and_first_deliveries_out_of_order() -> None:
    seen = SeenSet("producer")
    for seq in (0, 1, 3, 2, 1, 4):  # 2 comes after 3; the second 1 is a duplicate
        seen.see(0, seq, 0)
    assert seen.duplicates == 1
    assert seen.out_of_order == 1
    assert bytes(seen.bitmaps[0][:6]) == b"\x01\x01\x01\x01\x01\x00"


def test_order_per_key_and_none_for_shared() -> None:
    per_key = SeenSet("key")
    for seq, key in ((0, 1), (1, 2), (2, 1), (3, 2)):
        per_key.see(0, seq, key)
    per_key.see(0, 5, 1)
    per_key.see(0, 4, 2)  # key 2's order is kept: 1, 3, 4
    assert per_key.out_of_order == 0
    shared = SeenSet("none")
    for seq in (3, 2, 1, 0):
        shared.see(0, seq, 0)
    assert shared.out_of_order == 0


def test_bitmaps_grow_for_large_sequence_ids() -> None:
    seen = SeenSet("none")
    seen.see(1, 100_000, 0)
    assert seen.bitmaps[1][100_000] == 1


def test_merge_finds_loss_and_duplicates_across_workers() -> None:
    producers = [
        ProducerTally(
            index=0, group="in", topic="t", sent=10, acked=acked(10, missing=(9,)), failed=1
        ),
        ProducerTally(index=1, group="in", topic="t", sent=5, acked=acked(5), failed=0),
    ]
    a, b = SeenSet("producer"), SeenSet("producer")
    for seq in range(6):
        a.see(0, seq, 0)
    for seq in (5, 6, 7, 9):  # 5 again (a duplicate across workers), 8 lost, 9 was not acked
        b.see(0, seq, 0)
    for seq in range(5):
        b.see(1, seq, 0)
    report = merge_checks(
        [*producers],
        [a.tally("out", "s", 0), b.tally("out", "s", 2)],
        {"out": ("t", "s")},
        {0: "p0", 1: "p1"},
    )
    (sub,) = report.subscriptions
    assert (report.sent, report.acked, report.failed) == (15, 14, 1)
    assert (sub.acked, sub.received, sub.lost, sub.duplicates) == (14, 14, 1, 1)
    assert sub.lost_examples == [("p0", 8)]
    assert sub.unacked_received == 1
    assert sub.foreign == 2
    assert report.lost == 1
