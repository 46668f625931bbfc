"""How many entries a dispatcher reads, and the throttling seam it calls (spec §1.2, §1.3).

The dispatcher (``emubroker.topics``) owns one :class:`ThrottleChain` per subscription dispatcher
and calls it twice per round trip; everything here is pure and takes ``now``:

1. ``plan = chain.plan_read(permits, now=..., avg_msgs_per_entry=..., cursor_active=...)``
   computes ``min(permits, readBatchSize)`` entries (or ``ceil(permits / avg)`` in precise mode)
   and the ``dispatcherMaxReadSizeBytes`` budget, then consults the limiters present in the order
   broker -> topic -> subscription: each caps entries by its *message* tokens and bytes by its
   byte tokens. If a cap reaches 0 the read is not issued: ``plan.backoff_until`` is
   ``now + 1.0`` (``MESSAGE_RATE_BACKOFF_MS``) and the later levels are not consulted. Otherwise
   the plan carries ``max_entries`` (>= 1) and ``max_bytes`` (>= 1) for the cursor, which turns
   the byte budget into an entry cap (:func:`estimate_entry_count_by_bytes`, or pass
   ``size_cap``). ``max_entries == 0`` with no backoff means "no permits: wait for a FLOW".
2. ``chain.charge(entries, messages, size, now=..., cursor_active=...)`` after the entries were
   written: every present limiter is charged ``entries`` (``dispatchThrottlingOnBatchMessage
   Enabled``) or ``messages`` tokens, and ``size`` bytes.

Both steps apply only when ``dispatchThrottlingOnNonBacklogConsumerEnabled`` or the cursor is not
active (reading backlog). Nothing reserves tokens between the two steps, so two reads planned
before either is charged (a replay read and a normal read) both see the same tokens: Pulsar's
documented over-delivery, reproduced, not prevented.

Wiring (for the dispatcher's owner): resolve each level's rate with
``quotas.resolve_effective_rates``; build one broker limiter per broker, one per topic and one per
subscription with ``limiter.create_dispatch_rate_limiter`` (the configured factory class name);
give each dispatcher a chain over the shared objects. A live policy or dynamic-config change is
``limiter.update_rate(new_rate, now)`` on the shared object (no reconnect; Pulsar's semantics per
implementation), or ``ThrottleChain.set_limiter`` when a level appears or disappears. Throttle
event counters for topic stats and ``/metrics`` come from ``ThrottleChain.stats()``; per-dispatch
trace rows from ``trace.dispatch_row(chain, ...)`` right after ``charge``.

Virtual time: a token bucket refills only *strictly* more than one period after its previous
refill, and Pulsar retries exactly 1000 ms after a throttled attempt. On a real clock the retry
always lands a little later; on a ``FakeClock`` it lands exactly on the boundary and misses the
refill. Simulations that want real-clock behaviour set ``ThrottleChain.backoff`` slightly above
1.0 (or let sends take virtual time); the default stays Pulsar's constant.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import msgspec

from emubroker.ratelimit.bucket import to_nanos
from emubroker.ratelimit.limiter import DispatchRateLimiter, LimiterLevel
from emubroker.ratelimit.quotas import DispatchThrottlingConfig

if TYPE_CHECKING:
    from protocol.clock import Clock

__all__ = [
    "BOOKKEEPER_READ_OVERHEAD_PER_ENTRY",
    "MESSAGE_RATE_BACKOFF",
    "NOT_CONSULTED",
    "LedgerSize",
    "MessagesPerEntryAverage",
    "ReadBatchSize",
    "ReadPlan",
    "ThrottleChain",
    "ThrottleStats",
    "cap_entries_by_average",
    "entries_for_permits",
    "estimate_entry_count_by_bytes",
    "multiple_consumers_permits",
    "single_consumer_permits",
    "wait_for_read_plan",
]

# PersistentTopic.MESSAGE_RATE_BACKOFF_MS: the read is retried this long after a limiter ran dry.
MESSAGE_RATE_BACKOFF = 1.0
# RangeEntryCacheImpl.BOOKKEEPER_READ_OVERHEAD_PER_ENTRY, added to every estimated entry size.
BOOKKEEPER_READ_OVERHEAD_PER_ENTRY = 64
# Trace value for a level the gate stopped before reaching (-1 already means "unlimited").
NOT_CONSULTED = -2
_LEVELS = (LimiterLevel.BROKER, LimiterLevel.TOPIC, LimiterLevel.SUBSCRIPTION)
_NOT_CONSULTED_3 = (NOT_CONSULTED,) * 3


def single_consumer_permits(available_permits: int, writable: bool) -> int:
    """Permits of a single-active-consumer read: the consumer's, or 1 if it is not writable."""
    return available_permits if writable else 1


