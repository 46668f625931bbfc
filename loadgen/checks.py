"""Correctness checks: loss, duplicates and reordering, from bitmaps of sequence ids.

Each partition producer's sequence ids run 0, 1, 2, ... (loadgen sets them), so what was
receipted and what each subscription received are bitmaps indexed by sequence id (a byte per
id, 1 = yes). Workers keep them as `bytearray`s and send them compressed at the end; the runner
ORs a subscription's bitmaps from every worker (overlaps are duplicates across workers) and
compares them with the receipted ones: a message receipted by the broker and never received by
a subscription is *lost*.

Reordering is checked where Pulsar promises order: per producer (partition) for Exclusive and
Failover subscriptions, per producer and key for Key_Shared, not at all for Shared. A message is
*out of order* when it is delivered for the first time after a later message of the same
producer (and key) was; a redelivery of something already seen is a duplicate, not a reorder.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Any

import msgspec

from loadgen.messages import ConsumerTally, ProducerTally

__all__ = ["CheckReport", "SeenSet", "SubscriptionCheck", "compress", "merge_checks"]

_EXAMPLES = 10


def compress(bitmap: bytearray) -> bytes:
    return zlib.compress(bytes(bitmap), 1)


class SeenSet:
    """What one consumer group received in this worker.

    Args:
        order: `producer` (Exclusive, Failover), `key` (Key_Shared) or `none` (Shared).
    """

    __slots__ = ("_last", "_per_key", "bitmaps", "duplicates", "order", "out_of_order")

    def __init__(self, order: str) -> None:
        self.order = order
        self.bitmaps: dict[int, bytearray] = {}
        # The last first delivery of each ordered stream: keyed by producer index, or by
        # (producer index, key index) for Key_Shared; None when nothing is ordered (Shared).
        self._last: dict[Any, int] | None = None if order == "none" else {}
        self._per_key = order == "key"
        self.duplicates = 0
        self.out_of_order = 0

    def see(self, producer: int, sequence_id: int, key: int) -> None:
        """Record one delivery."""
        bitmap = self.bitmaps.get(producer)
        if bitmap is None or sequence_id >= len(bitmap):
            bitmap = self._room(producer, sequence_id)
        if bitmap[sequence_id]:
            self.duplicates += 1
            return
        bitmap[sequence_id] = 1
        last = self._last
        if last is None:
            return
        stream = (producer, key) if self._per_key else producer
        if sequence_id < last.get(stream, -1):
            self.out_of_order += 1
        else:
            last[stream] = sequence_id

    def _room(self, producer: int, sequence_id: int) -> bytearray:
        """The producer's bitmap, grown to hold `sequence_id`."""
        bitmap = self.bitmaps.get(producer)
        if bitmap is None:
            bitmap = self.bitmaps[producer] = bytearray(1024)
        if sequence_id >= len(bitmap):
            bitmap.extend(bytes(max(sequence_id + 1 - len(bitmap), len(bitmap))))
        return bitmap

    def tally(self, group: str, subscription: str, foreign: int) -> ConsumerTally:
        return ConsumerTally(
            group=group,
            subscription=subscription,
            received={p: compress(b) for p, b in self.bitmaps.items()},
            duplicates=self.duplicates,
            out_of_order=self.out_of_order,
            foreign=foreign,
        )


class SubscriptionCheck(msgspec.Struct):
    topic: str
    subscription: str
    acked: int  # receipted messages of the topic's producers
    received: int  # distinct messages received
    lost: int  # receipted, never received
    duplicates: int
    out_of_order: int
    foreign: int
    unacked_received: int  # received although the send did not complete (e.g. timed out)
    lost_examples: list[tuple[str, int]]  # (producer name, sequence id)


class CheckReport(msgspec.Struct):
    subscriptions: list[SubscriptionCheck]
    sent: int
    acked: int
    failed: int

    @property
    def lost(self) -> int:
        return sum(s.lost for s in self.subscriptions)


class _Merged:
    """One subscription's tallies, summed over workers."""

    def __init__(self) -> None:
        self.received: dict[int, int] = {}  # producer index -> bitmap as an int
        self.duplicates = 0
        self.out_of_order = 0
        self.foreign = 0


def _bits(data: bytes) -> int:
    return int.from_bytes(zlib.decompress(data), "little")


def _ones(value: int) -> int:
    # Bitmaps hold one byte per id, 0 or 1: every set bit is one id.
    return value.bit_count()


def _positions(value: int, limit: int) -> list[int]:
    raw = value.to_bytes((value.bit_length() + 7) // 8, "little")
    found: list[int] = []
    start = 0
    while len(found) < limit and (index := raw.find(1, start)) >= 0:
        found.append(index)
        start = index + 1
    return found


def merge_checks(
    producers: Iterable[ProducerTally],
    consumers: Iterable[ConsumerTally],
    subscriptions: dict[str, tuple[str, str]],
    producer_names: dict[int, str],
) -> CheckReport:
    """Combine every worker's tallies.

    Args:
        producers: every partition producer's tally.
        consumers: every worker's tally of every consumer group.
        subscriptions: consumer group -> (topic, subscription).
        producer_names: producer index -> name, for the examples.
    """
    acked_by_topic: dict[str, dict[int, int]] = {}
    sent = acked_total = failed = 0
    for tally in producers:
        acked = _bits(tally.acked)
        acked_by_topic.setdefault(tally.topic, {})[tally.index] = acked
        sent += tally.sent
        acked_total += _ones(acked)
        failed += tally.failed
    merged: dict[tuple[str, str], _Merged] = {}
    for seen in consumers:
        entry = merged.setdefault(subscriptions[seen.group], _Merged())
        entry.duplicates += seen.duplicates
        entry.out_of_order += seen.out_of_order
        entry.foreign += seen.foreign
        for producer, data in seen.received.items():
            bits = _bits(data)
            previous = entry.received.get(producer, 0)
            entry.duplicates += _ones(previous & bits)
            entry.received[producer] = previous | bits
    checks = []
    for (topic, subscription), entry in sorted(merged.items()):
        lost = acked_count = received_count = unacked_received = 0
        examples: list[tuple[str, int]] = []
        for producer, acked in acked_by_topic.get(topic, {}).items():
            got = entry.received.get(producer, 0)
            missing = acked & ~got
            lost += _ones(missing)
            acked_count += _ones(acked)
            received_count += _ones(got)
            unacked_received += _ones(got & ~acked)
            if missing and len(examples) < _EXAMPLES:
                name = producer_names.get(producer, str(producer))
                examples += [(name, seq) for seq in _positions(missing, _EXAMPLES - len(examples))]
        checks.append(
            SubscriptionCheck(
                topic=topic,
                subscription=subscription,
                acked=acked_count,
                received=received_count,
                lost=lost,
                duplicates=entry.duplicates,
                out_of_order=entry.out_of_order,
                foreign=entry.foreign,
                unacked_received=unacked_received,
                lost_examples=examples,
            )
        )
    return CheckReport(subscriptions=checks, sent=sent, acked=acked_total, failed=failed)
