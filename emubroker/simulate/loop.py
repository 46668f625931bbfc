"""The simulator's event loop: anyio on trio, with trio's ``MockClock`` and a seeded scheduler.

The only module of ``emubroker`` that names trio (ruff's ban is lifted for it in
pyproject.toml): a virtual-time run needs the loop's own clock to be virtual (trio's
``MockClock`` at rate 0, moved by ``FakeClock.autojump``), and trio reorders each batch of
runnable tasks at random, from a module-level generator: the simulator switches trio to its
reproducible scheduling and seeds that generator, so that a run depends only on its seed
(``trio._core._run._r`` and ``_ALLOW_DETERMINISTIC_SCHEDULING``, trio's private names used).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import trio
import trio._core._run
from trio.testing import MockClock

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ["loop_clock_jump", "run_loop"]

T = TypeVar("T")


def run_loop(function: Callable[..., Awaitable[T]], *args: Any, virtual: bool, seed: int) -> T:
    """``anyio.run(function, *args)`` on trio; with a virtual loop clock when ``virtual``."""
    if not virtual:
        return anyio.run(function, *args, backend="trio")
    scheduler = trio._core._run
    # Trio's reproducible mode (the one Hypothesis switches on when it is imported): each
    # batch of runnable tasks is put in creation order, then shuffled by the seeded generator.
    # Set here whatever else was imported, so that a run's traces do not depend on it.
    deterministic = scheduler._ALLOW_DETERMINISTIC_SCHEDULING
    scheduler._ALLOW_DETERMINISTIC_SCHEDULING = True  # type: ignore[misc]
    scheduler._r.seed(seed)
    try:
        return anyio.run(
            function,
            *args,
            backend="trio",
            backend_options={"clock": MockClock()},  # rate 0: it moves only when jumped
        )
    finally:
        scheduler._ALLOW_DETERMINISTIC_SCHEDULING = deterministic  # type: ignore[misc]


def loop_clock_jump() -> Callable[[float], None]:
    """The running loop's ``MockClock.jump`` (inside :func:`run_loop` with ``virtual``)."""
    clock = trio.lowlevel.current_clock()
    if not isinstance(clock, MockClock):
        raise RuntimeError("the loop does not run on a MockClock")
    return clock.jump
