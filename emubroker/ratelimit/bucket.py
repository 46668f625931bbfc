"""The two rate-limiter primitives Pulsar's dispatch throttling is built on, as pure state machines.

Both take ``now`` (monotonic seconds, e.g. ``Clock.now()``) as an argument and hold no clock, task
or lock (DESIGN.md "Time is a dependency", layer 1). Internally time is kept in integer
nanoseconds, like the Java originals, so period boundaries are exact: ``round(now * 1e9)``.

``ClassicRateLimiter`` -- ``org.apache.pulsar.common.util.RateLimiter`` (spec §1.4)
    ``permits`` per ``rate_period``; a renewal task, created lazily by the first ``try_acquire``
    (or re-created by ``set_rate``), runs at a fixed rate every period. Instead of a task we count
    the renewal instants ``anchor + k * period`` (k >= 1) that are ``<= now`` whenever the limiter
    is touched, and apply that many renewals at once. A renewal at instant T therefore happens
    before any call made at ``now >= T`` (in Pulsar the scheduler and the dispatcher race at T).
    Dispatch mode (``isDispatchOrPrecisePublishRateLimiter``) always adds the acquired amount, so
    over-consumption is carried into later periods: limit 10, 30 acquired -> available 0 after the
    first renewal, 0 after the second, 10 after the third.

``AsyncTokenBucket`` -- ``org.apache.pulsar.broker.qos.AsyncTokenBucket`` (spec §1.5)
    ``FinalRateTokenBucket`` and ``DynamicRateTokenBucket`` mirror ``FinalRateAsyncTokenBucket``
    and ``DynamicRateAsyncTokenBucket``. Consumption is only recorded (``pendingConsumed``); any
    read of the balance first tries to add tokens, which happens only once strictly more than the
    minimum increment has elapsed since the last refill that was observed. Because the dispatch
    limiter sets the resolution to the rate period, a retry exactly one period after a refill sees
    no new tokens (``now > last + period`` is false); Pulsar's real clock always moves a little
    past it. Python integers do not overflow where Java's ``durationNanos * rate`` could (rates
    above ~1e9/s after a ~9 s idle stretch); we compute the mathematically exact value.
    ``calculateThrottlingDuration`` is used by publish throttling only and is not reproduced.
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = [
    "AsyncTokenBucket",
    "ClassicRateLimiter",
    "DynamicRateTokenBucket",
    "FinalRateTokenBucket",
    "to_nanos",
]

NANOS_PER_SECOND = 1_000_000_000

# AsyncTokenBucket.DEFAULT_ADD_TOKENS_RESOLUTION_NANOS (spec §7): 16 ms. The dispatch limiter
# overrides it with the rate period (spec §1.5, PR #24012).
DEFAULT_RESOLUTION_NANOS = 16_000_000


def to_nanos(seconds: float) -> int:
    """Convert monotonic seconds to integer nanoseconds (nearest), the limiters' internal unit."""
    return round(seconds * NANOS_PER_SECOND)