def multiple_consumers_permits(total_available: int, first_consumer_available: int) -> int:
    """Permits of a Shared/Key_Shared read; 0 ("pause until a FLOW") unless both are positive."""
    if total_available <= 0 or first_consumer_available <= 0:
        return 0
    return max(total_available, first_consumer_available)


def entries_for_permits(
    permits: int, read_batch_size: int, *, precise: bool, avg_msgs_per_entry: int = 1
) -> int:
    """Entries to ask for before throttling (``calculateToRead``).

    Normal mode: ``min(permits, batch)``; precise mode: ``min(ceil(permits / max(1, avg)), batch)``.
    """
    if precise:
        return min(math.ceil(permits / max(1, avg_msgs_per_entry)), read_batch_size)
    return min(permits, read_batch_size)


class ReadBatchSize:
    """The adaptive read size: starts at max, drops to min on a failed read, doubles on success."""

    __slots__ = ("maximum", "minimum", "value")

    def __init__(self, maximum: int = 100, minimum: int = 1) -> None:
        self.maximum = maximum
        self.minimum = minimum
        self.value = maximum

    def on_read_success(self) -> None:
        self.value = min(self.value * 2, self.maximum)

    def on_read_failure(self) -> None:
        self.value = self.minimum


class MessagesPerEntryAverage:
    """A consumer's ``avgMessagesPerEntry`` (precise flow control): EWMA with weight 0.9."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def update(self, messages: int, entries: int) -> None:
        """Fold in one send (``Consumer.sendMessages``); sends of no entries are ignored."""
        if entries <= 0:
            return
        if self.value < 1:  # no valid sample yet: the first one is taken as is
            self.value = 1.0 * messages / entries
        else:
            # Same operation order as Java, so the doubles match bit for bit.
            self.value = self.value * 0.9 + (1 - 0.9) * messages / entries

    def rounded(self) -> int:
        """``getAvgMessagesPerEntry``: Java's ``Math.round`` (half up)."""
        return math.floor(self.value + 0.5)


class LedgerSize(msgspec.Struct, frozen=True):
    """One ledger's totals, as the managed ledger's ``LedgerInfo`` (or live counters) report."""

    ledger_id: int
    entries: int
    size: int


