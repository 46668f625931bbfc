"""Small async building blocks of the client: a one-shot future, Clock deadlines, backoff."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, Generic, TypeVar

import anyio
import msgspec

from protocol.clock import Clock
from protocol.errors import OperationTimeoutError

T = TypeVar("T")

_UNSET: Any = object()


class Future(msgspec.Struct, Generic[T], kw_only=True, eq=False):
    """A one-shot result slot that sync code completes and async code awaits.

    The `anyio.Event` is created only when someone actually waits on an unfinished future, so the
    many futures of a pipelined producer that are completed before anyone looks cost a few
    attribute writes each. Completion callbacks run synchronously, in order, inside `set_*`.

    A Struct rather than a class with `__init__` (compared by identity, like any object): a
    producer creates one per message, and a struct is created twice as fast. Its slots are
    keyword-only, so that a subclass's own fields come first in its constructor.
    """

    _value: T = _UNSET
    _error: BaseException | None = None
    _event: anyio.Event | None = None
    _callbacks: list[Callable[[Future[T]], None]] | None = None

    def done(self) -> bool:
        """True once a result or an exception was set."""
        return self._value is not _UNSET or self._error is not None

    def set_result(self, value: T) -> None:
        """Complete with `value`; ignored if already done (a late reply after a timeout)."""
        # `done()` and `_finish()` inline: most futures are completed before anyone waits.
        if self._value is not _UNSET or self._error is not None:
            return
        self._value = value
        if self._event is not None or self._callbacks is not None:
            self._finish()

    def set_exception(self, error: BaseException) -> None:
        """Complete with `error`; ignored if already done."""
        if self._value is not _UNSET or self._error is not None:
            return
        self._error = error
        self._finish()

    def add_done_callback(self, fn: Callable[[Future[T]], None]) -> None:
        """Call `fn(self)` on completion (immediately if already done)."""
        if self.done():
            fn(self)
            return
        if self._callbacks is None:
            self._callbacks = []
        self._callbacks.append(fn)

    def _finish(self) -> None:
        if self._event is not None:
            self._event.set()
        callbacks, self._callbacks = self._callbacks, None
        if callbacks:
            for fn in callbacks:
                fn(self)

    def result(self) -> T:
        """The value, or raise the stored exception.

        Raises:
            RuntimeError: the future is not done yet.
        """
        if self._error is not None:
            raise self._error
        if self._value is _UNSET:
            raise RuntimeError("future is not done")
        return self._value

    def exception(self) -> BaseException | None:
        """The stored exception, if the future failed."""
        return self._error

    async def wait_done(self) -> None:
        """Wait until the future is done, without raising its exception."""
        if self.done():
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()

    async def wait(self) -> T:
        """Wait for the result.

        Raises:
            Exception: whatever the future was failed with.
        """
        await self.wait_done()
        return self.result()

    def __await__(self) -> Generator[Any, None, T]:
        return self.wait().__await__()


class FutureGroup(Generic[T]):
    """One outcome shared by many futures (`GroupMember`s), completed at once.

    The messages of a batch get one receipt: completing their futures one by one, each with its
    own result object, cost more than the rest of the receipt. Here completing a group of any
    size is one write; each member computes its value, `make(index)`, when it is first asked
    for, and only the members someone waits on or added a callback to are woken, in index order
    (as futures completed one by one would run their callbacks).
    """

    __slots__ = ("_error", "_event", "_make", "_watchers")

    def __init__(self) -> None:
        self._make: Callable[[int], T] | None = None
        self._error: BaseException | None = None
        self._event: anyio.Event | None = None
        self._watchers: list[GroupMember[T]] | None = None

    def done(self) -> bool:
        """True once a result or an exception was set."""
        return self._make is not None or self._error is not None

    def set_result(self, make: Callable[[int], T]) -> None:
        """Complete: member `i`'s value is `make(i)`. Ignored if already done."""
        if self.done():
            return
        self._make = make
        self._finish()

    def set_exception(self, error: BaseException) -> None:
        """Fail every member with `error`. Ignored if already done."""
        if self.done():
            return
        self._error = error
        self._finish()

    def _finish(self) -> None:
        if self._event is not None:
            self._event.set()
        watchers, self._watchers = self._watchers, None
        if watchers:
            watchers.sort(key=_member_index)
            for member in watchers:
                if member._group is self:  # not completed on its own, not seen twice
                    member._pull()
                    member._finish()

    async def wait_done(self) -> None:
        """Wait until the group is done, without raising its exception."""
        if self.done():
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()


