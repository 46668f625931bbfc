"""A scenario's fields: the frozen Structs a scenario file decodes into.

`loadgen.scenario` reads and checks the files (and re-exports these); the modules that check a
scenario's parts (`loadgen.limits`) read these types from here, below the reader.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from loadgen.durations import Seconds
from loadgen.events import Event

__all__ = [
    "Batching",
    "Cluster",
    "ConsumerGroup",
    "Keys",
    "Phase",
    "ProducerGroup",
    "Ramp",
    "Scenario",
    "Start",
    "Topic",
]


class _Strict(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class Ramp(_Strict, frozen=True):
    """A rate that changes linearly over a phase, msg/s."""

    from_: float = msgspec.field(name="from")
    to: float


class Keys(_Strict, frozen=True):
    """How message keys are chosen.

    `none`: no key; `round_robin`: `k-0`, `k-1`, ... in turn; `random`: uniform over `count`
    keys; `zipf`: key `k-i` with probability proportional to `1 / (i + 1) ** s`.
    """

    distribution: Literal["none", "round_robin", "random", "zipf"] = "none"
    count: int = 100
    s: float = 1.1


class Batching(_Strict, frozen=True):
    enabled: bool = True
    max_delay_ms: float = 1.0
    max_messages: int = 1000
    max_bytes: int = 128 * 1024


class ProducerGroup(_Strict, frozen=True):
    """`count` producers on `topic`, sending `rate` msg/s between them (0: as fast as possible)."""

    name: str
    topic: str
    count: int = 1
    rate: float = 0.0
    size: int = 1024
    keys: Keys = Keys()
    batching: Batching = Batching()
    max_outstanding: int = 1000
    messages: int = 0  # stop after this many in total (0: no limit)
    arrivals: Literal["uniform", "poisson"] = "uniform"
    send_timeout: Seconds = Seconds(30)
    chunking: bool = False


class ConsumerGroup(_Strict, frozen=True):
    """`count` consumers of `subscription` on `topic`."""

    name: str
    topic: str
    subscription: str
    type: Literal["Exclusive", "Shared", "Failover", "Key_Shared"] = "Exclusive"
    count: int = 1
    receiver_queue: int = 1000
    ack_rate: float = 0.0  # msg/s for the group; 0: as fast as it can
    initial_position: Literal["latest", "earliest"] = "earliest"


class Topic(_Strict, frozen=True):
    name: str
    partitions: int = 0  # > 0 creates a partitioned topic


class Phase(_Strict, frozen=True):
    """A stretch of the run; `rates` overrides groups' rates (a number or a ramp)."""

    name: str
    duration: Seconds
    rates: dict[str, float | Ramp] = {}


class Start(_Strict, frozen=True):
    """A cluster loadgen starts for the run and stops at its end."""

    brokers: int = 1
    storage: Literal["memory", "durable", "stub"] = "memory"
    config: dict[str, str | int | float | bool] = {}


class Cluster(_Strict, frozen=True):
    service_url: str | None = None
    admin_url: str | None = None
    start: Start | None = None


class Scenario(_Strict, frozen=True):
    name: str
    description: str = ""
    seed: int = 0
    cluster: Cluster = Cluster()
    topics: list[Topic] = []
    producers: list[ProducerGroup] = []
    consumers: list[ConsumerGroup] = []
    phases: list[Phase] = []
    events: list[Event] = []
    warmup: Seconds = Seconds(0)  # seconds left out of the final statistics
    drain_timeout: Seconds = Seconds(10)  # how long consumers may catch up after the last send
    # `emubroker simulate` reads this table (the virtual-time run of the same scenario);
    # `loadgen run` ignores it, so one file serves both.
    simulate: dict[str, Any] = {}

    @property
    def duration(self) -> float:
        return sum(phase.duration for phase in self.phases)
