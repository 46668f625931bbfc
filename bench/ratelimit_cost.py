"""What dispatch throttling costs per dispatch, and what a dispatch-trace record costs.

Usage: python bench/ratelimit_cost.py [--dispatches N] [--records N]

Part 1 times one dispatcher round trip as the broker does it (``plan_read`` before the read,
``charge`` after the send) with: no chain at all (the bare ``min(permits, batch)``), a chain with
no limiters, and a chain with broker + topic + subscription limiters of each implementation. The
limits are set high enough never to bind, so every round trip does the full work. Time advances
by 1 ms per dispatch, so the classic limiter renews and the token bucket refills as they would.

Part 2 times the trace: building a row (``dispatch_row``, the hot path) or a record struct
(``dispatch_record``) from the chain, appending (column lists only), and appending including the
amortised Parquet writes. The on-disk size is for identical rows, so it is a lower bound.
Prints nanoseconds per operation; asserts nothing. Numbers move between runs on a shared machine:
compare rows of one run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from emubroker.ratelimit.limiter import LimiterLevel, create_dispatch_rate_limiter
from emubroker.ratelimit.quotas import (
    ASYNC_TOKEN_BUCKET_FACTORY,
    CLASSIC_FACTORY,
    DispatchRate,
    DispatchThrottlingConfig,
    throttling_config_from,
)
from emubroker.ratelimit.readsize import ThrottleChain
from emubroker.ratelimit.trace import DispatchTraceWriter, dispatch_record, dispatch_row

NOT_BINDING = DispatchRate(1_000_000_000, 1 << 50)


def three_level_chain(factory: str) -> ThrottleChain:
    config = throttling_config_from({"dispatchRateLimiterFactoryClassName": factory})
    levels = (LimiterLevel.BROKER, LimiterLevel.TOPIC, LimiterLevel.SUBSCRIPTION)
    broker, topic, subscription = (
        create_dispatch_rate_limiter(factory, level, NOT_BINDING, 0.0) for level in levels
    )
    return ThrottleChain(config, broker=broker, topic=topic, subscription=subscription)


def time_per_op(fn: Callable[[int], None], n: int) -> float:
    fn(min(n, 10_000))  # warm up
    start = time.perf_counter()
    fn(n)
    return (time.perf_counter() - start) / n * 1e9


def dispatch_loop(chain: ThrottleChain | None) -> Callable[[int], None]:
    def run(n: int) -> None:
        now = 0.0
        for _ in range(n):
            now += 0.001
            if chain is None:
                entries = min(1000, 100)
            else:
                plan = chain.plan_read(1000, now=now)
                entries = plan.max_entries
                chain.charge(entries, entries, entries * 100, now=now)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dispatches", type=int, default=200_000)
    parser.add_argument("--records", type=int, default=200_000)
    args = parser.parse_args()

    print(f"dispatch round trip (plan_read + charge), {args.dispatches} dispatches, ns/dispatch")
    rows = [
        ("no chain (bare min(permits, batch))", None),
        ("chain, no limiters", ThrottleChain(DispatchThrottlingConfig())),
        ("chain, 3 levels, classic", three_level_chain(CLASSIC_FACTORY)),
        ("chain, 3 levels, token bucket", three_level_chain(ASYNC_TOKEN_BUCKET_FACTORY)),
    ]
    for label, chain in rows:
        print(f"  {label:<40} {time_per_op(dispatch_loop(chain), args.dispatches):8.0f}")

    chain = three_level_chain(ASYNC_TOKEN_BUCKET_FACTORY)
    chain.plan_read(1000, now=0.0)
    chain.charge(100, 600, 60_000, now=0.0)

    def build(make: Callable[..., object]) -> Callable[[int], None]:
        def run(n: int) -> None:
            for i in range(n):
                make(
                    chain,
                    now=i * 0.001,
                    wall_ns=i,
                    broker="broker-1:8080",
                    topic="persistent://public/default/t",
                    subscription="sub",
                    consumer="c",
                    consumer_id=1,
                    entries=100,
                    messages=600,
                    size=60_000,
                )

        return run

    row = dispatch_row(chain, now=0.0, wall_ns=0, broker="b", topic="t", subscription="s")
    record = dispatch_record(chain, now=0.0, wall_ns=0, broker="b", topic="t", subscription="s")
    print(f"\ndispatch trace, {args.records} records, ns/record")
    for label, make in (
        ("dispatch_row", dispatch_row),
        ("dispatch_record (Struct)", dispatch_record),
    ):
        print(f"  {'build ' + label:<40} {time_per_op(build(make), args.records):8.0f}")
    with tempfile.TemporaryDirectory() as directory:
        writer = DispatchTraceWriter(directory, auto_flush=False)

        def append_only(n: int) -> None:
            for _ in range(n):
                writer.append_row(row)
            writer.detach()  # drop the columns: this row measures the append alone

        def append_record_only(n: int) -> None:
            for _ in range(n):
                writer.append(record)
            writer.detach()

        cost = time_per_op(append_only, args.records)
        print(f"  {'append_row (column lists only)':<40} {cost:8.0f}")
        cost = time_per_op(append_record_only, args.records)
        print(f"  {'append record (column lists only)':<40} {cost:8.0f}")
        writer.close()

        flushing = DispatchTraceWriter(Path(directory) / "flushing")

        def append_and_write(n: int) -> None:
            for _ in range(n):
                flushing.append_row(row)
            flushing.flush()

        cost = time_per_op(append_and_write, args.records)
        print(f"  {'append_row + Parquet writes (amortised)':<40} {cost:8.0f}")
        flushing.close()
        size = sum(f.stat().st_size for f in flushing.files)
        print(f"  {'bytes on disk per record (zstd)':<40} {size / flushing.records_written:8.1f}")


if __name__ == "__main__":
    main()
