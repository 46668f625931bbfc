"""Read sizing and the ThrottleChain seam, period by period, for both limiter implementations.

The simulations below play a dispatcher against an endless backlog: at each period it re-plans
and reads until throttled (or out of consumer permits), exactly as Pulsar's readMoreEntries loop
does, and they count what was delivered per period. Polls are 1.0000001 s apart: one classic
renewal and one token-bucket refill of exactly ``rate`` tokens per period (the bucket refills only
*strictly* after a period, and earns elapsed x rate, so the tiny excess rounds away).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from emubroker.ratelimit.limiter import LimiterLevel, create_dispatch_rate_limiter
from emubroker.ratelimit.quotas import (
    ASYNC_TOKEN_BUCKET_FACTORY,
    CLASSIC_FACTORY,
    DispatchRate,
    DispatchThrottlingConfig,
    throttling_config_from,
)
from emubroker.ratelimit.readsize import (
    NOT_CONSULTED,
    LedgerSize,
    MessagesPerEntryAverage,
    ReadBatchSize,
    ReadPlan,
    ThrottleChain,
    ThrottleStats,
    cap_entries_by_average,
    entries_for_permits,
    estimate_entry_count_by_bytes,
    multiple_consumers_permits,
    single_consumer_permits,
)

STEP = 1.000_000_1
FACTORIES = pytest.mark.parametrize(
    "factory", [CLASSIC_FACTORY, ASYNC_TOKEN_BUCKET_FACTORY], ids=["classic", "token-bucket"]
)
B, T, S = LimiterLevel.BROKER, LimiterLevel.TOPIC, LimiterLevel.SUBSCRIPTION


@dataclass
class Backlog:
    """An endless (or finite) backlog of equal entries in one ledger."""

    msgs_per_entry: int
    entry_size: int = 100
    entries: int = 1_000_000
    position: int = 0


def simulate(
    chain: ThrottleChain,
    backlog: Backlog,
    *,
    periods: int,
    receiver_queue: int = 1000,
    avg: MessagesPerEntryAverage | None = None,
    step: float = STEP,
    size_estimator: str = "ledger",
) -> list[int]:
    """Messages delivered per period; the consumer refills its queue (FLOW) at each period."""
    avg = avg or MessagesPerEntryAverage()
    delivered = []
    for k in range(periods):
        now = k * step
        permits, total = receiver_queue, 0
        while backlog.position < backlog.entries:

            def size_cap(entries: int, size: int) -> int:
                if size_estimator == "average":
                    return cap_entries_by_average(entries, size, backlog.entry_size)
                ledger = LedgerSize(1, backlog.entries, backlog.entries * backlog.entry_size)
                return estimate_entry_count_by_bytes(entries, size, (1, backlog.position), [ledger])

            plan = chain.plan_read(
                permits, now=now, avg_msgs_per_entry=avg.rounded(), size_cap=size_cap
            )
            if plan.max_entries == 0:  # throttled, or no permits until the next FLOW
                break
            entries = min(plan.max_entries, backlog.entries - backlog.position)
            backlog.position += entries
            messages = entries * backlog.msgs_per_entry
            chain.charge(entries, messages, entries * backlog.entry_size, now=now)
            avg.update(messages, entries)
            permits -= messages
            total += messages
        delivered.append(total)
    return delivered


def sub_chain(
    factory: str, rate: DispatchRate, now: float = 0.0, **config: object
) -> ThrottleChain:
    settings = throttling_config_from({"dispatchRateLimiterFactoryClassName": factory, **config})
    limiter = create_dispatch_rate_limiter(factory, S, rate, now)
    return ThrottleChain(settings, subscription=limiter)


class TestModesOnBatchedEntries:
    """Limit 10 msg/s, 6 messages per entry (the documentation's example, spec §1.2-§1.3)."""

    @FACTORIES
    def test_normal_mode_reads_ten_entries_then_pays_back_for_five_periods(
        self, factory: str
    ) -> None:
        # Message tokens cap an *entry* count: 10 entries = 60 messages, charged 60 -> the
        # 50-message debt empties the next five periods. The average still comes out at 10/s.
        chain = sub_chain(factory, DispatchRate(10))
        delivered = simulate(chain, Backlog(msgs_per_entry=6), periods=12)
        assert delivered == [60, 0, 0, 0, 0, 0, 60, 0, 0, 0, 0, 0]

    @FACTORIES
    def test_precise_mode_does_not_help_when_the_consumer_queue_is_large(
        self, factory: str
    ) -> None:
        # ceil(1000 / 6) = 167 entries, capped by the read batch (100), then by 10 tokens.
        chain = sub_chain(factory, DispatchRate(10), preciseDispatcherFlowControl=True)
        delivered = simulate(chain, Backlog(msgs_per_entry=6), periods=12)
        assert delivered == [60, 0, 0, 0, 0, 0, 60, 0, 0, 0, 0, 0]

    @FACTORIES
    def test_precise_mode_reads_two_entries_when_permits_bind(self, factory: str) -> None:
        # Receiver queue 10 and a warmed-up average of 6: ceil(10 / 6) = 2 entries = 12
        # messages per period, overshooting by 2 each time until the debt empties period 5.
        avg = MessagesPerEntryAverage()
        avg.update(6, 1)
        chain = sub_chain(factory, DispatchRate(10), preciseDispatcherFlowControl=True)
        delivered = simulate(
            chain, Backlog(msgs_per_entry=6), periods=12, receiver_queue=10, avg=avg
        )
        assert delivered == [12, 12, 12, 12, 12, 0, 12, 12, 12, 12, 12, 0]

    @FACTORIES
    def test_normal_mode_with_small_queue_still_reads_ten_entries(self, factory: str) -> None:
        avg = MessagesPerEntryAverage()
        avg.update(6, 1)
        chain = sub_chain(factory, DispatchRate(10))
        delivered = simulate(
            chain, Backlog(msgs_per_entry=6), periods=12, receiver_queue=10, avg=avg
        )
        assert delivered == [60, 0, 0, 0, 0, 0, 60, 0, 0, 0, 0, 0]

    @FACTORIES
    def test_batch_entry_charging_delivers_six_times_the_limit(self, factory: str) -> None:
        # dispatchThrottlingOnBatchMessageEnabled charges 10 entries for 60 messages: no debt.
        chain = sub_chain(factory, DispatchRate(10), dispatchThrottlingOnBatchMessageEnabled=True)
        delivered = simulate(chain, Backlog(msgs_per_entry=6), periods=6)
        assert delivered == [60] * 6

    @FACTORIES
    @pytest.mark.parametrize(("batch_flag", "expected"), [(True, [500, 500]), (False, [500, 0])])
    def test_rate_limiting_with_batch_msg_enabled(
        self, factory: str, batch_flag: bool, expected: list[int]
    ) -> None:
        # MessageDispatchThrottlingTest.testRateLimitingWithBatchMsgEnabled: 5 msg per 360 s,
        # batches of 100: with the flag, 5 entries (500 messages) go per period.
        chain = sub_chain(
            factory,
            DispatchRate(5, -1, False, 360),
            dispatchThrottlingOnBatchMessageEnabled=batch_flag,
        )
        backlog = Backlog(msgs_per_entry=100, entries=10)
        assert simulate(chain, backlog, periods=2, step=360.001) == expected


class TestByteLimits:
    @FACTORIES
    @pytest.mark.parametrize("estimator", ["ledger", "average"])
    def test_byte_budget_becomes_an_entry_cap_and_carries_over(
        self, factory: str, estimator: str
    ) -> None:
        # 1000 B/s, 300 B entries. Period 0: 1000 B -> 2 entries (per-ledger estimate with the
        # 64 B overhead: 1000 // 364) or 3 (average: 1000 // 300); the remainder buys one more
        # entry each time (a cap is at least 1) until the balance goes negative: 1200 B, then
        # the 200 B debt: 900, 900, then 1200 again. The average is 1000 B/s.
        chain = sub_chain(factory, DispatchRate(-1, 1000))
        backlog = Backlog(msgs_per_entry=1, entry_size=300)
        delivered = simulate(chain, backlog, periods=6, size_estimator=estimator)
        assert [m * 300 for m in delivered] == [1200, 900, 900, 1200, 900, 900]

    def test_plan_caps_bytes_by_every_level(self) -> None:
        config = DispatchThrottlingConfig()
        chain = ThrottleChain(
            config,
            broker=create_dispatch_rate_limiter(CLASSIC_FACTORY, B, DispatchRate(-1, 9000), 0.0),
            topic=create_dispatch_rate_limiter(CLASSIC_FACTORY, T, DispatchRate(-1, 4000), 0.0),
            subscription=create_dispatch_rate_limiter(
                CLASSIC_FACTORY, S, DispatchRate(-1, 6000), 0.0
            ),
        )
        plan = chain.plan_read(1000, now=0.0)
        assert plan == ReadPlan(max_entries=100, max_bytes=4000)
        assert chain.available_byte == [9000, 4000, 6000]


class TestThrottleGate:
    def chain(self, **config: object) -> ThrottleChain:
        settings = throttling_config_from(config)
        return ThrottleChain(
            settings,
            broker=create_dispatch_rate_limiter(
                ASYNC_TOKEN_BUCKET_FACTORY, B, DispatchRate(100), 0.0
            ),
            topic=create_dispatch_rate_limiter(
                ASYNC_TOKEN_BUCKET_FACTORY, T, DispatchRate(20), 0.0
            ),
            subscription=create_dispatch_rate_limiter(
                ASYNC_TOKEN_BUCKET_FACTORY, S, DispatchRate(50), 0.0
            ),
        )

    def test_levels_combine_with_logical_and(self) -> None:
        chain = self.chain()
        plan = chain.plan_read(1000, now=0.0)
        assert plan == ReadPlan(max_entries=20, max_bytes=5 * 1024 * 1024)
        assert chain.available_msg == [100, 20, 50]

    def test_every_present_limiter_is_charged_after_the_send(self) -> None:
        chain = self.chain()
        chain.charge(3, 18, 1800, now=0.0)
        assert chain.charged_msg == [18, 18, 18]
        assert chain.charged_byte == [-1, -1, -1]  # no byte limits configured
        chain.plan_read(1000, now=0.0)
        assert chain.available_msg == [82, 2, 32]

    def test_exhausted_level_stops_the_read_and_later_levels_are_not_consulted(self) -> None:
        chain = self.chain()
        chain.charge(20, 20, 0, now=0.0)
        plan = chain.plan_read(1000, now=0.25)
        assert plan == ReadPlan(0, 0, backoff_until=1.25, throttled_by=T)
        assert chain.available_msg == [80, 0, NOT_CONSULTED]

    def test_broker_exhausted_first(self) -> None:
        chain = self.chain()
        chain.charge(100, 100, 0, now=0.0)
        plan = chain.plan_read(1000, now=0.0)
        assert plan.throttled_by is B
        assert chain.available_msg == [0, NOT_CONSULTED, NOT_CONSULTED]

    def test_throttle_events_count_each_level_that_lowered_the_read(self) -> None:
        chain = self.chain()
        chain.plan_read(1000, now=0.0)  # broker 100 >= 100 entries: no event; topic 20: event
        chain.plan_read(10, now=0.0)  # 10 entries: no level lowers it
        assert chain.stats() == ThrottleStats(0, 0, 1, 0, 0, 0)

    def test_non_backlog_consumers_are_exempt_when_disabled(self) -> None:
        chain = self.chain(dispatchThrottlingOnNonBacklogConsumerEnabled=False)
        chain.charge(50, 50, 0, now=0.0, cursor_active=True)  # tail reader: not charged
        assert chain.charged_msg == [-1, -1, -1]
        plan = chain.plan_read(1000, now=0.0, cursor_active=True)
        assert plan.max_entries == 100
        assert chain.available_msg == [NOT_CONSULTED] * 3
        assert chain.plan_read(1000, now=0.0, cursor_active=False).max_entries == 20

    def test_filtered_entries_are_charged_only_when_enabled(self) -> None:
        off = self.chain()
        off.charge_filtered(5, 5, 0, now=0.0)
        assert off.plan_read(1000, now=0.0).max_entries == 20
        on = self.chain(dispatchThrottlingForFilteredEntriesEnabled=True)
        on.charge_filtered(5, 5, 0, now=0.0)
        assert on.plan_read(1000, now=0.0).max_entries == 15

    def test_no_permits_means_no_read_and_no_timer(self) -> None:
        assert self.chain().plan_read(0, now=0.0) == ReadPlan(0, 0, None, None)

    @FACTORIES
    def test_concurrent_replay_and_normal_reads_over_deliver(self, factory: str) -> None:
        # The documented interleaving: both reads get their quota before either is charged.
        chain = sub_chain(factory, DispatchRate(10))
        replay = chain.plan_read(1000, now=0.0)
        normal = chain.plan_read(1000, now=0.0)
        assert replay.max_entries == normal.max_entries == 10
        chain.charge(10, 10, 0, now=0.0)
        chain.charge(10, 10, 0, now=0.0)
        # 20 delivered against a limit of 10: the next period pays the 10 back.
        assert chain.plan_read(1000, now=STEP).backoff_until is not None
        assert chain.plan_read(1000, now=2 * STEP).max_entries == 10

    def test_without_limiters_only_permits_and_batch_size_count(self) -> None:
        chain = ThrottleChain(DispatchThrottlingConfig())
        assert chain.plan_read(37, now=0.0) == ReadPlan(37, 5 * 1024 * 1024)
        chain.read_batch.on_read_failure()
        assert chain.plan_read(37, now=0.0).max_entries == 1

    def test_size_cap_is_clamped_to_one_and_to_entries(self) -> None:
        chain = ThrottleChain(DispatchThrottlingConfig())
        assert chain.plan_read(50, now=0.0, size_cap=lambda e, b: 0).max_entries == 1
        assert chain.plan_read(50, now=0.0, size_cap=lambda e, b: 500).max_entries == 50

    def test_set_limiter_installs_a_level_lazily(self) -> None:
        chain = ThrottleChain(DispatchThrottlingConfig())
        assert chain.limiter(T) is None
        limiter = create_dispatch_rate_limiter(CLASSIC_FACTORY, T, DispatchRate(5), 0.0)
        chain.set_limiter(T, limiter)
        assert chain.limiter(T) is limiter
        assert chain.plan_read(100, now=0.0).max_entries == 5
        assert chain.period_indexes(0.0) == (-1, 0, -1)


class TestReadSizing:
    def test_permits_of_each_dispatcher_kind(self) -> None:
        assert single_consumer_permits(500, writable=True) == 500
        assert single_consumer_permits(500, writable=False) == 1
        assert multiple_consumers_permits(300, 100) == 300
        assert multiple_consumers_permits(50, 80) == 80
        assert multiple_consumers_permits(0, 80) == 0
        assert multiple_consumers_permits(80, 0) == 0

    @pytest.mark.parametrize(
        ("permits", "batch", "precise", "avg", "expected"),
        [
            (1000, 100, False, 6, 100),
            (40, 100, False, 6, 40),
            (40, 100, True, 6, 7),  # ceil(40 / 6)
            (1000, 100, True, 6, 100),
            (10, 100, True, 0, 10),  # no average yet: max(1, 0)
            (10, 4, True, 1, 4),
        ],
    )
    def test_entries_for_permits(
        self, permits: int, batch: int, precise: bool, avg: int, expected: int
    ) -> None:
        assert (
            entries_for_permits(permits, batch, precise=precise, avg_msgs_per_entry=avg) == expected
        )

    def test_read_batch_size_drops_on_failure_and_doubles_back(self) -> None:
        size = ReadBatchSize(100, 1)
        assert size.value == 100
        size.on_read_failure()
        sizes = []
        for _ in range(8):
            sizes.append(size.value)
            size.on_read_success()
        assert sizes == [1, 2, 4, 8, 16, 32, 64, 100]

    def test_messages_per_entry_average_matches_java_doubles(self) -> None:
        avg = MessagesPerEntryAverage()
        assert avg.rounded() == 0
        avg.update(0, 0)  # nothing sent: ignored
        avg.update(5, 2)
        assert avg.value == 2.5
        assert avg.rounded() == 3  # Math.round rounds half up (Python's round() would say 2)
        avg.update(100, 1)
        assert avg.value == 2.5 * 0.9 + (1 - 0.9) * 100 / 1
        assert avg.value != 2.25 + 10.0  # (1 - 0.9) is not 0.1 in doubles: bit-exact matters
        assert avg.rounded() == 12

    def test_average_restarts_from_the_next_sample_while_below_one(self) -> None:
        avg = MessagesPerEntryAverage()
        avg.update(0, 3)
        assert avg.value == 0.0
        avg.update(8, 2)
        assert avg.value == 4.0


class TestEntryCountEstimator:
    L1 = LedgerSize(1, 10, 1000)  # 100 B entries: average 100 + 64 = 164
    L2 = LedgerSize(2, 10, 1000)

    def test_non_positive_budget_reads_one_entry(self) -> None:
        assert estimate_entry_count_by_bytes(100, 0, (1, 0), [self.L1]) == 1
        assert estimate_entry_count_by_bytes(100, -5, (1, 0), [self.L1]) == 1

    def test_whole_ledgers_are_consumed_while_the_budget_covers_them(self) -> None:
        assert estimate_entry_count_by_bytes(100, 3280, (1, 0), [self.L1, self.L2]) == 20

    def test_partial_ledger_uses_its_average(self) -> None:
        # L1 whole (1640), 360 left: 360 // 164 = 2 entries of L2.
        assert estimate_entry_count_by_bytes(100, 2000, (1, 0), [self.L1, self.L2]) == 12

    def test_leftover_after_the_last_ledger_divides_by_the_last_average(self) -> None:
        assert estimate_entry_count_by_bytes(1000, 10_000, (1, 0), [self.L1, self.L2]) == 20 + 40

    def test_read_inside_a_ledger_counts_only_the_rest_of_it(self) -> None:
        # 5 entries left in L1 (budget takes all 5 = 820), then L2 whole (1640).
        assert estimate_entry_count_by_bytes(100, 2460, (1, 5), [self.L1, self.L2]) == 15

    def test_result_is_clamped_to_max_entries(self) -> None:
        assert estimate_entry_count_by_bytes(7, 10_000, (1, 0), [self.L1, self.L2]) == 7

    def test_latest_position_maps_to_the_last_entry(self) -> None:
        # Moved to (2, 9): one entry left (164 B), then the 336 B left over still buys
        # 336 // 164 = 2 more at the last average, as in Java: 3.
        assert estimate_entry_count_by_bytes(100, 500, (9, 0), [self.L1, self.L2]) == 3
        # Before the first ledger: moved to (1, 0), a plain start.
        assert estimate_entry_count_by_bytes(100, 3280, (0, 0), [self.L1, self.L2]) == 20

    def test_empty_ledgers_borrow_the_previous_average(self) -> None:
        empty = LedgerSize(3, 0, 0)
        assert estimate_entry_count_by_bytes(100, 1640, (3, 0), [self.L1, empty]) == 10

    def test_single_average_variant(self) -> None:
        assert cap_entries_by_average(100, 1000, 300.0) == 3
        assert cap_entries_by_average(100, 100, 300.0) == 1
        assert cap_entries_by_average(2, 1000, 300.0) == 2
        assert cap_entries_by_average(100, 1000, math.nan) == 1
