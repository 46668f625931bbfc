"""The simulator's event loop: anyio on trio, on trio's ``MockClock``, with a seeded scheduler.

The only module of ``emubroker`` that names trio (ruff's ban is lifted for it in
pyproject.toml). A virtual-time run is a trio loop whose own clock is virtual: a ``MockClock``
at rate 0 that trio itself jumps to the next deadline as soon as every task waits (its
``autojump_threshold`` at 0). :class:`VirtualClock` is the ``Clock`` the simulation's services
get: its time is that loop clock's and its sleeps are the loop's own timers, so a timer that
falls due costs the loop no task of its own (a clock that kept its sleepers itself needed a
task to wake them, one more round of the loop for every timer). Trio reorders each batch of
runnable tasks at random: the simulator switches trio to its reproducible scheduling and gives
the run a generator of its own, seeded from the scenario, so that a run depends only on its
seed (``trio._core._run._r`` and ``_ALLOW_DETERMINISTIC_SCHEDULING``, trio's private names).
Sleepers due at the same time wake in the same batch, which that scheduling orders by the
tasks' creation and the seeded generator, whatever order trio's timers fired in.

Trio draws from one module-level generator for every event loop of the process, whatever
thread runs it: another loop running meanwhile (an ``anyio.from_thread`` portal, a library's
worker thread) would take numbers from the simulation's sequence and change its schedule. So
that generator is replaced by :class:`_PerThreadRandom`, which hands each thread running a
simulation its own generator and every other thread trio's.

Garbage collection while a simulation runs is a serving broker's (``emubroker.__main__``):
what exists when the loop starts (the imported modules, the scenario) is frozen, and the
youngest generation is collected every ``SIMULATION_GC_THRESHOLD`` allocations rather than
Python's 700. Brokers, clients and loadgen share the process, so the default collected ~170
times per 10,000 messages and walked the whole heap (~120,000 objects) twice: ~5-8 % of a run's
CPU; at scale (20 brokers, 4,000 partitions) the set-up's growing heap made it a quarter. Their
garbage is acyclic and freed by reference counting either way.
"""

from __future__ import annotations

import functools
import gc
import heapq
import itertools
import math
import random
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio
import outcome
import trio
import trio._core._run
from trio.testing import MockClock

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from protocol.clock import Alarm, Clock, Timer

__all__ = ["SIMULATION_GC_THRESHOLD", "VirtualClock", "run_loop"]

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

    def shuffle(self, batch: list[Any]) -> None:
        """Shuffle a batch of tasks (trio's one draw per round of its loop)."""
        # Most rounds of a simulation run one task, and shuffling one element draws no number:
        # skipping it leaves the sequence as it was and saves the lookups.
        if len(batch) > 1:
            rng: random.Random | None = getattr(self._local, "rng", None)
            (self.shared if rng is None else rng).shuffle(batch)

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


