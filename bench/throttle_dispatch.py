"""Dispatch throughput of a real TopicService with throttling off, on but not binding, and traced.

Usage: python bench/throttle_dispatch.py [--messages N] [--batch N] [--repeat N]

One persistent topic, one Exclusive subscription whose consumer has permits for everything, and a
fake consumer sink that only counts. Entries are published in runs of ``--batch`` through the
publish hot path (``Topic.publish_many_nowait``), which runs the dispatch round inline, so the
time per message is the broker's publish + dispatch cost without any network. Cases:

- ``no throttling``: the topic service has no ``DispatchThrottling`` (the plain path);
- ``throttling, no limit``: wired, but no rate configured (the dispatcher's inactive check);
- ``broker+topic+sub limits, not binding``: all three levels at 10^9 msg/s and 2^50 B/s, with
  each implementation (every read is planned and charged);
- ``... + dispatch trace``: the same with the Parquet dispatch trace on (rows buffered, row groups
  written in a worker thread).

Prints microseconds per message (best of ``--repeat``); asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from emubroker.naming import NamespaceName, TopicName
from emubroker.ratelimit.quotas import (
    ASYNC_TOKEN_BUCKET_FACTORY,
    CLASSIC_FACTORY,
    DispatchThrottlingConfig,
)
from emubroker.storage import MemoryBackend
from emubroker.topics import (
    ProducerRequest,
    SubscribeRequest,
    TopicService,
    TopicSettings,
    entry_info_from_metadata,
)
from emubroker.topics.throttling import DispatchThrottling
from emubroker.topics.trace_sink import DispatchTraceSink
from protocol.clock import AnyioClock
from protocol.codec import encode_record
from protocol.commands import MessageMetadata, SubType
from protocol.framing import build_entry, checksum
from storage_stub.ledger import LedgerStore

NAMESPACES = {NamespaceName("public", "default")}
HIGH = {"InMsg": 1_000_000_000, "InByte": 1 << 50}


class CountingSink:
    writable = True

    def __init__(self) -> None:
        self.count = 0

    def send_message(self, *args: Any) -> None:
        self.count += 1

    def send_messages(self, *args: Any) -> int:
        sections = args[-1]
        self.count += len(sections)
        return len(sections)

    def close_consumer(self, consumer_id: int) -> None:
        pass

    def active_consumer_change(self, consumer_id: int, is_active: bool) -> None:
        pass


class NullProducerSink:
    def close_producer(self, producer_id: int) -> None:
        pass


def entries(n: int) -> list[tuple[bytes, int, Any]]:
    out = []
    for i in range(n):
        meta = encode_record(MessageMetadata(producer_name="p", sequence_id=i, publish_time=1))
        entry = build_entry(meta, b"x" * 100)
        out.append((entry, checksum(entry), entry_info_from_metadata(meta, size=len(entry))))
    return out


async def run_case(messages: int, batch: int, config: dict[str, Any] | None, trace: bool) -> float:
    clock = AnyioClock()
    with tempfile.TemporaryDirectory() as tmp:
        sink_trace = (
            DispatchTraceSink(tmp, broker_id="bench", flush_every=65_536) if trace else None
        )
        throttling = (
            None
            if config is None
            else DispatchThrottling(
                DispatchThrottlingConfig(**config), clock=clock, trace=sink_trace
            )
        )
        service = TopicService(
            config=TopicSettings(max_unacked_messages_per_consumer=0),
            clock=clock,
            ledgers=MemoryBackend(LedgerStore()),
            namespaces=NAMESPACES.__contains__,
            throttling=throttling,
        )
        data = entries(batch)
        async with anyio.create_task_group() as tg:
            if sink_trace is not None:
                await tg.start(sink_trace.run)
            async with service.running():
                topic: Any = await service.get_topic(
                    TopicName.parse("persistent://public/default/b")
                )
                producer = await topic.add_producer(
                    ProducerRequest(producer_id=1, producer_name="p"), NullProducerSink()
                )
                sink = CountingSink()
                consumer = await topic.subscribe(
                    SubscribeRequest(
                        subscription="s",
                        sub_type=SubType.EXCLUSIVE,
                        consumer_id=1,
                        consumer_name="c",
                    ),
                    sink,
                )
                consumer.flow(messages * 2)
                start = time.perf_counter()
                for _ in range(messages // batch):
                    topic.publish_many_nowait(producer, data)
                elapsed = time.perf_counter() - start
                assert sink.count == messages // batch * batch, sink.count
            tg.cancel_scope.cancel()
    return elapsed / messages * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=100, help="entries per publish run")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    def limits(factory: str) -> dict[str, Any]:
        config: dict[str, Any] = {"dispatchRateLimiterFactoryClassName": factory}
        for level in ("", "PerTopic", "PerSubscription"):
            for unit, value in HIGH.items():
                config[f"dispatchThrottlingRate{level}{unit}"] = value
        return config

    cases: list[tuple[str, dict[str, Any] | None, bool]] = [
        ("no throttling", None, False),
        ("throttling, no limit", {}, False),
        ("3 levels not binding, token bucket", limits(ASYNC_TOKEN_BUCKET_FACTORY), False),
        ("3 levels not binding, classic", limits(CLASSIC_FACTORY), False),
        ("3 levels not binding + trace", limits(ASYNC_TOKEN_BUCKET_FACTORY), True),
        ("no throttling (again: warm-up check)", None, False),
    ]
    print(f"{args.messages} messages, publish runs of {args.batch} entries, best of {args.repeat}")
    for name, config, trace in cases:
        best = min(
            anyio.run(run_case, args.messages, args.batch, config, trace)
            for _ in range(args.repeat)
        )
        print(f"{name:40s} {best:7.2f} us/msg")


if __name__ == "__main__":
    main()
