"""Upper bounds on a scenario's message sizes and rates: what a run can carry out.

A scenario that asks for more than loadgen or the brokers can do would start a cluster and
fail minutes later (a 100 GB payload is a `MemoryError` in the producer), or run and measure
the schedule instead of the broker. `limit_problems` names each value over its bound, up front.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from protocol.framing import DEFAULT_MAX_MESSAGE_SIZE

if TYPE_CHECKING:
    from loadgen.scenario_model import ProducerGroup, Scenario

__all__ = ["MAX_CHUNKED_SIZE", "MAX_PRODUCER_RATE", "limit_problems", "max_message_size"]

MAX_CHUNKED_SIZE: Final = 64 * 1024 * 1024
"""Bytes of one chunked message. Pulsar's clients keep a producer's pending messages within a
memory limit of 64 MiB by default (``memoryLimitBytes``) and a consumer reassembles a chunked
message whole, so a larger message is more than a client with default settings can carry."""

MAX_PRODUCER_RATE: Final = 1_000_000.0
"""msg/s of one producer: ten times what one loadgen producer delivers batched on loopback
(docs/performance.md, loadgen's ceiling). Above it, the intended send times run ahead of any
client at once and the latencies measure the schedule, not the broker; rate 0 asks for as fast
as possible."""


def max_message_size(scenario: Scenario) -> int:
    """The brokers' ``maxMessageSize``: the started cluster's setting, else Pulsar's 5 MiB."""
    start = scenario.cluster.start
    configured = start.config.get("maxMessageSize") if start is not None else None
    if isinstance(configured, int) and not isinstance(configured, bool) and configured > 0:
        return configured
    return DEFAULT_MAX_MESSAGE_SIZE


def limit_problems(scenario: Scenario) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Each size or rate above its bound, as (path in the scenario, message)."""
    broker_limit = max_message_size(scenario)
    for index, group in enumerate(scenario.producers):
        if group.chunking and group.size > MAX_CHUNKED_SIZE:
            yield (
                ("producers", index, "size"),
                f"size {group.size} is above {MAX_CHUNKED_SIZE} bytes, the most a chunked "
                "message may have (the clients' default memory limit)",
            )
        elif not group.chunking and group.size > broker_limit:
            yield (
                ("producers", index, "size"),
                f"size {group.size} is above {broker_limit} bytes, the brokers' maxMessageSize "
                f"(set chunking = true for messages up to {MAX_CHUNKED_SIZE} bytes)",
            )
        yield from _rate_problems(("producers", index, "rate"), group.rate, group)
    groups = {group.name: group for group in scenario.producers}
    for index, phase in enumerate(scenario.phases):
        for name, rate in phase.rates.items():
            known = groups.get(name)
            if known is None:
                continue  # `check` names the unknown group
            values = (rate,) if isinstance(rate, int | float) else (rate.from_, rate.to)
            for value in values:
                yield from _rate_problems(("phases", index, "rates", name), value, known)


def _rate_problems(
    path: tuple[str | int, ...], rate: float, group: ProducerGroup
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    if not math.isfinite(rate):
        yield path, f"rate {rate} is not a number of messages per second (0: as fast as possible)"
        return
    bound = MAX_PRODUCER_RATE * max(group.count, 1)
    if rate > bound:
        producers = "1 producer" if group.count == 1 else f"{group.count} producers"
        yield (
            path,
            f"rate {rate:g} msg/s is above {bound:,.0f} for {producers} "
            f"({MAX_PRODUCER_RATE:,.0f} msg/s each, more than loadgen can send; 0: as fast as "
            "possible)",
        )
