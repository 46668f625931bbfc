"""One dispatcher's throttling: the chain of its limiters and what the dispatcher needs around it.

Spec/pulsar-behaviour.md §1. :class:`SubscriptionThrottle` is what a subscription's dispatcher
consults on every read: its ``ThrottleChain`` over the broker's, its topic's and its own
limiters (broker -> topic -> subscription, §1.2), the precise-mode messages-per-entry average,
the trace hook and the throttle-event counters. Who builds it, which limiters it shares and
where their rates come from is :mod:`emubroker.topics.throttling` (``DispatchThrottling``), its
owner, which it reaches only to be released (``ThrottleOwner``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from emubroker.ratelimit.limiter import DispatchRateLimiter, LimiterLevel
from emubroker.ratelimit.readsize import (
    MessagesPerEntryAverage,
    ReadPlan,
    ThrottleChain,
    ThrottleStats,
    cap_entries_by_average,
)
from emubroker.ratelimit.trace import dispatch_row

if TYPE_CHECKING:
    from protocol.clock import Clock

__all__ = ["SubscriptionThrottle", "ThrottleOwner", "TraceSink"]

_EMPTY_STATS = ThrottleStats(0, 0, 0, 0, 0, 0)


class TraceSink(Protocol):
    """Where dispatch trace rows go (``emubroker.topics.trace_sink.DispatchTraceSink``)."""

    broker_id: str

    def append_row(self, row: tuple[Any, ...]) -> None:
        """Buffer one ``trace.dispatch_row``; must not do I/O."""
        ...


class ThrottleOwner(Protocol):
    """Who hands out subscription throttles (``throttling.DispatchThrottling``)."""

    def release(self, throttle: SubscriptionThrottle) -> None:
        """Forget a subscription's throttle."""
        ...


class SubscriptionThrottle:
    """One dispatcher's throttling: its chain and what the dispatcher needs around it.

    Attributes:
        chain: The ``ThrottleChain`` (replaced when throttling flags change live).
        active: The dispatcher must take the throttled path: a limiter is enabled or tracing on.
        topic: The topic name (for trace rows).
        subscription: The subscription name.
    """

    __slots__ = (
        "_base",
        "_clock",
        "_owner",
        "_precise",
        "_trace",
        "active",
        "avg",
        "chain",
        "limiter",
        "subscription",
        "topic",
    )

    def __init__(
        self,
        owner: ThrottleOwner,
        topic: str,
        subscription: str,
        chain: ThrottleChain,
        *,
        clock: Clock,
        trace: TraceSink | None,
    ) -> None:
        self._owner = owner
        self._clock = clock
        self._trace = trace
        self._base = _EMPTY_STATS
        self._precise = chain.config.preciseDispatcherFlowControl
        self.topic = topic
        self.subscription = subscription
        self.chain = chain
        self.limiter: DispatchRateLimiter | None = chain.limiter(LimiterLevel.SUBSCRIPTION)
        # Pulsar keeps one per consumer and multi-consumer dispatchers use a random consumer's;
        # ours is the subscription's (the same thing for single-active-consumer subscriptions).
        self.avg = MessagesPerEntryAverage()
        self.active = False
        self.refresh()

    def refresh(self) -> None:
        """Recompute :attr:`active` after a limiter appeared, vanished or changed rate."""
        self.active = self._trace is not None or any(
            limiter is not None and limiter.enabled for limiter in self.chain.limiters
        )

    def replace_chain(self, chain: ThrottleChain) -> None:
        """Swap in a chain built with new flags, keeping the event counters and batch size."""
        self._base = _add(self._base, self.chain.stats())
        chain.read_batch.value = min(self.chain.read_batch.value, chain.read_batch.maximum)
        self.chain = chain
        self._precise = chain.config.preciseDispatcherFlowControl
        self.refresh()

    def plan(
        self, permits: int, now: float, *, cursor_active: bool, avg_entry_size: float
    ) -> ReadPlan:
        """``ThrottleChain.plan_read`` with this subscription's average and the size cap.

        Args:
            permits: Consumer permits (§1.2 step 1).
            now: Monotonic time.
            cursor_active: The cursor reads the tail, not backlog.
            avg_entry_size: The managed ledger's average entry size (0: unknown -> no size cap),
                ``applyMaxSizeCap`` as released up to early 2025.
        """
        return self.chain.plan_read(
            permits,
            now=now,
            avg_msgs_per_entry=self.avg.rounded() if self._precise else 1,
            cursor_active=cursor_active,
            size_cap=(lambda e, b: cap_entries_by_average(e, b, avg_entry_size))
            if avg_entry_size > 0
            else None,
        )

    def throttled(self, plan: ReadPlan, now: float, *, cursor_active: bool) -> None:
        """Record a refused read (a ``throttled`` trace row)."""
        trace = self._trace
        if trace is not None:
            trace.append_row(
                dispatch_row(
                    self.chain,
                    now=now,
                    wall_ns=self._clock.wall_ns(),
                    broker=trace.broker_id,
                    topic=self.topic,
                    subscription=self.subscription,
                    cursor_active=cursor_active,
                    throttled_by=plan.throttled_by,
                )
            )

    def sent(
        self,
        entries: int,
        messages: int,
        size: int,
        now: float,
        *,
        cursor_active: bool,
        replay: bool = False,
        consumer: str = "",
        consumer_id: int = -1,
    ) -> None:
        """After a read's entries went out: charge every level, update averages, trace."""
        chain = self.chain
        chain.charge(entries, messages, size, now=now, cursor_active=cursor_active)
        chain.read_batch.on_read_success()
        if self._precise:
            self.avg.update(messages, entries)
        trace = self._trace
        if trace is not None:
            trace.append_row(
                dispatch_row(
                    chain,
                    now=now,
                    wall_ns=self._clock.wall_ns(),
                    broker=trace.broker_id,
                    topic=self.topic,
                    subscription=self.subscription,
                    consumer=consumer,
                    consumer_id=consumer_id,
                    entries=entries,
                    messages=messages,
                    size=size,
                    replay=replay,
                    cursor_active=cursor_active,
                )
            )

    def stats(self) -> ThrottleStats:
        """Throttle events of this subscription since it was opened (``SubscriptionStats``)."""
        return _add(self._base, self.chain.stats())

    def close(self) -> None:
        """The subscription ended or its topic closed: drop it from the broker's view."""
        self._owner.release(self)


def _add(a: ThrottleStats, b: ThrottleStats) -> ThrottleStats:
    return ThrottleStats(
        *(
            x + y
            for x, y in zip(msgspec.structs.astuple(a), msgspec.structs.astuple(b), strict=True)
        )
    )
