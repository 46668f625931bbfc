"""Generated traffic for the fuzz harness (bench/fuzz.py) and its fast test.

A fuzz *session* is what one hostile connection sends before it hangs up: usually a real
handshake (and often a real producer and consumer, so that later frames reach them), then frames
of these kinds, mixed:

* ``valid``: a command with random fields, drawn from the hypothesis strategies of
  ``tests.support.strategies`` (a pool drawn once per seed); ids and topic names are pointed at the
  session's producer, consumer and topics most of the time, so that frames get past the lookups
  and into the handlers;
* ``bad-checksum``: a SEND of the session's producer whose CRC-32C is wrong;
* ``truncated``: a frame cut short (the rest of the stream is then read out of step);
* ``oversized``: a ``total_size`` above any frame limit;
* ``unknown-type``: a ``BaseCommand`` of a type number no broker knows;
* ``out-of-order``: a CONNECT again, a command only brokers send, or a first frame that is not
  CONNECT;
* ``garbage``: random bytes behind a plausible size.

Everything is deterministic for a seed. The broker must answer each with an error or a closed
connection, never with a crash, and keep serving everyone else.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from typing import Any, Final

import msgspec
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

from protocol import commands as c
from protocol.codec import encode_record
from protocol.framing import (
    build_entry,
    checksum,
    decode_frame,
    encode_frame,
    encode_payload_frame,
)
from tests.support.bytestreams import simple_frame, vfield
from tests.support.strategies import frames

__all__ = ["KINDS", "TOPICS", "FuzzTraffic"]

KINDS: Final = (
    "valid",
    "bad-checksum",
    "truncated",
    "oversized",
    "unknown-type",
    "out-of-order",
    "garbage",
)

TOPICS: Final = (
    *(f"persistent://public/default/fuzz-{i}" for i in range(4)),
    "non-persistent://public/default/fuzz-np",
)
"""The topics fuzz sessions use (few, so that their producers and consumers meet)."""

_WEIGHTS: Final = (60, 8, 6, 4, 6, 8, 8)
_BROKER_ONLY: Final = (
    c.Connected(server_version="fuzz", protocol_version=20),
    c.SendReceipt(producer_id=1, sequence_id=0),
    c.CloseProducer(producer_id=1, request_id=1),
    c.Success(request_id=1),
)


def _pool(count: int, seed: int) -> list[bytes]:
    """``count`` frames of commands with random fields (the ``frames`` strategy), for ``seed``."""
    pool: list[bytes] = []

    @settings(
        max_examples=count,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        deadline=None,
    )
    @given(frames())
    def collect(drawn: tuple[Any, bytes]) -> None:
        pool.append(drawn[1])

    hypothesis_seed(seed)(collect)()
    return pool


def _retarget(command: c.Command, rng: random.Random) -> c.Command:
    """Point a drawn command at the session's producer, consumer and topics, mostly."""
    changes: dict[str, Any] = {}
    fields = type(command).__struct_fields__
    for name in ("producer_id", "consumer_id"):
        if name in fields and rng.random() < 0.7:
            changes[name] = 1
    if "topic" in fields and rng.random() < 0.7:
        changes["topic"] = rng.choice(TOPICS)
    return msgspec.structs.replace(command, **changes) if changes else command


class FuzzTraffic:
    """Fuzz sessions for one seed.

    Args:
        seed: Makes everything reproducible.
        pool_size: Commands drawn from the hypothesis strategies (a few ms each).
    """

    def __init__(self, seed: int, pool_size: int = 2_000) -> None:
        self._rng = random.Random(seed)
        self._pool = _pool(pool_size, seed)
        # The drawn commands themselves, so that ids and topics can be retargeted.
        self._commands = [decode_frame(frame[4:]).command for frame in self._pool]
        self.kinds = dict.fromkeys(KINDS, 0)

    # ---- one frame of each kind --------------------------------------------------------------

    def _valid(self) -> bytes:
        rng = self._rng
        i = rng.randrange(len(self._pool))
        command = self._commands[i]
        if isinstance(command, (c.Send, c.Message)) or rng.random() < 0.3:
            return self._pool[i]
        return encode_frame(_retarget(command, rng))

    def _bad_checksum(self) -> bytes:
        entry = self._entry()
        return encode_payload_frame(
            c.Send(producer_id=1, sequence_id=self._rng.randrange(1 << 20)),
            entry,
            checksum(entry) ^ 1,
        )

    def _truncated(self) -> bytes:
        frame = self._pool[self._rng.randrange(len(self._pool))]
        return frame[: self._rng.randrange(1, len(frame))]

    def _oversized(self) -> bytes:
        return struct.pack(">II", self._rng.randrange(64 << 20, 1 << 32), 8) + b"\0" * 16

    def _unknown_type(self) -> bytes:
        return simple_frame(vfield(1, self._rng.choice((0, 1, 99, 250, 1 << 20))))

    def _out_of_order(self) -> bytes:
        if self._rng.random() < 0.5:
            return encode_frame(c.Connect(client_version="fuzz", protocol_version=20))
        return encode_frame(self._rng.choice(_BROKER_ONLY))

    def _garbage(self) -> bytes:
        body = self._rng.randbytes(self._rng.randrange(1, 200))
        return struct.pack(">I", len(body)) + body

    def _entry(self) -> bytes:
        meta = c.MessageMetadata(producer_name="fuzz", sequence_id=0, publish_time=1)
        return build_entry(encode_record(meta), self._rng.randbytes(self._rng.randrange(64)))

    # ---- sessions -----------------------------------------------------------------------------

    def session(self, frames_wanted: int = 20) -> tuple[bytes, int]:
        """The bytes one fuzz connection sends, and how many frames they hold."""
        rng = self._rng
        out: list[bytes] = []
        if rng.random() < 0.9:
            out.append(encode_frame(c.Connect(client_version="fuzz", protocol_version=20)))
            topic = rng.choice(TOPICS)
            if rng.random() < 0.6:
                entry = self._entry()
                send = c.Send(producer_id=1, sequence_id=0)
                out.append(encode_frame(c.Producer(topic=topic, producer_id=1, request_id=1)))
                out.append(encode_payload_frame(send, entry, checksum(entry)))
            if rng.random() < 0.5:
                out.append(
                    encode_frame(
                        c.Subscribe(
                            topic=topic,
                            subscription=f"fuzz-{rng.randrange(3)}",
                            sub_type=rng.choice(list(c.SubType)),
                            consumer_id=1,
                            request_id=2,
                        )
                    )
                )
                permits = rng.randrange(1, 1000)
                out.append(encode_frame(c.Flow(consumer_id=1, message_permits=permits)))
        makers: tuple[Callable[[], bytes], ...] = (
            self._valid,
            self._bad_checksum,
            self._truncated,
            self._oversized,
            self._unknown_type,
            self._out_of_order,
            self._garbage,
        )
        for _ in range(max(0, frames_wanted - len(out))):
            k = rng.choices(range(len(KINDS)), weights=_WEIGHTS)[0]
            self.kinds[KINDS[k]] += 1
            out.append(makers[k]())
        return b"".join(out), len(out)