class VirtualClock:
    """The ``Clock`` of a virtual run: the time of the loop's ``MockClock``, its timers for sleeps.

    Give it to :func:`run_loop`, which runs the loop on :attr:`loop_clock`; trio moves that
    clock to the next deadline whenever every task waits, so each sleep ends at its deadline
    exactly, and ``anyio.fail_after`` guards and this clock's sleeps share one time line.

    Args:
        epoch: Wall-clock seconds since the Unix epoch that correspond to ``now() == 0``.
    """

    def __init__(self, *, epoch: float = 1_700_000_000.0) -> None:
        self.loop_clock = MockClock(rate=0, autojump_threshold=0)
        # Trio calls its clock's `_autojump` when every task waits (a round of its loop that
        # runs no task); the deadlines it jumps to expire in the next round. `_jump` lets them
        # expire in the same round: one round of the loop (an epoll poll, the heap's checks,
        # the instruments) less per instant the clock jumps to. MockClock is final: the
        # method is replaced on the instance.
        self.loop_clock._autojump = self._jump  # type: ignore[method-assign]
        # At rate 0 the loop's time is the clock's virtual base, whatever the host's clock
        # reads: trio asks for it a few times a round and every timer and `now()` once more,
        # and MockClock's own `current_time` converts from `perf_counter` each time (4x the
        # CPU of reading the attribute).
        self.loop_clock.current_time = functools.partial(  # type: ignore[method-assign]
            getattr, self.loop_clock, "_virtual_base"
        )
        # `_CallingTimer`s' places among timers due together: the order they were made in.
        self._timers = itertools.count(1)
        # Kept in integer nanoseconds: 1.7e18 ns is beyond a float's 2**53 exact range.
        self._epoch_ns = round(epoch * 1_000_000_000)

    def _jump(self) -> None:
        """``MockClock._autojump`` (the same jump), then the deadlines reached expire at once."""
        clock = self.loop_clock
        deadlines = trio._core._run.GLOBAL_RUN_CONTEXT.runner.deadlines
        jump = deadlines.next_deadline() - clock.current_time()
        if 0 < jump < math.inf:
            clock.jump(jump)
            # What the loop's next round would do first (after an epoll poll with nothing to
            # poll for): the tasks it wakes run in this round's batch instead.
            deadlines.expire(clock.current_time())

    def now(self) -> float:
        """The virtual time (seconds since the loop started)."""
        return self.loop_clock.current_time()

    def wall_ns(self) -> int:
        """The epoch plus ``now()``, in nanoseconds."""
        return self._epoch_ns + round(self.loop_clock.current_time() * 1_000_000_000)

    def wall_ms(self) -> int:
        """``wall_ns()`` in milliseconds."""
        return self.wall_ns() // 1_000_000

    async def sleep_until(self, deadline: float) -> None:
        """Sleep until the loop's clock reaches ``deadline`` (a past one only checkpoints).

        Raises:
            ValueError: ``deadline`` is NaN.
        """
        if math.isnan(deadline):
            raise ValueError("deadline is NaN")
        if deadline <= self.loop_clock.current_time():
            await trio.lowlevel.checkpoint()
            return
        await _Timer(deadline).wait()

    async def sleep(self, delay: float) -> None:
        """Sleep ``delay`` seconds of virtual time (a negative delay counts as 0)."""
        await self.sleep_until(self.loop_clock.current_time() + max(delay, 0.0))

    def alarm(self) -> Alarm:
        """An alarm on the loop's timers (this clock's time is the loop's: no conversion)."""
        return _TrioAlarm(self.loop_clock)

    def timer(self, callback: Callable[[], None]) -> Timer:
        """A timer the loop calls back itself when it falls due: no task wakes for it."""
        return _CallingTimer(callback, next(self._timers))


