"""The load balancer's trace, version 1: reports and decisions (docs/load-balancer-trace.md).

Written by ``emubroker.loadbalance.trace`` (``emubroker.trace = loadbalance`` in the Arrow
schema metadata, the version also in the ``schema_version`` column); read by the Spark analysis
and the dashboard.
"""

from __future__ import annotations

from typing import Final

import msgspec

from emubroker.traceschema.table import TraceTable

__all__ = ["EVENTS", "FIELD_NAMES", "LOADBALANCE", "SCHEMA_VERSION", "LoadBalancerTraceRecord"]

SCHEMA_VERSION: Final = 1

EVENTS: Final = ("report", "shed", "placement", "split", "unload")
"""The row kinds (the ``event`` column), docs/load-balancer-trace.md."""


class LoadBalancerTraceRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One load-balancing row; see docs/load-balancer-trace.md for every field."""

    schema_version: int = SCHEMA_VERSION
    wall_ns: int
    monotonic: float
    broker: str  # who wrote the row: the reporting broker, the leader, or the unloading owner
    event: str  # report | shed | placement | split | unload
    load_manager: str = "modular"  # modular | extensible
    cycle: int = -1  # the leader's shedding (or split) cycle number
    strategy: str = ""  # shedding / placement strategy or split algorithm, Pulsar's simple name
    bundle: str = ""  # tenant/namespace/0x..._0x...
    source_broker: str = ""
    dest_broker: str = ""
    reason: str = ""
    label: str = ""  # TransferShedder's Success | Skip | Failure
    # A load report (event "report"): the broker's LocalBrokerData.
    cpu_percent: float = -1.0
    memory_percent: float = -1.0
    direct_memory_percent: float = -1.0
    bandwidth_in_percent: float = -1.0
    bandwidth_out_percent: float = -1.0
    weighted_max_usage: float = -1.0  # spec §0.2, a fraction (0.85 = 85 %)
    msg_rate_in: float = -1.0
    msg_rate_out: float = -1.0
    msg_throughput_in: float = -1.0  # bytes/s
    msg_throughput_out: float = -1.0
    num_bundles: int = -1
    num_topics: int = -1
    num_consumers: int = -1
    num_producers: int = -1
    # The numbers behind a decision (shed, placement, split).
    broker_load: float = -1.0  # the source broker's load as the strategy measured it
    cluster_load: float = -1.0  # what it was compared with (cluster average, partner, ...)
    dest_load: float = -1.0  # the destination's load
    threshold: float = -1.0  # the threshold crossed, in the unit of broker_load
    to_offload: float = -1.0  # what the strategy wanted off the source broker
    offload_unit: str = ""  # "bytes/s" or "msg/s"
    bundle_msg_rate: float = -1.0  # the bundle's short-term msg rate in + out
    bundle_throughput: float = -1.0  # the bundle's short-term throughput in + out, bytes/s
    bundle_topics: int = -1
    candidates: int = -1  # placement: brokers considered
    split_children: str = ""  # split: the new bundles, comma-separated
    split_unload: bool = False  # split: the children are unloaded afterwards
    duration_ms: float = -1.0  # unload: time to close the bundle's topics


LOADBALANCE: Final = TraceTable(
    "loadbalance", LoadBalancerTraceRecord, SCHEMA_VERSION, "emubroker", "trace"
)
FIELD_NAMES: Final[tuple[str, ...]] = LOADBALANCE.field_names
