"""The dispatch trace record and its Parquet writer, read back with pyarrow."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from emubroker.ratelimit.limiter import LimiterLevel, create_dispatch_rate_limiter
from emubroker.ratelimit.quotas import CLASSIC_FACTORY, DispatchRate, throttling_config_from
from emubroker.ratelimit.readsize import NOT_CONSULTED, ThrottleChain
from emubroker.ratelimit.trace import (
    SCHEMA_VERSION,
    DispatchTraceRecord,
    DispatchTraceWriter,
    dispatch_record,
    dispatch_row,
    trace_schema,
)

B, T, S = LimiterLevel.BROKER, LimiterLevel.TOPIC, LimiterLevel.SUBSCRIPTION


def record(i: int) -> DispatchTraceRecord:
    return DispatchTraceRecord(
        wall_ns=1_700_000_000_000_000_000 + i,
        monotonic=i * 0.5,
        broker="broker-1:8080",
        topic="persistent://public/default/t",
        subscription="sub",
        consumer=f"c{i % 2}",
        consumer_id=i % 2,
        entries=i,
        messages=6 * i,
        bytes=600 * i,
        subscription_msg_rate=10,
        subscription_msg_available=10 - i,
        subscription_msg_charged=6 * i,
        subscription_period=i // 2,
        replay=i % 3 == 0,
    )


def classic_chain(**config: object) -> ThrottleChain:
    settings = throttling_config_from(
        {"dispatchRateLimiterFactoryClassName": CLASSIC_FACTORY, **config}
    )
    return ThrottleChain(
        settings,
        broker=None,
        topic=create_dispatch_rate_limiter(CLASSIC_FACTORY, T, DispatchRate(-1, 5000), 0.0),
        subscription=create_dispatch_rate_limiter(CLASSIC_FACTORY, S, DispatchRate(10), 0.0),
    )


class TestDispatchRecord:
    def test_dispatch_record_carries_each_level(self) -> None:
        chain = classic_chain(preciseDispatcherFlowControl=True)
        chain.plan_read(1000, now=2.0)
        chain.charge(2, 12, 1200, now=2.0)
        rec = dispatch_record(
            chain,
            now=2.0,
            wall_ns=123,
            broker="b1",
            topic="persistent://t/n/x",
            subscription="s",
            consumer="c",
            consumer_id=7,
            entries=2,
            messages=12,
            size=1200,
        )
        assert rec.schema_version == SCHEMA_VERSION == 1
        assert (rec.event, rec.mode, rec.charge_unit, rec.limiter_impl) == (
            "dispatch",
            "precise",
            "messages",
            "classic",
        )
        assert (rec.entries, rec.messages, rec.bytes, rec.throttled_by) == (2, 12, 1200, "")
        assert (rec.broker_msg_available, rec.broker_msg_charged, rec.broker_period) == (-1, -1, -1)
        assert (rec.topic_msg_rate, rec.topic_byte_rate) == (-1, 5000)
        assert (rec.topic_msg_available, rec.topic_byte_available) == (-1, 5000)
        assert (rec.topic_msg_charged, rec.topic_byte_charged) == (-1, 1200)
        assert (rec.subscription_msg_rate, rec.subscription_msg_available) == (10, 10)
        assert (rec.subscription_msg_charged, rec.subscription_byte_charged) == (12, -1)
        assert rec.subscription_period == 0

    def test_throttled_record(self) -> None:
        chain = classic_chain(dispatchThrottlingOnBatchMessageEnabled=True)
        chain.charge(10, 60, 100, now=0.0)
        plan = chain.plan_read(1000, now=0.5)
        rec = dispatch_record(
            chain,
            now=0.5,
            wall_ns=1,
            broker="b1",
            topic="t",
            subscription="s",
            entries=99,
            throttled_by=plan.throttled_by,
        )
        assert (rec.event, rec.throttled_by, rec.entries, rec.charge_unit) == (
            "throttled",
            "subscription",
            0,
            "entries",
        )
        assert rec.subscription_msg_available == 0
        assert (rec.subscription_msg_charged, rec.topic_byte_charged) == (0, 0)
        assert rec.topic_msg_charged == -1

    def test_levels_not_consulted_are_marked(self) -> None:
        chain = classic_chain()
        chain.set_limiter(B, create_dispatch_rate_limiter(CLASSIC_FACTORY, B, DispatchRate(1), 0.0))
        chain.charge(1, 1, 1, now=0.0)
        plan = chain.plan_read(1000, now=0.0)
        rec = dispatch_record(
            chain,
            now=0.0,
            wall_ns=1,
            broker="b",
            topic="t",
            subscription="s",
            throttled_by=plan.throttled_by,
        )
        assert rec.throttled_by == "broker"
        assert rec.topic_byte_available == rec.subscription_msg_available == NOT_CONSULTED


class TestDispatchTraceWriter:
    def test_schema_follows_the_record_fields(self) -> None:
        assert trace_schema().names == list(DispatchTraceRecord.__struct_fields__)
        assert trace_schema().field("wall_ns").type == pa.int64()
        assert trace_schema().field("monotonic").type == pa.float64()
        assert trace_schema().field("topic").type == pa.string()
        assert trace_schema().field("replay").type == pa.bool_()

    def test_writes_rolling_files_that_read_back_identically(self, tmp_path: Path) -> None:
        records = [record(i) for i in range(11)]
        with DispatchTraceWriter(tmp_path, prefix="b1", flush_every=3, rows_per_file=5) as writer:
            for rec in records[:2]:
                writer.append(rec)
            assert list(tmp_path.iterdir()) == []  # nothing touches the disk before a flush
            for rec in records[2:]:
                writer.append(rec)
            in_progress = sorted(p.name for p in tmp_path.iterdir())
            assert in_progress == [".b1-00002.parquet.inprogress", "b1-00001.parquet"]
        # Row groups of 3: file 1 rolls at 6 rows, file 2 gets 3 + the 2 flushed on close.
        assert [p.name for p in writer.files] == ["b1-00001.parquet", "b1-00002.parquet"]
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "b1-00001.parquet",
            "b1-00002.parquet",
        ]
        first = pq.ParquetFile(writer.files[0])
        assert first.metadata.num_rows == 6
        assert first.metadata.num_row_groups == 2
        assert writer.records_written == 11

        table = pq.read_table(tmp_path)
        assert table.num_rows == 11
        for file in writer.files:
            schema = pq.read_schema(file)
            assert schema.equals(trace_schema(), check_metadata=False)
            assert schema.metadata[b"emubroker.schema_version"] == b"1"
            assert schema.metadata[b"emubroker.trace"] == b"dispatch"
        rows = (
            pq.read_table(writer.files[0]).to_pylist() + pq.read_table(writer.files[1]).to_pylist()
        )
        assert rows == [msgspec.structs.asdict(rec) for rec in records]

    def test_detach_and_write_split_the_work(self, tmp_path: Path) -> None:
        writer = DispatchTraceWriter(tmp_path, flush_every=2, auto_flush=False)
        for i in range(5):
            writer.append(record(i))
        assert writer.buffered == 5  # auto_flush off: the owner decides when to write
        columns = writer.detach()
        assert columns is not None
        assert writer.buffered == 0
        assert writer.detach() is None
        writer.append(record(5))  # appends continue into fresh columns
        writer.write(columns)
        writer.close()
        table = pq.read_table(writer.files[0])
        assert table.column("entries").to_pylist() == [0, 1, 2, 3, 4, 5]

    def test_dispatch_row_is_the_record_in_field_order(self, tmp_path: Path) -> None:
        chain = classic_chain()
        chain.plan_read(1000, now=1.0)
        chain.charge(2, 12, 1200, now=1.0)
        row = dispatch_row(
            chain, now=1.0, wall_ns=5, broker="b", topic="t", subscription="s", entries=2
        )
        rec = dispatch_record(
            chain, now=1.0, wall_ns=5, broker="b", topic="t", subscription="s", entries=2
        )
        assert row == msgspec.structs.astuple(rec)
        with DispatchTraceWriter(tmp_path) as writer:
            writer.append_row(row)
            writer.append(rec)
        rows = pq.read_table(writer.files[0]).to_pylist()
        assert rows[0] == rows[1] == msgspec.structs.asdict(rec)
        assert rows[0]["subscription_msg_charged"] == 12

    def test_append_after_close_fails_and_close_is_idempotent(self, tmp_path: Path) -> None:
        writer = DispatchTraceWriter(tmp_path)
        writer.close()
        writer.close()
        assert writer.files == []
        with pytest.raises(RuntimeError, match="closed"):
            writer.append(record(0))
        with pytest.raises(RuntimeError, match="closed"):
            writer.append_row(msgspec.structs.astuple(record(0)))

    def test_rejects_bad_sizes(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="positive"):
            DispatchTraceWriter(tmp_path, flush_every=0)
