"""What the runner and its worker processes say to each other: tagged Structs over `protocol.rpc`.

The runner starts each worker as `python -m loadgen.workers`, writes a `WorkerPlan` and then
commands on its stdin, and reads `Ready`, one `Tick` a second, `ProducersDone` and `Final` from
its stdout (the worker logs to stderr). The plan carries everything a worker needs; nothing is
shared but the run directory, where each worker writes its own trace files.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from loadgen.scenario import Batching, Keys
from loadgen.schedule import Segment

__all__ = [
    "ConsumerPlan",
    "ConsumerTally",
    "Final",
    "Go",
    "GroupTick",
    "Pause",
    "ProducerPlan",
    "ProducerTally",
    "ProducersDone",
    "Ready",
    "Resume",
    "Stop",
    "StopProducers",
    "Tick",
    "ToRunner",
    "ToWorker",
    "WorkerFailed",
    "WorkerPlan",
]


class _Msg(msgspec.Struct, frozen=True, tag_field="kind"):
    pass


class ProducerPlan(msgspec.Struct, frozen=True):
    """One producer: a handler per partition of its topic, one schedule for all of them."""

    group: str
    name: str
    topic: str  # as the scenario names it
    partitions: list[str]  # the topics to attach to (the topic itself when not partitioned)
    partitioned: bool
    first_index: int  # producer index of partitions[0]; partition i gets first_index + i
    segments: list[Segment]  # this producer's share of the group's rates
    seed: int
    size: int
    keys: Keys
    batching: Batching
    max_outstanding: int
    messages: int  # stop after this many; -1: no limit
    poisson: bool
    send_timeout: float
    chunking: bool


class ConsumerPlan(msgspec.Struct, frozen=True):
    """One consumer: a handler per partition, all with the same name."""

    group: str
    name: str
    topic: str
    partitions: list[str]
    partitioned: bool
    subscription: str
    sub_type: str
    receiver_queue: int
    ack_rate: float  # msg/s for this consumer; 0: unpaced
    initial_position: str


class WorkerPlan(_Msg, frozen=True, tag="plan"):
    run_id: str
    worker: int
    service_url: str
    client: Literal["native", "official"]
    trace_dir: str
    trace_sample: float
    producers: list[ProducerPlan]
    consumers: list[ConsumerPlan]
    producer_names: dict[int, str]  # producer index -> name, for every producer of the run
    tick_interval: float = 1.0


class Go(_Msg, frozen=True, tag="go"):
    """Start the schedule; every worker gets the same `start_ns` (wall clock)."""

    start_ns: int


class Pause(_Msg, frozen=True, tag="pause"):
    group: str


class Resume(_Msg, frozen=True, tag="resume"):
    group: str


class StopProducers(_Msg, frozen=True, tag="stop_producers"):
    """Stop sending now (the schedule may not be over: Ctrl-C, or a message limit elsewhere)."""


class Stop(_Msg, frozen=True, tag="stop"):
    """Stop consuming, write the traces and report `Final`."""


ToWorker = WorkerPlan | Go | Pause | Resume | StopProducers | Stop


class Ready(_Msg, frozen=True, tag="ready"):
    worker: int


class GroupTick(msgspec.Struct, frozen=True):
    """One group's second in one worker."""

    role: Literal["produce", "consume"]
    group: str
    messages: int
    payload_bytes: int
    errors: int
    # Latencies (µs) as HdrHistogram buckets: a bucket's lowest value -> count
    # (`loadgen.stats.buckets_of`); None when nothing completed.
    histogram: dict[int, int] | None
    delay_histogram: dict[int, int] | None  # produce: send time minus intended time (OMB's)
    reconnections: int


class Tick(_Msg, frozen=True, tag="tick"):
    worker: int
    second: int  # wall-clock second the counts belong to
    groups: list[GroupTick]


class ProducerTally(msgspec.Struct, frozen=True):
    """What one partition producer sent, for the correctness checks."""

    index: int
    group: str
    topic: str
    sent: int  # sequence ids 0..sent-1 were handed to the client
    acked: bytes  # zlib-compressed bitmap, one byte per sequence id: 1 = receipted
    failed: int


class ConsumerTally(msgspec.Struct, frozen=True):
    """What one consumer group saw in one worker, for the correctness checks."""

    group: str
    subscription: str
    received: dict[int, bytes]  # producer index -> zlib-compressed bitmap of sequence ids seen
    duplicates: int  # deliveries of a sequence id this worker had already seen
    out_of_order: int  # first deliveries that came after a later one (per producer and key)
    foreign: int  # messages without this run's header


class ProducersDone(_Msg, frozen=True, tag="producers_done"):
    worker: int
    acked: dict[str, int]  # group -> receipted messages


class Final(_Msg, frozen=True, tag="final"):
    worker: int
    producers: list[ProducerTally]
    consumers: list[ConsumerTally]
    rows: dict[str, int]  # table -> trace rows written
    first_send_ns: int | None  # this worker's first send (wall clock)
    last_receive_ns: int | None  # this worker's last delivery
    produce_end_ns: int | None = None  # when its producers stopped sending or last got a receipt


class WorkerFailed(_Msg, frozen=True, tag="failed"):
    worker: int
    error: str


ToRunner = Ready | Tick | ProducersDone | Final | WorkerFailed