def estimate_entry_count_by_bytes(
    max_entries: int,
    max_size_bytes: int,
    read_position: tuple[int, int],
    ledgers: Sequence[LedgerSize],
) -> int:
    """``EntryCountEstimator``: entries that fit a byte budget, from per-ledger averages.

    Args:
        max_entries: The entry count to cap.
        max_size_bytes: The byte budget (``<= 0`` -> 1 entry).
        read_position: ``(ledger_id, entry_id)`` the read starts at.
        ledgers: Every ledger of the managed ledger in id order, the current one with its live
            counters.

    Returns:
        A count in ``[1, max_entries]``.
    """
    if max_size_bytes <= 0:
        return 1
    if not ledgers:
        return max(1, max_entries)
    ledger_id, entry_id = read_position
    if ledger_id > ledgers[-1].ledger_id:  # e.g. LATEST: the last entry of the last ledger
        ledger_id, entry_id = ledgers[-1].ledger_id, max(ledgers[-1].entries - 1, 0)
    elif ledger_id < ledgers[0].ledger_id:
        ledger_id, entry_id = ledgers[0].ledger_id, 0
    estimated = 0
    remaining = max_size_bytes
    avg_size = 0
    for ledger in ledgers:
        if ledger.ledger_id < ledger_id:
            continue
        if remaining <= 0 or estimated >= max_entries:
            break
        if ledger.entries == 0 or ledger.size == 0:
            continue
        avg_size = max(1, ledger.size // ledger.entries) + BOOKKEEPER_READ_OVERHEAD_PER_ENTRY
        with_overhead = ledger.size + ledger.entries * BOOKKEEPER_READ_OVERHEAD_PER_ENTRY
        starts_inside = ledger.ledger_id == ledger_id and entry_id > 0
        if remaining < with_overhead or starts_inside:
            count = max(ledger.entries - entry_id, 1) if starts_inside else ledger.entries
            taken = min(max(1, remaining // avg_size), count)
            estimated += taken
            remaining -= taken * avg_size
        else:
            estimated += ledger.entries
            remaining -= with_overhead
    if remaining > 0 and estimated < max_entries:
        if avg_size == 0:  # only empty ledgers from the read position: look further back
            for ledger in reversed(ledgers):
                if ledger.ledger_id < ledger_id and ledger.entries and ledger.size:
                    avg_size = (
                        max(1, ledger.size // ledger.entries) + BOOKKEEPER_READ_OVERHEAD_PER_ENTRY
                    )
                    break
        if avg_size > 0:
            estimated += remaining // avg_size
    return max(min(estimated, max_entries), 1)


def cap_entries_by_average(max_entries: int, max_size_bytes: int, avg_entry_size: float) -> int:
    """``applyMaxSizeCap`` as released up to early 2025: one average for the whole read.

    ``avg_entry_size`` is the managed ledger's recent average, else the cursor's average read
    size; NaN (no data at all) gives 1 entry.
    """
    if not math.isfinite(avg_entry_size) or avg_entry_size <= 0:
        return 1
    return min(max(int(max_size_bytes / avg_entry_size), 1), max_entries)


class ReadPlan(msgspec.Struct, frozen=True, gc=False):
    """What to read next.

    Attributes:
        max_entries: Entries to ask the cursor for; 0 means do not read.
        max_bytes: The byte budget for the cursor's size cap.
        backoff_until: When throttled, the time to try again (no read now); else None.
        throttled_by: The level whose limiter stopped the read, if any.
    """

    max_entries: int
    max_bytes: int
    backoff_until: float | None = None
    throttled_by: LimiterLevel | None = None


class ThrottleStats(msgspec.Struct, frozen=True, gc=False):
    """Throttle events of one dispatcher under ``SubscriptionStats`` names.

    An event is a consult where the level's limiter lowered the entries (``Msg``) or the bytes
    (``Bytes``) to read (``applyDispatchRateLimitsToReadLimits``); exported by Pulsar as
    ``pulsar_subscription_dispatch_throttled_{msg,bytes}_events{reason=<level>}``.
    """

    dispatchThrottledMsgEventsByBrokerLimit: int
    dispatchThrottledBytesEventsByBrokerLimit: int
    dispatchThrottledMsgEventsByTopicLimit: int
    dispatchThrottledBytesEventsByTopicLimit: int
    dispatchThrottledMsgEventsBySubscriptionLimit: int
    dispatchThrottledBytesEventsBySubscriptionLimit: int


class ThrottleChain:
    """One dispatcher's view of the broker, topic and subscription limiters.

    Args:
        config: The broker's throttling settings.
        broker: The broker-wide limiter (shared by all chains), or None.
        topic: The topic's limiter (shared by its subscriptions), or None.
        subscription: This subscription's limiter, or None.
        backoff: Delay before re-planning after a limiter ran dry (Pulsar: exactly 1 s).
    """

    def __init__(
        self,
        config: DispatchThrottlingConfig,
        *,
        broker: DispatchRateLimiter | None = None,
        topic: DispatchRateLimiter | None = None,
        subscription: DispatchRateLimiter | None = None,
        backoff: float = MESSAGE_RATE_BACKOFF,
    ) -> None:
        self.config = config
        self.backoff = backoff
        self.read_batch = ReadBatchSize(
            config.dispatcherMaxReadBatchSize, config.dispatcherMinReadBatchSize
        )
        self._limiters: list[DispatchRateLimiter | None] = [broker, topic, subscription]
        self._precise = config.preciseDispatcherFlowControl
        self._charge_entries = config.dispatchThrottlingOnBatchMessageEnabled
        self._on_tail = config.dispatchThrottlingOnNonBacklogConsumerEnabled
        self._max_bytes = config.dispatcherMaxReadSizeBytes
        # Per level, from the last plan_read / charge: for trace records (see trace.py).
        self.available_msg = [NOT_CONSULTED] * 3
        self.available_byte = [NOT_CONSULTED] * 3
        self.charged_msg = [-1] * 3
        self.charged_byte = [-1] * 3
        self._msg_events = [0, 0, 0]
        self._byte_events = [0, 0, 0]

    @property
    def limiters(self) -> tuple[DispatchRateLimiter | None, ...]:
        """The limiters in consult order: broker, topic, subscription."""
        return tuple(self._limiters)

    def limiter(self, level: LimiterLevel) -> DispatchRateLimiter | None:
        """The limiter consulted at ``level``."""
        return self._limiters[_LEVELS.index(level)]

    def set_limiter(self, level: LimiterLevel, limiter: DispatchRateLimiter | None) -> None:
        """Install (or remove) a level's limiter, e.g. when a policy first enables it."""
        self._limiters[_LEVELS.index(level)] = limiter

    def gate_applies(self, cursor_active: bool) -> bool:
        """Whether limits apply: always by default, else only to consumers reading backlog."""
        return self._on_tail or not cursor_active

    def plan_read(
        self,
        permits: int,
        *,
        now: float,
        avg_msgs_per_entry: int = 1,
        cursor_active: bool = False,
        size_cap: Callable[[int, int], int] | None = None,
    ) -> ReadPlan:
        """Decide the next read (spec §1.2 steps 2-6).

        Args:
            permits: Consumer permits (see ``single_consumer_permits`` and friends).
            now: Current monotonic time.
            avg_msgs_per_entry: The consumer's rounded average, used in precise mode.
            cursor_active: The cursor reads the tail (not backlog).
            size_cap: ``(entries, bytes) -> entries``, the cursor's byte-budget cap; when None,
                ``max_entries`` is not size-capped here.
        """
        if permits <= 0:
            return _NO_READ
        batch = self.read_batch.value
        if self._precise:
            entries = min(math.ceil(permits / max(1, avg_msgs_per_entry)), batch)
        else:
            entries = permits if permits < batch else batch
        size = self._max_bytes
        available_msg = self.available_msg
        available_byte = self.available_byte
        if self._on_tail or not cursor_active:
            now_ns = to_nanos(now)
            index = 0
            for limiter in self._limiters:
                if limiter is None or not limiter.enabled:
                    available_msg[index] = available_byte[index] = -1
                    index += 1
                    continue
                on_msg, on_byte = limiter.available_ns(now_ns)
                available_msg[index] = on_msg
                available_byte[index] = on_byte
                if 0 <= on_msg < entries:
                    entries = on_msg
                    self._msg_events[index] += 1
                if 0 <= on_byte < size:
                    size = on_byte
                    self._byte_events[index] += 1
                if entries == 0 or size == 0:
                    for later in range(index + 1, 3):  # not consulted (spec §1.2 step 4)
                        available_msg[later] = available_byte[later] = NOT_CONSULTED
                    return ReadPlan(0, 0, now + self.backoff, _LEVELS[index])
                index += 1
        else:
            available_msg[:] = available_byte[:] = _NOT_CONSULTED_3
        if entries < 1:
            entries = 1
        if size < 1:
            size = 1
        if size_cap is not None:
            entries = max(1, min(size_cap(entries, size), entries))
        return ReadPlan(entries, size)

    def charge(
        self, entries: int, messages: int, size: int, *, now: float, cursor_active: bool = False
    ) -> None:
        """``acquirePermitsForDeliveredMessages``: charge every present limiter after a send."""
        charged_msg = self.charged_msg
        charged_byte = self.charged_byte
        if not (self._on_tail or not cursor_active):
            for index in range(3):
                charged_msg[index] = charged_byte[index] = -1
            return
        tokens = entries if self._charge_entries else messages
        now_ns = to_nanos(now)
        for index, limiter in enumerate(self._limiters):
            if limiter is None or not limiter.enabled:
                charged_msg[index] = charged_byte[index] = -1
                continue
            limiter.consume_ns(tokens, size, now_ns)
            charged_msg[index] = tokens if limiter.limits_msg else -1
            charged_byte[index] = size if limiter.limits_byte else -1

    def charge_filtered(
        self, entries: int, messages: int, size: int, *, now: float, cursor_active: bool = False
    ) -> None:
        """Charge entries an entry filter removed (``filterEntriesForConsumer``).

        Only when ``dispatchThrottlingForFilteredEntriesEnabled``; otherwise a no-op.
        """
        if self.config.dispatchThrottlingForFilteredEntriesEnabled:
            self.charge(entries, messages, size, now=now, cursor_active=cursor_active)

    def period_indexes(self, now: float) -> tuple[int, int, int]:
        """Each level's current period index (-1 where there is no limiter)."""
        broker, topic, subscription = self._limiters
        return (
            -1 if broker is None else broker.period_index(now),
            -1 if topic is None else topic.period_index(now),
            -1 if subscription is None else subscription.period_index(now),
        )

    def stats(self) -> ThrottleStats:
        """The throttle-event counters so far."""
        msg, byte = self._msg_events, self._byte_events
        return ThrottleStats(msg[0], byte[0], msg[1], byte[1], msg[2], byte[2])


_NO_READ = ReadPlan(0, 0)


async def wait_for_read_plan(
    chain: ThrottleChain,
    clock: Clock,
    permits: int,
    *,
    avg_msgs_per_entry: int = 1,
    cursor_active: bool = False,
    size_cap: Callable[[int, int], int] | None = None,
) -> ReadPlan:
    """Plan a read, sleeping through throttling backoffs on ``clock`` until one may be issued.

    Returns the first plan without a backoff (``max_entries == 0`` when there are no permits).
    """
    while True:
        plan = chain.plan_read(
            permits,
            now=clock.now(),
            avg_msgs_per_entry=avg_msgs_per_entry,
            cursor_active=cursor_active,
            size_cap=size_cap,
        )
        if plan.backoff_until is None:
            return plan
        await clock.sleep_until(plan.backoff_until)
