"""Timeouts on the injected clock for any number of operations, with one timer task.

An operation runs inside ``with watchdog.limit(seconds) as scope:``; when ``seconds`` have passed
on the clock the watchdog cancels the scope, and the operation sees ``scope.cancelled_caught``.
The timer task sleeps until the earliest deadline only: a new, earlier deadline wakes it to
sleep again for less. Leaving a ``limit`` block just marks the entry done (found and dropped
when it reaches the top of the heap), so an operation that finishes in time costs a heap push.
"""

from __future__ import annotations

import heapq
import itertools
import math
from contextlib import contextmanager
from typing import TYPE_CHECKING, NoReturn

import anyio

if TYPE_CHECKING:
    from collections.abc import Iterator

    from protocol.clock import Clock

__all__ = ["DeadlineWatchdog"]


class _Entry:
    __slots__ = ("deadline", "scope")

    def __init__(self, deadline: float, scope: anyio.CancelScope) -> None:
        self.deadline = deadline
        self.scope: anyio.CancelScope | None = scope


class DeadlineWatchdog:
    """Cancels scopes whose deadline passed on ``clock``; run :meth:`run` in a task group."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._heap: list[tuple[float, int, _Entry]] = []
        self._order = itertools.count()
        self._sleeping_until = math.inf
        self._sleep_scope: anyio.CancelScope | None = None

    @contextmanager
    def limit(self, seconds: float) -> Iterator[anyio.CancelScope]:
        """Cancel the block after ``seconds`` on the clock; check ``cancelled_caught`` after it."""
        deadline = self.clock.now() + seconds
        with anyio.CancelScope() as scope:
            entry = _Entry(deadline, scope)
            heapq.heappush(self._heap, (deadline, next(self._order), entry))
            if deadline < self._sleeping_until and self._sleep_scope is not None:
                self._sleep_scope.cancel()  # the timer sleeps past this deadline: recompute
            try:
                yield scope
            finally:
                entry.scope = None

    async def run(self) -> NoReturn:
        """Fire deadlines as they come; never returns."""
        while True:
            while self._heap and self._heap[0][2].scope is None:
                heapq.heappop(self._heap)
            self._sleeping_until = self._heap[0][0] if self._heap else math.inf
            with anyio.CancelScope() as self._sleep_scope:
                if math.isinf(self._sleeping_until):
                    await anyio.sleep_forever()
                await self.clock.sleep_until(self._sleeping_until)
            self._sleep_scope = None
            now = self.clock.now()
            while self._heap and self._heap[0][0] <= now:
                scope = heapq.heappop(self._heap)[2].scope
                if scope is not None:
                    scope.cancel()
