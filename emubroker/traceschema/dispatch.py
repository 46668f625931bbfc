"""The brokers' dispatch trace, version 1: one row per dispatch (docs/dispatch-trace.md).

Each file carries its version both as the ``schema_version`` column and in the Arrow schema
metadata (``emubroker.schema_version``, with ``emubroker.trace = dispatch``). The writer is
``emubroker.ratelimit.trace``; the readers are the Spark analysis and the dashboard's replay.
"""

from __future__ import annotations

from typing import Final

import msgspec

from emubroker.traceschema.table import TraceTable

__all__ = ["DISPATCH", "FIELD_NAMES", "SCHEMA_VERSION", "DispatchTraceRecord"]

SCHEMA_VERSION: Final = 1


class DispatchTraceRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One dispatch (or one throttled read attempt) of one subscription dispatcher.

    Level fields (``broker_*``, ``topic_*``, ``subscription_*``) use -1 for "no such limit" and
    -2 (``readsize.NOT_CONSULTED``) for "not consulted"; see docs/dispatch-trace.md.
    """

    schema_version: int = SCHEMA_VERSION
    wall_ns: int
    monotonic: float
    broker: str
    topic: str
    subscription: str
    consumer: str = ""
    consumer_id: int = -1
    event: str = "dispatch"
    mode: str = "normal"
    charge_unit: str = "messages"
    limiter_impl: str = "token-bucket"
    replay: bool = False
    gate_applied: bool = True
    throttled_by: str = ""
    entries: int = 0
    messages: int = 0
    bytes: int = 0
    broker_msg_rate: int = -1
    broker_byte_rate: int = -1
    broker_msg_available: int = -1
    broker_byte_available: int = -1
    broker_msg_charged: int = -1
    broker_byte_charged: int = -1
    broker_period: int = -1
    topic_msg_rate: int = -1
    topic_byte_rate: int = -1
    topic_msg_available: int = -1
    topic_byte_available: int = -1
    topic_msg_charged: int = -1
    topic_byte_charged: int = -1
    topic_period: int = -1
    subscription_msg_rate: int = -1
    subscription_byte_rate: int = -1
    subscription_msg_available: int = -1
    subscription_byte_available: int = -1
    subscription_msg_charged: int = -1
    subscription_byte_charged: int = -1
    subscription_period: int = -1


DISPATCH: Final = TraceTable("dispatch", DispatchTraceRecord, SCHEMA_VERSION, "emubroker", "trace")
FIELD_NAMES: Final[tuple[str, ...]] = DISPATCH.field_names