class ClassicRateLimiter:
    """Pulsar's period-based ``common.util.RateLimiter``, driven by explicit ``now`` values.

    Args:
        permits: Permits released per period (``> 0``).
        rate_period: Period length in seconds (``> 0``).
        dispatch_mode: ``isDispatchOrPrecisePublishRateLimiter``: acquisitions always succeed in
            adding to ``acquired`` and over-consumption carries over. Off: an acquisition that
            would exceed the permits fails without side effect and renewals reset to zero.
        permit_updater: Called at every renewal; a result ``> 0`` replaces ``permits``
            (relative-to-publish-rate dispatch limits, spec §1.1).

    Raises:
        ValueError: ``permits <= 0`` or ``rate_period <= 0`` (Pulsar's ``checkArgument``).
    """

    __slots__ = (
        "_acquired",
        "_anchor_ns",
        "_dispatch_mode",
        "_next_renewal_ns",
        "_period_ns",
        "_permit_updater",
        "_permits",
        "_renewals",
    )

    def __init__(
        self,
        permits: int,
        rate_period: float,
        *,
        dispatch_mode: bool = True,
        permit_updater: Callable[[], int] | None = None,
    ) -> None:
        self._check(permits, rate_period)
        self._permits = permits
        self._period_ns = to_nanos(rate_period)
        self._dispatch_mode = dispatch_mode
        self._permit_updater = permit_updater
        self._acquired = 0
        # The renewal task does not exist until the first try_acquire (lazy start in Java).
        self._anchor_ns: int | None = None
        self._renewals = 0
        # Hot-path shortcut: nothing to renew before this instant (infinite until started).
        self._next_renewal_ns: float = math.inf

    @staticmethod
    def _check(permits: int, rate_period: float) -> None:
        if permits <= 0:
            raise ValueError(f"rate must be > 0, got {permits}")
        if not rate_period > 0:
            raise ValueError(f"renew permit time must be > 0, got {rate_period}")

    @property
    def rate(self) -> int:
        """The permits released per period (``getRate``)."""
        return self._permits

    @property
    def rate_period(self) -> float:
        """The period in seconds."""
        return self._period_ns / NANOS_PER_SECOND

    @property
    def acquired(self) -> int:
        """Permits acquired and not yet renewed away (may exceed ``rate`` in dispatch mode)."""
        return self._acquired

    @property
    def started(self) -> bool:
        """Whether the renewal schedule is running."""
        return self._anchor_ns is not None

    def renewals(self, now: float) -> int:
        """Renewals run since the schedule (re)started; the current period's index."""
        self._catch_up(to_nanos(now))
        return self._renewals

    def next_renewal(self) -> float | None:
        """The instant of the next renewal in seconds, or None before the schedule starts."""
        if self._anchor_ns is None:
            return None
        return (self._anchor_ns + (self._renewals + 1) * self._period_ns) / NANOS_PER_SECOND

    def available(self, now: float) -> int:
        """``getAvailablePermits``: ``max(0, permits - acquired)``; does not start the schedule."""
        return self.available_ns(to_nanos(now))

    def available_ns(self, now_ns: int) -> int:
        """:meth:`available` at ``now_ns`` nanoseconds (the hot path's form)."""
        if now_ns >= self._next_renewal_ns:
            self._catch_up(now_ns)
        available = self._permits - self._acquired
        return available if available > 0 else 0

    def try_acquire(self, permits: int, now: float) -> bool:
        """``tryAcquire(n)``: take ``permits``; starts the renewal schedule on first use.

        Returns:
            Dispatch mode: whether permits remain after adding (the amount is added regardless).
            Otherwise: whether the acquisition fit and was taken.
        """
        return self.try_acquire_ns(permits, to_nanos(now))

    def try_acquire_ns(self, permits: int, now_ns: int) -> bool:
        """:meth:`try_acquire` at ``now_ns`` nanoseconds."""
        if now_ns >= self._next_renewal_ns:
            self._catch_up(now_ns)
        if self._anchor_ns is None:
            self._anchor_ns = now_ns
            self._renewals = 0
            self._next_renewal_ns = now_ns + self._period_ns
        if self._dispatch_mode:
            self._acquired += permits
            return permits < 0 or self._acquired < self._permits
        if permits + self._acquired > self._permits:
            return False
        can_acquire = permits < 0 or self._acquired < self._permits
        if can_acquire:
            self._acquired += permits
        return can_acquire

    def set_rate(
        self,
        permits: int,
        rate_period: float,
        now: float,
        permit_updater: Callable[[], int] | None = None,
    ) -> None:
        """``setRate(permits, rateTime, unit, updater)``: new rate, schedule restarted at ``now``.

        ``acquired`` is kept, so a debt carried over survives a live rate change.

        Raises:
            ValueError: Non-positive permits or period (Java would fail to schedule the task).
        """
        self._check(permits, rate_period)
        now_ns = to_nanos(now)
        self._catch_up(now_ns)
        self._permits = permits
        self._period_ns = to_nanos(rate_period)
        self._permit_updater = permit_updater
        # Java cancels the task and always creates a new one, first run one period from now.
        self._anchor_ns = now_ns
        self._renewals = 0
        self._next_renewal_ns = now_ns + self._period_ns

    def _catch_up(self, now_ns: int) -> None:
        """Apply every renewal whose instant is ``<= now_ns`` (Java's periodic ``renew()``)."""
        if now_ns < self._next_renewal_ns:
            return
        anchor = self._anchor_ns
        assert anchor is not None  # _next_renewal_ns is finite only once started
        due = (now_ns - anchor) // self._period_ns - self._renewals
        self._renewals += due
        self._next_renewal_ns = anchor + (self._renewals + 1) * self._period_ns
        if not self._dispatch_mode:
            self._acquired = 0
            if self._permit_updater is not None:
                self._apply_updater()
            return
        # The first renewal uses the current permits; the updater then reads the same inputs for
        # every missed renewal (they are evaluated now), so later ones use its value.
        self._acquired = max(0, self._acquired - self._permits)
        if self._permit_updater is not None:
            self._apply_updater()
        if due > 1:
            self._acquired = max(0, self._acquired - (due - 1) * self._permits)

    def _apply_updater(self) -> None:
        assert self._permit_updater is not None
        new_rate = self._permit_updater()
        if new_rate > 0:
            # renew() calls the one-argument setRate, which does not restart the schedule.
            self._permits = new_rate


