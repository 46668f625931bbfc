"""What loadgen puts in a message: a fixed header, then padding up to the size asked for.

    [magic u16 "LG"][version u8][flags u8][run tag u32][producer index u32][key index u32]
    [sequence id i64][intended ns i64][send ns i64]

little-endian, 40 bytes (`scenario.PAYLOAD_HEADER_SIZE`). The magic tells loadgen's messages
from anything else on the topic, the run tag this run's from another run's (a `loadgen consume`
measures the latency of what a separate `loadgen produce` sends); the producer index and
sequence id identify the message for
the correctness checks and the traces; the two times let a consumer measure end-to-end latency
from the intended send time without asking the producer.

Trace sampling is decided from the message's identity alone (`sampled`), so a producer and
every consumer keep rows for the same messages and the two tables join.
"""

from __future__ import annotations

import bisect
import itertools
import random
import struct
import zlib
from collections.abc import Callable
from typing import Final

from loadgen.scenario import PAYLOAD_HEADER_SIZE, Keys

__all__ = [
    "HEADER",
    "MAGIC",
    "NO_KEY",
    "VERSION",
    "key_chooser",
    "key_name",
    "run_tag",
    "sampled",
    "sampling_threshold",
]

HEADER: Final = struct.Struct("<HBBIIIqqq")
MAGIC: Final = 0x474C  # b"LG" little-endian
VERSION: Final = 1
assert HEADER.size == PAYLOAD_HEADER_SIZE

NO_KEY: Final = 0xFFFF_FFFF

_MIX_A: Final = 0x9E37_79B9_7F4A_7C15
_MIX_B: Final = 0xBF58_476D_1CE4_E5B9
_MASK: Final = (1 << 64) - 1
_SAMPLE_BITS: Final = 53


def run_tag(run_id: str) -> int:
    """The 32-bit tag of a run, written in every payload."""
    return zlib.crc32(run_id.encode())


def key_name(index: int) -> str:
    return f"k-{index}"


def sampling_threshold(fraction: float) -> int:
    """The threshold `sampled` compares against for a sampling fraction in [0, 1]."""
    return int(fraction * (1 << _SAMPLE_BITS))


def sampled(producer_index: int, sequence_id: int, threshold: int) -> bool:
    """Whether the message's rows go into the traces: a hash of its identity below threshold."""
    mixed = ((producer_index + 1) * _MIX_A ^ (sequence_id * _MIX_B)) & _MASK
    mixed = (mixed ^ (mixed >> 31)) * _MIX_B & _MASK
    return (mixed >> (64 - _SAMPLE_BITS)) < threshold


def key_chooser(keys: Keys, rng: random.Random) -> Callable[[], int]:
    """A function giving the next key index (`NO_KEY` when the group sends no keys)."""
    match keys.distribution:
        case "none":
            return lambda: NO_KEY
        case "round_robin":
            return itertools.cycle(range(keys.count)).__next__
        case "random":
            count = keys.count
            return lambda: rng.randrange(count)
        case "zipf":
            weights = [1.0 / (i + 1) ** keys.s for i in range(keys.count)]
            cumulative = list(itertools.accumulate(weights))
            total = cumulative[-1]
            pick = bisect.bisect_left
            draw = rng.random
            return lambda: min(pick(cumulative, draw() * total), keys.count - 1)
    raise AssertionError(keys.distribution)  # pragma: no cover - Literal is exhaustive
