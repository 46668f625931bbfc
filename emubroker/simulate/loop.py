"""The simulator's event loop: anyio on trio, with trio's ``MockClock`` and a seeded scheduler.

The only module of ``emubroker`` that names trio (ruff's ban is lifted for it in
pyproject.toml): a virtual-time run needs the loop's own clock to be virtual (trio's
``MockClock`` at rate 0, moved by ``FakeClock.autojump``), and trio reorders each batch of
runnable tasks at random. The simulator switches trio to its reproducible scheduling and gives
the run a generator of its own, seeded from the scenario, so that a run depends only on its
seed (``trio._core._run._r`` and ``_ALLOW_DETERMINISTIC_SCHEDULING``, trio's private names).

Trio draws from one module-level generator for every event loop of the process, whatever
thread runs it: another loop running meanwhile (an ``anyio.from_thread`` portal, a library's
worker thread) would take numbers from the simulation's sequence and change its schedule. So
that generator is replaced by :class:`_PerThreadRandom`, which hands each thread running a
simulation its own generator and every other thread trio's.
"""

from __future__ import annotations

import random
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import trio
import trio._core._run
from trio.testing import MockClock

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

__all__ = ["loop_clock_jump", "run_loop"]

T = TypeVar("T")


class _PerThreadRandom:
    """Stands in for trio's scheduling generator: a simulation's own in its thread.

    Attribute lookups (``shuffle``, ``random``, ``uniform``, ``seed``...) go to the generator
    of the current thread's simulation if one runs there, else to trio's (``shared``, which
    Hypothesis seeds in its tests).
    """

    def __init__(self, shared: random.Random) -> None:
        self.shared = shared
        self._local = threading.local()

    def __getattr__(self, name: str) -> Any:
        rng: random.Random | None = getattr(self._local, "rng", None)
        return getattr(self.shared if rng is None else rng, name)

    def use(self, rng: random.Random | None) -> None:
        """This thread's loops draw from ``rng`` (``None``: from trio's shared generator)."""
        self._local.rng = rng


_lock = threading.Lock()
_running = 0  # virtual runs in progress, over all threads
_deterministic_before = False


def _scheduler() -> _PerThreadRandom:
    """Trio's ``_r``, replaced by a :class:`_PerThreadRandom` the first time (under ``_lock``)."""
    scheduler = trio._core._run
    current = scheduler._r
    if isinstance(current, _PerThreadRandom):
        return current
    per_thread = _PerThreadRandom(current)
    scheduler._r = per_thread  # type: ignore[assignment]
    return per_thread


@contextmanager
def _seeded_scheduling(seed: int) -> Iterator[None]:
    """Trio's reproducible scheduling, from a generator seeded with ``seed``, in this thread."""
    global _running, _deterministic_before
    scheduler = trio._core._run
    with _lock:
        per_thread = _scheduler()
        if _running == 0:
            _deterministic_before = scheduler._ALLOW_DETERMINISTIC_SCHEDULING
        # Trio's reproducible mode (the one Hypothesis switches on when it is imported): each
        # batch of runnable tasks is put in creation order, then shuffled by the generator.
        # Set here whatever else was imported, so that a run's traces do not depend on it.
        scheduler._ALLOW_DETERMINISTIC_SCHEDULING = True  # type: ignore[misc]
        _running += 1
    per_thread.use(random.Random(seed))
    try:
        yield
    finally:
        per_thread.use(None)
        with _lock:
            _running -= 1
            if _running == 0:
                scheduler._ALLOW_DETERMINISTIC_SCHEDULING = _deterministic_before  # type: ignore[misc]


def run_loop(function: Callable[..., Awaitable[T]], *args: Any, virtual: bool, seed: int) -> T:
    """``anyio.run(function, *args)`` on trio; with a virtual loop clock when ``virtual``."""
    if not virtual:
        return anyio.run(function, *args, backend="trio")
    with _seeded_scheduling(seed):
        return anyio.run(
            function,
            *args,
            backend="trio",
            backend_options={"clock": MockClock()},  # rate 0: it moves only when jumped
        )


def loop_clock_jump() -> Callable[[float], None]:
    """The running loop's ``MockClock.jump`` (inside :func:`run_loop` with ``virtual``)."""
    clock = trio.lowlevel.current_clock()
    if not isinstance(clock, MockClock):
        raise RuntimeError("the loop does not run on a MockClock")
    return clock.jump