class _Timer:
    """One task's wake-up at a deadline, on the loop's own heap of deadlines, without a scope.

    Trio's sleeps are cancel scopes with a deadline: each one makes a scope and its cancel
    status, and its end is a ``Cancelled`` raised into the sleeping task and caught by the
    scope, ~2.5x the CPU of the wake-up itself (23 µs against 9 µs a timer in a loop of 100
    sleepers). In a simulation every message pays a few of them (loadgen's schedule, the
    producer's batch timer, the consumer's acknowledgement timer). A timer is entered in the
    same heap as the scopes' deadlines (``Runner.deadlines``), which trio reads for its next
    timeout and ``MockClock`` for its jumps, and when it falls due trio calls its ``_cancel``,
    which reschedules the task. What trio's heap asks of an entry (private names, trio 0.25 and
    later): ``_registered_deadline``, the deadline it is entered with (a changed one marks the
    entry stale), and ``_cancel(reason)``, which must call ``Deadlines.remove`` and unregister.
    Timers due together wake in one batch, ordered by the seeded scheduler, as scopes do.
    """

    __slots__ = ("_deadlines", "_registered_deadline", "_task")

    def __init__(self, deadline: float) -> None:
        self._registered_deadline = math.inf
        self._task: trio.lowlevel.Task | None = None
        self._deadlines = trio._core._run.GLOBAL_RUN_CONTEXT.runner.deadlines
        self.move(deadline)

    def move(self, deadline: float) -> None:
        """Enter the timer at ``deadline`` (``inf``: take it out of the heap)."""
        if self._registered_deadline != math.inf:
            self._deadlines.remove(self._registered_deadline, self)  # type: ignore[arg-type]
        self._registered_deadline = deadline
        if deadline != math.inf:
            self._deadlines.add(deadline, self)  # type: ignore[arg-type]

    def _cancel(self, reason: object) -> None:
        """Trio's heap: the deadline is reached (it pops the entry; we unregister)."""
        self.move(math.inf)
        task, self._task = self._task, None
        if task is not None:
            trio.lowlevel.reschedule(task)

    def _abort(self, _: object) -> trio.lowlevel.Abort:
        """The sleeping task is cancelled: the timer leaves the heap."""
        self.move(math.inf)
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED

    async def wait(self) -> None:
        """Sleep until the deadline (a checkpoint: raises ``Cancelled`` when cancelled)."""
        self._task = trio.lowlevel.current_task()
        await trio.lowlevel.wait_task_rescheduled(self._abort)


class _CallingTimer:
    """``protocol.clock.Timer`` called back from trio's loop, in its deadline heap's expiry.

    Entered in ``Runner.deadlines`` as :class:`_Timer` is (see there for what the heap asks of
    an entry), but when it falls due ``_cancel`` calls the callback there and then, during the
    loop's round, before that round's tasks run: the task that serves it (``run``) sleeps for
    good, so a timer that falls due once per message (a batch's publish delay, an ack group's
    time) costs no task step and no round of its own. The callback is the client's synchronous
    work (a batch built and written to a memory pipe, acks sent); what it raises is thrown into
    the serving task, as if that task had called it. Timers due at the same instant are called
    in the order they were made (their heap entries carry that place, not an ``id``, which
    would make the order of their writes depend on memory addresses); places start at 1, far
    below any ``id`` a scope's entry carries, so two entries never tie.
    """

    __slots__ = (
        "_callback",
        "_deadlines",
        "_ended",
        "_error",
        "_place",
        "_registered_deadline",
        "_task",
    )

    def __init__(self, callback: Callable[[], None], place: int) -> None:
        self._callback = callback
        self._place = place
        self._registered_deadline = math.inf
        self._deadlines: Any = None
        self._task: trio.lowlevel.Task | None = None
        self._error: BaseException | None = None
        self._ended = False  # its serving task has ended

    @property
    def deadline(self) -> float:
        """When the callback is next called (``inf``: never)."""
        return self._registered_deadline

    def set(self, deadline: float) -> None:
        """Move the deadline (in the heap: the old entry goes stale)."""
        if deadline == self._registered_deadline:
            return  # already entered there (no second entry in the heap)
        deadlines = self._deadlines
        if deadlines is None:
            deadlines = self._deadlines = trio._core._run.GLOBAL_RUN_CONTEXT.runner.deadlines
        if self._registered_deadline != math.inf:
            deadlines.remove(self._registered_deadline, self)
        if self._ended:
            deadline = math.inf  # nobody serves it any more: no more calls, as on other clocks
        self._registered_deadline = deadline
        if deadline != math.inf:
            heapq.heappush(deadlines._heap, (deadline, self._place, self))
            deadlines._active += 1

    def _cancel(self, reason: object) -> None:
        """Trio's heap: the deadline is reached. Unregister, then call back."""
        self.set(math.inf)
        try:
            self._callback()
        except BaseException as error:  # handed to the serving task, never lost
            task, self._task = self._task, None
            if task is None:
                self._error = error
            else:
                trio.lowlevel.reschedule(task, outcome.Error(error))

    async def run(self) -> None:
        """Serve the timer: sleep until cancelled, or raise what a callback raised."""
        if self._error is not None:
            raise self._error
        self._task = trio.lowlevel.current_task()

        def abort(_: object) -> trio.lowlevel.Abort:
            self._task = None
            return trio.lowlevel.Abort.SUCCEEDED

        try:
            await trio.lowlevel.wait_task_rescheduled(abort)
        finally:
            self._ended = True
            self.set(math.inf)


