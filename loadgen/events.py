"""The timed events a scenario can fire, as one tagged union on the `action` field.

Each event is a frozen Struct; the runner dispatches on its type with `match`
(`loadgen.runner`), and every action goes through `loadgen.control.ClusterControl`, so the
events are the same whatever runs the cluster.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec

from loadgen.durations import Seconds

__all__ = [
    "CLUSTER_START_ACTIONS",
    "STUB",
    "STUB_ACTIONS",
    "Event",
    "KillBroker",
    "PauseConsumers",
    "RestartBroker",
    "ResumeConsumers",
    "SetDispatchRate",
    "SetDynamicConfig",
    "SplitBundle",
    "StubClear",
    "StubFailNext",
    "StubFaults",
    "StubStall",
    "UnloadBundle",
    "UnloadNamespace",
    "UnloadTopic",
]


class _Event(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="action", forbid_unknown_fields=True
):
    at: Seconds  # seconds after the run's start


class UnloadTopic(_Event, frozen=True, tag="unload_topic"):
    """`PUT /admin/v2/persistent/{topic}/unload` (every partition of a partitioned topic)."""

    topic: str


class UnloadNamespace(_Event, frozen=True, tag="unload_namespace"):
    """`PUT /admin/v2/namespaces/{tenant}/{namespace}/unload`."""

    namespace: str


class UnloadBundle(_Event, frozen=True, tag="unload_bundle"):
    """`PUT /admin/v2/namespaces/{tenant}/{namespace}/{bundle}/unload`."""

    namespace: str
    bundle: str  # "0x00000000_0x40000000"
    destination_broker: str | None = None


class SplitBundle(_Event, frozen=True, tag="split_bundle"):
    """`PUT /admin/v2/namespaces/{tenant}/{namespace}/{bundle}/split`."""

    namespace: str
    bundle: str
    algorithm: Literal[
        "range_equally_divide",
        "topic_count_equally_divide",
        "specified_positions_divide",
        "flow_or_qps_equally_divide",
    ] = "range_equally_divide"
    unload: bool = False
    boundaries: list[int] | None = None


STUB: Final = "stub"
"""The `broker` of a kill or restart event that targets the storage-stub process."""


class KillBroker(_Event, frozen=True, tag="kill_broker"):
    """Kill one broker process that loadgen started (`start = {...}`).

    `broker = "stub"` kills the storage-stub process of its `emubroker cluster` instead.
    """

    broker: int | Literal["stub"] = 0
    signal: Literal["KILL", "TERM"] = "KILL"


class RestartBroker(_Event, frozen=True, tag="restart_broker"):
    """Start a killed broker (or `broker = "stub"`: the stub) again, on the same ports.

    A stub in memory comes back empty: the cluster restarts its brokers with it
    (docs/cluster.md, "When the stub dies").
    """

    broker: int | Literal["stub"] = 0


class SetDispatchRate(_Event, frozen=True, tag="set_dispatch_rate"):
    """Set a dispatch-rate policy over REST (Pulsar's `DispatchRate` JSON).

    `scope` picks the path: `namespace` and `namespace_subscription` take `target =
    "tenant/ns"`; `topic` and `topic_subscription` take a topic; `subscription` takes a topic
    and `subscription` (PIP-152's per-subscription rate). -1 means "no limit".
    """

    scope: Literal[
        "namespace", "namespace_subscription", "topic", "topic_subscription", "subscription"
    ]
    target: str
    subscription: str | None = None
    msg_rate: int = -1
    byte_rate: int = -1
    period_s: int = 1
    relative_to_publish_rate: bool = False


class SetDynamicConfig(_Event, frozen=True, tag="set_dynamic_config"):
    """`POST /admin/v2/brokers/configuration/{key}/{value}` on every broker."""

    key: str
    value: str


class StubFaults(_Event, frozen=True, tag="stub_faults"):
    """Replace the bookie stub's fault configuration (storage_stub.faults.FaultConfig)."""

    config: dict[str, Any]


class StubFailNext(_Event, frozen=True, tag="stub_fail_next"):
    """Fail the stub's next `count` requests (of kinds `ops`, every kind if unset)."""

    count: int
    ops: list[str] | None = None


class StubStall(_Event, frozen=True, tag="stub_stall"):
    """Hold every reply of the stub for `seconds`."""

    seconds: Seconds


class StubClear(_Event, frozen=True, tag="stub_clear"):
    """Drop every stub fault, pending failure and stall."""


class PauseConsumers(_Event, frozen=True, tag="pause_consumers"):
    """Stop receiving in a consumer group (for `duration`, or until a `resume_consumers`)."""

    group: str
    duration: Seconds | None = None


class ResumeConsumers(_Event, frozen=True, tag="resume_consumers"):
    """Receive again in a paused consumer group."""

    group: str


Event = (
    UnloadTopic
    | UnloadNamespace
    | UnloadBundle
    | SplitBundle
    | KillBroker
    | RestartBroker
    | SetDispatchRate
    | SetDynamicConfig
    | StubFaults
    | StubFailNext
    | StubStall
    | StubClear
    | PauseConsumers
    | ResumeConsumers
)

CLUSTER_START_ACTIONS = (KillBroker, RestartBroker)
"""Events that need processes loadgen started itself."""

STUB_ACTIONS = (StubFaults, StubFailNext, StubStall, StubClear)
"""Events that need a bookie stub loadgen can reach (`start = { storage = "stub" }`)."""


def event_target(event: Event) -> str:
    """What the event acts on, for the events table."""
    match event:
        case UnloadTopic(topic=topic):
            return topic
        case UnloadNamespace(namespace=namespace):
            return namespace
        case (
            UnloadBundle(namespace=namespace, bundle=bundle)
            | SplitBundle(namespace=namespace, bundle=bundle)
        ):
            return f"{namespace}/{bundle}"
        case KillBroker(broker=broker) | RestartBroker(broker=broker):
            return STUB if broker == STUB else f"broker-{broker}"
        case SetDispatchRate(target=target, subscription=subscription):
            return f"{target}/{subscription}" if subscription else target
        case SetDynamicConfig(key=key):
            return key
        case PauseConsumers(group=group) | ResumeConsumers(group=group):
            return group
        case _:
            return "stub"
