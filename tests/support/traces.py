"""Small run directories written by tests: every row chosen, so every answer is known.

`RunBuilder` lays out a run as `loadgen run` does (docs/loadgen-trace.md): manifest.json and
one Parquet file per table, plus the brokers' `dispatch/` and `loadbalance/` traces. Times are
given in seconds after the run's start (`T0_NS`) and stored as epoch nanoseconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from emubroker.loadbalance.trace.records import LoadBalancerTraceRecord, LoadBalancerTraceWriter
from emubroker.ratelimit.trace import DispatchTraceRecord, DispatchTraceWriter
from emubroker.traceschema.loadgen import (
    EventRecord,
    ReceiveRecord,
    SendRecord,
    arrow_schema,
)

T0_NS = 1_800_000_000 * 1_000_000_000
"""The runs' start: a whole second, as loadgen's schedules start."""

RUN_ID = "test-run"
BROKER_URL = "pulsar://127.0.0.1:6650"


def ns(seconds: float) -> int:
    return T0_NS + round(seconds * 1e9)


def topic_name(name: str) -> str:
    return f"persistent://public/default/{name}"


class RunBuilder:
    """Rows of one run, written by `write()`."""

    def __init__(self, path: Path, *, phases: list[tuple[str, float]] | None = None) -> None:
        self.path = path
        self.phases = phases or [("steady", 10.0)]
        self.consumers: list[dict[str, Any]] = []
        self.producers: list[dict[str, Any]] = []
        self.sends: list[SendRecord] = []
        self.receives: list[ReceiveRecord] = []
        self.events: list[EventRecord] = []
        self.dispatch: list[DispatchTraceRecord] = []
        self.loadbalance: list[LoadBalancerTraceRecord] = []
        self.manifest: dict[str, Any] = {}

    def subscription(self, topic: str, subscription: str, kind: str, count: int = 1) -> None:
        self.consumers.append(
            {
                "name": subscription,
                "topic": topic,
                "subscription": subscription,
                "type": kind,
                "count": count,
            }
        )

    def send(
        self,
        topic: str,
        sequence_id: int,
        at: float,
        *,
        latency: float = 0.001,
        producer_index: int = 0,
        key: str | None = None,
        acked: bool = True,
        size: int = 100,
    ) -> None:
        self.sends.append(
            SendRecord(
                run_id=RUN_ID,
                worker=0,
                topic=topic_name(topic),
                partition=-1,
                producer=f"p{producer_index}",
                producer_index=producer_index,
                sequence_id=sequence_id,
                key=key,
                size=size,
                intended_ns=ns(at),
                send_ns=ns(at),
                receipt_ns=ns(at + latency) if acked else None,
                ledger_id=1 if acked else -1,
                entry_id=sequence_id if acked else -1,
                batch_index=-1,
                error=None if acked else "timeout",
                broker=BROKER_URL,
            )
        )

    def receive(
        self,
        topic: str,
        subscription: str,
        consumer: str,
        sequence_id: int,
        at: float,
        *,
        sent_at: float | None = None,
        producer_index: int = 0,
        key: str | None = None,
        size: int = 100,
    ) -> None:
        sent = at - 0.002 if sent_at is None else sent_at
        self.receives.append(
            ReceiveRecord(
                run_id=RUN_ID,
                worker=0,
                topic=topic_name(topic),
                partition=-1,
                subscription=subscription,
                consumer=consumer,
                producer=f"p{producer_index}",
                producer_index=producer_index,
                sequence_id=sequence_id,
                key=key,
                size=size,
                intended_ns=ns(sent),
                send_ns=ns(sent),
                receive_ns=ns(at),
                ledger_id=1,
                entry_id=sequence_id,
                batch_index=-1,
                redelivery_count=0,
                broker=BROKER_URL,
            )
        )

    def event(self, at: float, action: str, target: str, **params: Any) -> None:
        self.events.append(
            EventRecord(
                run_id=RUN_ID,
                index=len(self.events),
                at_s=at,
                action=action,
                target=target,
                params=json.dumps({"action": action, **params}),
                fired_ns=ns(at),
                finished_ns=ns(at + 0.005),
                outcome="ok",
                detail="",
            )
        )

    def dispatched(self, at: float, **fields: Any) -> None:
        """A dispatch-trace row at `at` s (monotonic = `at` too)."""
        self.dispatch.append(
            DispatchTraceRecord(wall_ns=ns(at), monotonic=at, broker="b1", **fields)
        )

    def balanced(self, at: float, event: str, **fields: Any) -> None:
        """A load-balancer trace row at `at` s."""
        self.loadbalance.append(
            LoadBalancerTraceRecord(
                wall_ns=ns(at),
                monotonic=at,
                broker=fields.pop("broker", "b1"),
                event=event,
                **fields,
            )
        )

    def write(self) -> Path:
        self.path.mkdir(parents=True, exist_ok=True)
        end = sum(duration for _name, duration in self.phases) + 1.0
        manifest = {
            "schema_version": 1,
            "run_id": RUN_ID,
            "scenario": {
                "name": "built",
                "description": "written by a test",
                "producers": self.producers,
                "consumers": self.consumers,
                "phases": [{"name": n, "duration": d} for n, d in self.phases],
            },
            "start_ns": T0_NS,
            "end_ns": ns(end),
            "trace_sample": 1.0,
            "client": "native",
            "cluster": {"brokers": [], "started_by_loadgen": False, "storage": None},
            **self.manifest,
        }
        (self.path / "manifest.json").write_text(json.dumps(manifest))
        for name, rows in (
            ("sends", self.sends),
            ("receives", self.receives),
            ("events", self.events),
        ):
            if rows:
                schema = arrow_schema(name)
                table = pa.Table.from_pylist(
                    [{f: getattr(r, f) for f in schema.names} for r in rows], schema=schema
                )
                (self.path / name).mkdir(exist_ok=True)
                pq.write_table(table, self.path / name / "w0-00001.parquet")
        if self.dispatch:
            with DispatchTraceWriter(self.path / "dispatch", prefix="dispatch-b1") as writer:
                for record in self.dispatch:
                    writer.append(record)
        if self.loadbalance:
            lb_writer = LoadBalancerTraceWriter(self.path / "loadbalance")
            for lb_record in self.loadbalance:
                lb_writer.append(lb_record)
            lb_writer.close()
        return self.path
