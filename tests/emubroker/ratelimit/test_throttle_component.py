"""A dispatcher loop driven through ``wait_for_read_plan`` on a FakeClock (asyncio and trio).

The loop reads whatever the plan allows from an endless backlog, "sends" it (optionally taking
``send_time`` of virtual time, like a real socket write) and charges the chain, then plans again,
sleeping through 1000 ms backoffs. Every delivery is logged as ``(time, messages)``.
"""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from emubroker.ratelimit.limiter import (
    DispatchRateLimiter,
    LimiterLevel,
    create_dispatch_rate_limiter,
)
from emubroker.ratelimit.quotas import (
    ASYNC_TOKEN_BUCKET_FACTORY,
    CLASSIC_FACTORY,
    DispatchRate,
    throttling_config_from,
)
from emubroker.ratelimit.readsize import ThrottleChain, wait_for_read_plan
from protocol.clock import FakeClock

pytestmark = pytest.mark.anyio

SUB = LimiterLevel.SUBSCRIPTION


async def dispatcher(
    chain: ThrottleChain,
    clock: FakeClock,
    log: list[tuple[float, int]],
    *,
    msgs_per_entry: int = 1,
    send_time: float = 0.0,
) -> None:
    while True:
        plan = await wait_for_read_plan(chain, clock, 1000)
        entries = plan.max_entries
        messages = entries * msgs_per_entry
        chain.charge(entries, messages, entries * 100, now=clock.now())
        log.append((round(clock.now(), 6), messages))
        if send_time:
            await clock.sleep(send_time)
        else:
            await anyio.lowlevel.checkpoint()


def chain_for(factory: str, limiter: DispatchRateLimiter) -> ThrottleChain:
    config = throttling_config_from({"dispatchRateLimiterFactoryClassName": factory})
    return ThrottleChain(config, subscription=limiter)


async def run(
    clock: FakeClock,
    chain: ThrottleChain,
    seconds: float,
    *,
    msgs_per_entry: int = 1,
    send_time: float = 0.0,
) -> list[tuple[float, int]]:
    log: list[tuple[float, int]] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: dispatcher(
                chain, clock, log, msgs_per_entry=msgs_per_entry, send_time=send_time
            )
        )
        await clock.advance(seconds)
        tg.cancel_scope.cancel()
    return log


async def test_classic_renews_on_schedule_in_virtual_time(fake_clock: FakeClock) -> None:
    limiter = create_dispatch_rate_limiter(CLASSIC_FACTORY, SUB, DispatchRate(10), 0.0)
    log = await run(fake_clock, chain_for(CLASSIC_FACTORY, limiter), 10.0)
    assert log == [(float(t), 10) for t in range(11)]


async def test_token_bucket_needs_strictly_more_than_a_period(fake_clock: FakeClock) -> None:
    # With zero send time the retry lands exactly one period after the refill: not strictly
    # more, so no tokens until the next retry. Exact virtual time halves the rate; see below.
    limiter = create_dispatch_rate_limiter(ASYNC_TOKEN_BUCKET_FACTORY, SUB, DispatchRate(10), 0.0)
    log = await run(fake_clock, chain_for(ASYNC_TOKEN_BUCKET_FACTORY, limiter), 10.0)
    assert log == [(float(t), 10) for t in range(0, 11, 2)]


async def test_token_bucket_with_send_latency_refills_every_period(fake_clock: FakeClock) -> None:
    limiter = create_dispatch_rate_limiter(ASYNC_TOKEN_BUCKET_FACTORY, SUB, DispatchRate(10), 0.0)
    chain = chain_for(ASYNC_TOKEN_BUCKET_FACTORY, limiter)
    log = await run(fake_clock, chain, 10.0, send_time=0.001)
    assert log == [(round(k * 1.001, 6), 10) for k in range(10)]
    assert sum(messages for _, messages in log) == 100


@pytest.mark.parametrize(
    "factory", [CLASSIC_FACTORY, ASYNC_TOKEN_BUCKET_FACTORY], ids=["classic", "token-bucket"]
)
async def test_batched_entries_carry_over_in_virtual_time(
    fake_clock: FakeClock, factory: str
) -> None:
    # 10 msg/s, 6 messages per entry: 60 at once, then five silent periods. A backoff of
    # 1.001 s stands for the executor firing a little after its 1000 ms, as it does in Pulsar.
    limiter = create_dispatch_rate_limiter(factory, SUB, DispatchRate(10), 0.0)
    chain = chain_for(factory, limiter)
    chain.backoff = 1.001
    log = await run(fake_clock, chain, 13.0, msgs_per_entry=6, send_time=0.001)
    assert [messages for _, messages in log] == [60, 60, 60]
    times = [t for t, _ in log]
    assert times[0] == 0.0
    assert 6.0 < times[1] < 6.01
    assert 12.0 < times[2] < 12.02
    # Every retry in between was refused by the subscription limit and counted.
    assert chain.stats().dispatchThrottledMsgEventsBySubscriptionLimit >= 13