class AsyncTokenBucket:
    """The shared algorithm of Pulsar's ``AsyncTokenBucket`` (subclasses fix rate and capacity).

    The first balance evaluation happens in the constructor (as in Java), stamping the refill
    time at ``now`` and adding nothing.
    """

    __slots__ = (
        "_last_ns",
        "_pending",
        "_quiet_until_ns",
        "_remainder_ns",
        "_resolution_ns",
        "_tokens",
    )

    # Whether rate and period are fixed, so the next possible refill instant can be cached.
    _final_rate = False

    def __init__(self, initial_tokens: int, resolution_ns: int, now: float) -> None:
        self._tokens = initial_tokens
        self._resolution_ns = resolution_ns
        self._pending = 0
        self._remainder_ns = 0
        self._last_ns: int | None = None  # Long.MIN_VALUE in Java: "never evaluated"
        # Hot-path shortcut: no refill can happen at or before this instant.
        self._quiet_until_ns: float = -math.inf
        self.tokens(now)

    def rate(self) -> int:
        """Tokens added per rate period."""
        raise NotImplementedError

    def rate_period_ns(self) -> int:
        """The rate period in nanoseconds."""
        raise NotImplementedError

    def capacity(self) -> int:
        """The most tokens the bucket holds after a refill."""
        raise NotImplementedError

    def nanos_for_one_token(self) -> int:
        """Nanoseconds it takes to earn one token (integer division, as in Java)."""
        return self.rate_period_ns() // self.rate()

    @property
    def resolution_ns(self) -> int:
        """``addTokensResolutionNanos``."""
        return self._resolution_ns

    @property
    def last_refill_ns(self) -> int | None:
        """When tokens were last added (or the bucket first evaluated), in nanoseconds."""
        return self._last_ns

    def consume(self, tokens: int) -> None:
        """``consumeTokens``: record consumption only; it is netted at the next refill.

        Raises:
            ValueError: ``tokens`` is negative.
        """
        if tokens < 0:
            raise ValueError("consumeTokens must be >= 0")
        self._pending += tokens

    def tokens(self, now: float) -> int:
        """``getTokens``: refill if due, then the balance (may be negative)."""
        return self.tokens_ns(to_nanos(now))

    def tokens_ns(self, now_ns: int) -> int:
        """:meth:`tokens` at ``now_ns`` nanoseconds (the hot path's form)."""
        if now_ns <= self._quiet_until_ns:
            return self._tokens - self._pending
        return self._update(now_ns, 0)

    def consume_and_check(self, tokens: int, now: float) -> bool:
        """``consumeTokensAndCheckIfContainsTokens``: consume, then whether the balance is > 0.

        Raises:
            ValueError: ``tokens`` is negative.
        """
        if tokens < 0:
            raise ValueError("consumeTokens must be >= 0")
        return self._update(to_nanos(now), tokens) > 0

    def contains_tokens(self, now: float) -> bool:
        """``containsTokens``: whether the balance is > 0 after a possible refill."""
        return self._update(to_nanos(now), 0) > 0

    def _update(self, now_ns: int, consume: int) -> int:
        """``consumeTokensAndMaybeUpdateTokensBalance``."""
        if now_ns <= self._quiet_until_ns:
            if consume > 0:
                self._pending += consume
            return self._tokens - self._pending
        new_tokens = self._new_tokens(now_ns)
        if new_tokens > 0:
            pending, self._pending = self._pending, 0
            delta = new_tokens - pending
            if delta != 0 or consume != 0:
                # Consumption since the last refill is netted before the capacity cap; the amount
                # consumed by this very call after it.
                self._tokens = min(self._tokens + delta, self.capacity()) - consume
            return self._tokens - self._pending
        if consume > 0:
            self._pending += consume
        return self._tokens - self._pending

    def _new_tokens(self, now_ns: int) -> int:
        """``calculateNewTokensSinceLastUpdate`` (remainder nanoseconds carried forward)."""
        previous = self._last_ns
        one_token = self.nanos_for_one_token()
        if one_token > self._resolution_ns:
            # Only move lastNanos when at least one whole token would be added.
            minimum_increment = one_token - self._remainder_ns - 1
        else:
            minimum_increment = self._resolution_ns
        if previous is None:
            self._last_ns = now_ns
            self._cache_quiet_period()
            return 0
        if not now_ns > previous + minimum_increment:
            return 0
        self._last_ns = now_ns
        duration = now_ns - previous + self._remainder_ns
        self._remainder_ns = 0
        rate = self.rate()
        period = self.rate_period_ns()
        new_tokens = duration * rate // period
        remainder = duration - new_tokens * period // rate
        if remainder > 0:
            self._remainder_ns += remainder
        self._cache_quiet_period()
        return new_tokens

    def _cache_quiet_period(self) -> None:
        """Remember until when no refill is possible (fixed-rate buckets only).

        The minimum increment depends only on rate, period and the remainder, which change only
        at a refill, so it can be computed once per refill instead of once per read.
        """
        if not self._final_rate or self._last_ns is None:
            return
        one_token = self.nanos_for_one_token()
        if one_token > self._resolution_ns:
            self._quiet_until_ns = self._last_ns + one_token - self._remainder_ns - 1
        else:
            self._quiet_until_ns = self._last_ns + self._resolution_ns