class _TrioAlarm:
    """``protocol.clock.LoopAlarm`` in trio's own terms, for the loop that is the clock.

    The waiter sleeps on a :class:`_Timer` that ``set`` moves: no cancel scope per wait and no
    ``Cancelled`` when it rings (a timer armed per message pays either every time).
    """

    def __init__(self, clock: MockClock) -> None:
        self.deadline = math.inf
        self._clock = clock
        self._timer: _Timer | None = None

    def set(self, deadline: float) -> None:
        """Move the deadline; a waiting task's sleep ends at the new one."""
        self.deadline = deadline
        if self._timer is not None:
            self._timer.move(deadline)

    async def wait(self) -> None:
        """Sleep until the loop's clock reaches the deadline as last set."""
        if self._clock.current_time() >= self.deadline:
            await trio.lowlevel.checkpoint()
            return
        while self._clock.current_time() < self.deadline:
            timer = self._timer = _Timer(self.deadline)
            try:
                await timer.wait()
            finally:
                timer.move(math.inf)  # moved on after it rang: no entry left in the heap
                self._timer = None


def run_loop(
    function: Callable[..., Awaitable[T]], *args: Any, clock: VirtualClock | None, seed: int
) -> T:
    """``anyio.run(function, *args)`` on trio; on ``clock``'s virtual time when one is given."""
    with _collecting_less_often():
        if clock is None:
            return anyio.run(function, *args, backend="trio")
        with _seeded_scheduling(seed):
            return anyio.run(
                function,
                *args,
                backend="trio",
                backend_options={"clock": clock.loop_clock},
            )


SIMULATION_GC_THRESHOLD: Final = 10_000
"""Allocations between two collections of the youngest generation while a simulation runs."""

_collecting = 0  # runs in progress that changed the collector, over all threads
_collector_before: tuple[tuple[int, ...], bool] = ((), False)  # its threshold; whether we froze


@contextmanager
def _collecting_less_often() -> Iterator[None]:
    """The collector as a serving broker has it (``emubroker.__main__``), for the run's time.

    Every message allocates tracked objects in client, broker and loadgen alike (commands,
    tuples, records, coroutines), so Python's default (a collection of the youngest generation
    every 700 allocations) walked the survivors ~150 times in five simulated seconds of 1,000
    msg/s, ~8 % of the run's CPU; the garbage is acyclic and freed by reference counting either
    way. What exists when the first run starts (imports, the scenario) is frozen, so that full
    collections do not walk it again. The process's settings are restored when the last run
    in progress ends (runs may overlap in threads).
    """
    global _collecting, _collector_before
    with _lock:
        if _collecting == 0:
            froze = gc.get_freeze_count() == 0
            _collector_before = (gc.get_threshold(), froze)
            if froze:
                gc.freeze()
            gc.set_threshold(SIMULATION_GC_THRESHOLD, *gc.get_threshold()[1:])
        _collecting += 1
    try:
        yield
    finally:
        with _lock:
            _collecting -= 1
            if _collecting == 0:
                threshold, froze = _collector_before
                gc.set_threshold(*threshold)
                if froze:
                    gc.unfreeze()


if TYPE_CHECKING:
    # Static proof that VirtualClock satisfies Clock (checked by mypy, free at runtime).
    _virtual_clock: Clock = VirtualClock()