async def test_exact_backoffs_slow_the_token_bucket_refills(fake_clock: FakeClock) -> None:
    # With exactly 1.000 s between throttled retries, the retry right after a refill is not
    # strictly more than a period later, so refills happen every other retry (1.001, 3.001,
    # 5.001, 7.001). Each earns elapsed x rate = 20 tokens, so the debt is repaid as fast, but
    # the last refill is capped at 10 and lands a second late: 7.001 instead of ~6. (Real
    # clocks always overshoot the backoff; see the test above.)
    limiter = create_dispatch_rate_limiter(ASYNC_TOKEN_BUCKET_FACTORY, SUB, DispatchRate(10), 0.0)
    chain = chain_for(ASYNC_TOKEN_BUCKET_FACTORY, limiter)
    log = await run(fake_clock, chain, 13.0, msgs_per_entry=6, send_time=0.001)
    assert log == [(0.0, 60), (7.001, 60)]


async def test_live_rate_change_classic_keeps_debt(fake_clock: FakeClock) -> None:
    limiter = create_dispatch_rate_limiter(CLASSIC_FACTORY, SUB, DispatchRate(10), 0.0)
    chain = chain_for(CLASSIC_FACTORY, limiter)
    log: list[tuple[float, int]] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(dispatcher, chain, fake_clock, log)
        await fake_clock.advance(3.5)
        limiter.update_rate(DispatchRate(20), now=fake_clock.now())
        await fake_clock.advance(3.0)
        tg.cancel_scope.cancel()
    # At 3.5 the 10 taken at 3.0 still count against the new 20: only 10 at 4.0; the renewal
    # schedule restarted at 3.5, so 4.5 clears it and 20 flow from 5.0 on.
    assert log == [(0.0, 10), (1.0, 10), (2.0, 10), (3.0, 10), (4.0, 10), (5.0, 20), (6.0, 20)]


async def test_live_rate_change_token_bucket_refills_immediately(fake_clock: FakeClock) -> None:
    limiter = create_dispatch_rate_limiter(ASYNC_TOKEN_BUCKET_FACTORY, SUB, DispatchRate(10), 0.0)
    chain = chain_for(ASYNC_TOKEN_BUCKET_FACTORY, limiter)
    log: list[tuple[float, int]] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: dispatcher(chain, fake_clock, log, send_time=0.001))
        await fake_clock.advance(3.5)
        limiter.update_rate(DispatchRate(20), now=fake_clock.now())
        await fake_clock.advance(3.0)
        tg.cancel_scope.cancel()
    assert log == [
        (0.0, 10),
        (1.001, 10),
        (2.002, 10),
        (3.003, 10),
        (4.004, 20),  # the new, full bucket built at 3.5
        (5.005, 20),
        (6.006, 20),
    ]


async def test_wait_returns_at_once_without_permits(fake_clock: FakeClock) -> None:
    limiter = create_dispatch_rate_limiter(CLASSIC_FACTORY, SUB, DispatchRate(10), 0.0)
    limiter.consume(100, 0, now=0.0)
    plan = await wait_for_read_plan(chain_for(CLASSIC_FACTORY, limiter), fake_clock, 0)
    assert plan.max_entries == 0
    assert fake_clock.now() == 0.0


async def test_wait_sleeps_through_backoffs_on_the_clock(fake_clock: FakeClock) -> None:
    limiter = create_dispatch_rate_limiter(CLASSIC_FACTORY, SUB, DispatchRate(10), 0.0)
    limiter.consume(30, 0, now=0.0)
    chain = chain_for(CLASSIC_FACTORY, limiter)
    result = []

    async def waiter() -> None:
        result.append(await wait_for_read_plan(chain, fake_clock, 1000))

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await fake_clock.advance(2.5)
        assert result == []
        assert fake_clock.statistics().next_deadline == 3.0
        await fake_clock.advance(0.5)
    assert result[0].max_entries == 10
    assert fake_clock.now() == 3.0