class FinalRateTokenBucket(AsyncTokenBucket):
    """``FinalRateAsyncTokenBucket``: fixed rate and capacity.

    Args:
        rate: Tokens per period (``> 0``).
        rate_period_ns: Period in nanoseconds.
        now: Creation time (seconds); the refill clock starts here.
        capacity: Defaults to ``rate``.
        initial_tokens: Defaults to ``rate`` (a full bucket).
        resolution_ns: ``addTokensResolutionNanos``.

    Raises:
        ValueError: Non-positive rate or period.
    """

    __slots__ = ("_capacity", "_period_ns", "_rate")

    _final_rate = True

    def __init__(
        self,
        rate: int,
        rate_period_ns: int,
        now: float,
        *,
        capacity: int | None = None,
        initial_tokens: int | None = None,
        resolution_ns: int = DEFAULT_RESOLUTION_NANOS,
    ) -> None:
        if rate <= 0 or rate_period_ns <= 0:
            raise ValueError(f"rate and period must be > 0, got {rate} per {rate_period_ns} ns")
        self._rate = rate
        self._period_ns = rate_period_ns
        self._capacity = rate if capacity is None else capacity
        super().__init__(rate if initial_tokens is None else initial_tokens, resolution_ns, now)

    def rate(self) -> int:
        return self._rate

    def rate_period_ns(self) -> int:
        return self._period_ns

    def capacity(self) -> int:
        return self._capacity


class DynamicRateTokenBucket(AsyncTokenBucket):
    """``DynamicRateAsyncTokenBucket``: the rate is a function evaluated on every access.

    Capacity is ``rate * capacity_factor`` and the initial balance ``rate * initial_fill_factor``
    (truncated), both taken from the rate function at the time they are needed.

    Args:
        rate_function: Current tokens per period; must stay ``> 0``.
        rate_period_ns: Period in nanoseconds.
        now: Creation time (seconds).
        capacity_factor: Capacity as a multiple of the current rate.
        initial_fill_factor: Initial balance as a multiple of the rate at creation.
        resolution_ns: ``addTokensResolutionNanos``.
    """

    __slots__ = ("_capacity_factor", "_period_ns", "_rate_function")

    def __init__(
        self,
        rate_function: Callable[[], int],
        rate_period_ns: int,
        now: float,
        *,
        capacity_factor: float = 1.0,
        initial_fill_factor: float = 1.0,
        resolution_ns: int = DEFAULT_RESOLUTION_NANOS,
    ) -> None:
        self._rate_function = rate_function
        self._period_ns = rate_period_ns
        self._capacity_factor = capacity_factor
        super().__init__(int(rate_function() * initial_fill_factor), resolution_ns, now)

    def rate(self) -> int:
        return self._rate_function()

    def rate_period_ns(self) -> int:
        return self._period_ns

    def capacity(self) -> int:
        if self._capacity_factor == 1.0:
            return self.rate()
        return int(self.rate() * self._capacity_factor)