class GroupMember(Future[T]):
    """Member `index` of a `FutureGroup`: a `Future` whose outcome is the group's.

    Until the group is done (or the member is completed on its own with `set_result` /
    `set_exception`, which leaves the group) the base slots only hold its waiters and callbacks.
    """

    _group: FutureGroup[T] | None  # None once the outcome is in the base slots
    _index: int

    def _pull(self) -> bool:
        """True while the outcome is the group's and it has none; else the base slots hold it."""
        group = self._group
        if group is None:
            return False
        make = group._make
        if make is None and group._error is None:
            return True
        self._group = None
        if make is None:
            self._error = group._error
        else:
            self._value = make(self._index)
        return False

    def _watch(self) -> None:
        assert self._group is not None
        if self._group._watchers is None:
            self._group._watchers = []
        self._group._watchers.append(self)

    def done(self) -> bool:
        group = self._group
        return super().done() if group is None else group.done()

    def set_result(self, value: T) -> None:
        self._pull()
        self._group = None
        super().set_result(value)

    def set_exception(self, error: BaseException) -> None:
        self._pull()
        self._group = None
        super().set_exception(error)

    def add_done_callback(self, fn: Callable[[Future[T]], None]) -> None:
        if self._pull():
            self._watch()
        super().add_done_callback(fn)

    def result(self) -> T:
        self._pull()
        return super().result()

    def exception(self) -> BaseException | None:
        self._pull()
        return super().exception()

    async def wait_done(self) -> None:
        if self._pull():
            self._watch()
        await super().wait_done()


def _member_index(member: GroupMember[Any]) -> int:
    return member._index


async def wait_until(future: Future[T], clock: Clock, deadline: float | None, what: str) -> T:
    """Wait for `future`, failing it with `OperationTimeoutError` at `deadline` on `clock`.

    The timer fails the future itself, so a pending-request table that holds the same future
    sees the timeout too, and a reply that arrives later is ignored.

    Raises:
        OperationTimeoutError: the deadline passed first.
        Exception: whatever the future was failed with.
    """
    if deadline is None or future.done():
        return await future.wait()
    # No timer task per request (a large cluster's clients start with tens of thousands): the
    # waiter sleeps on an alarm set to the deadline, which the future's completion moves to now.
    alarm = clock.alarm()
    alarm.set(deadline)
    future.add_done_callback(lambda _: alarm.set(clock.now()))
    await alarm.wait()
    if not future.done():
        future.set_exception(OperationTimeoutError(f"{what} timed out"))
    return future.result()


async def with_deadline(
    clock: Clock, deadline: float | None, fn: Callable[[], Awaitable[T]], what: str
) -> T:
    """Run `fn()` and return its result, cancelling it at `deadline` on `clock`.

    Exceptions of `fn` propagate unwrapped (a task group would wrap them in an ExceptionGroup).

    Raises:
        OperationTimeoutError: the deadline passed first.
        Exception: whatever `fn` raised.
    """
    if deadline is None:
        return await fn()
    outcome: list[T] = []
    failure: list[Exception] = []

    async def expire() -> None:
        await clock.sleep_until(deadline)
        tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(expire)
        try:
            outcome.append(await fn())
        except Exception as exc:  # re-raised below, outside the task group
            failure.append(exc)
        tg.cancel_scope.cancel()
    if failure:
        raise failure[0]
    if not outcome:
        raise OperationTimeoutError(f"{what} timed out")
    return outcome[0]
