"""Exponential backoff between reconnection attempts, shared by the client and the stub client.

A :class:`Backoff` is a frozen policy; :meth:`Backoff.delays` hands out a fresh, endless sequence
of delays for one run of attempts (start a new one after a success). Pure: the caller sleeps on
its own clock. The C++ client also subtracts up to 9 % jitter; we leave it out so that FakeClock
tests see exact delays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["Backoff"]


class Backoff(msgspec.Struct, frozen=True):
    """Delays between attempts, in seconds (the client's defaults are spec §9's 100 ms to 60 s).

    Attributes:
        initial: The first delay.
        maximum: The ceiling.
        multiplier: Each delay is the previous one times this, up to `maximum`.
    """

    initial: float = 0.1
    maximum: float = 60.0
    multiplier: float = 2.0

    def delays(self) -> Iterator[float]:
        """Yield `initial`, then each delay times `multiplier` capped at `maximum`, forever."""
        delay = self.initial
        while True:
            yield delay
            delay = min(delay * self.multiplier, self.maximum)
