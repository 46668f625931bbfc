from __future__ import annotations

import msgspec
import pyarrow.parquet as pq
import pytest

from emubroker.traceschema.loadgen import (
    SCHEMA_VERSION,
    TABLES,
    EventRecord,
    SendRecord,
    arrow_schema,
    field_names,
    int64_columns,
)
from loadgen.trace.writer import ColumnBuffer, TableWriter


def test_every_table_has_a_versioned_schema() -> None:
    for table, record in TABLES.items():
        schema = arrow_schema(table)
        assert schema.names == list(field_names(record))
        assert schema.metadata[b"loadgen.schema_version"] == str(SCHEMA_VERSION).encode()
        assert schema.metadata[b"loadgen.table"] == table.encode()
    sends = arrow_schema("sends")
    assert sends.field("receipt_ns").nullable
    assert not sends.field("send_ns").nullable


def test_buffers_become_rows_with_their_constants(tmp_path) -> None:
    writer = TableWriter(tmp_path / "sends", "sends", prefix="w0", row_group_rows=3)
    constants = {
        "run_id": "r",
        "worker": 0,
        "topic": "t",
        "partition": -1,
        "producer": "p",
        "producer_index": 4,
        "size": 100,
    }
    columns = (
        "sequence_id",
        "key",
        "intended_ns",
        "send_ns",
        "receipt_ns",
        "ledger_id",
        "entry_id",
        "batch_index",
        "error",
        "broker",
    )
    buffer = ColumnBuffer(constants, columns, int64_columns("sends"))  # int64s as arrays
    assert {type(c).__name__ for c in buffer.lists} == {"array", "list"}
    for seq in range(5):
        for column, value in zip(
            buffer.lists,
            (
                seq,
                None if seq % 2 else "k-1",
                10 + seq,
                20 + seq,
                None if seq == 4 else 30 + seq,
                1,
                seq,
                -1,
                "boom" if seq == 4 else None,
                "b",
            ),
            strict=True,
        ):
            column.append(value)
    writer.submit_buffer(buffer, 2)
    assert len(buffer) == 3
    writer.submit_buffer(buffer)
    path = writer.close()
    assert path == tmp_path / "sends" / "w0-00001.parquet"
    assert not list((tmp_path / "sends").glob(".*"))
    table = pq.read_table(path)
    assert table.schema.metadata[b"loadgen.table"] == b"sends"
    rows = [SendRecord(**row) for row in table.to_pylist()]
    assert [r.sequence_id for r in rows] == [0, 1, 2, 3, 4]
    assert rows[0] == SendRecord(
        run_id="r",
        worker=0,
        topic="t",
        partition=-1,
        producer="p",
        producer_index=4,
        sequence_id=0,
        key="k-1",
        size=100,
        intended_ns=10,
        send_ns=20,
        receipt_ns=30,
        ledger_id=1,
        entry_id=0,
        batch_index=-1,
        error=None,
        broker="b",
    )
    assert rows[4].receipt_ns is None
    assert rows[4].error == "boom"
    # 2 rows wait for more; with 3 more the 5 reach row_group_rows and go out as one row group.
    assert pq.ParquetFile(path).metadata.num_row_groups == 1


def test_records_and_an_empty_writer(tmp_path) -> None:
    writer = TableWriter(tmp_path / "events", "events", prefix="runner")
    record = EventRecord(
        run_id="r",
        index=0,
        at_s=1.5,
        action="UnloadTopic",
        target="t",
        params="{}",
        fired_ns=1,
        finished_ns=2,
        outcome="ok",
        detail="",
    )
    writer.submit_records([record])
    path = writer.close()
    assert path is not None
    assert [EventRecord(**r) for r in pq.read_table(path).to_pylist()] == [record]
    empty = TableWriter(tmp_path / "none", "events", prefix="x")
    assert empty.close() is None
    assert not list((tmp_path / "none").iterdir())


def test_a_failed_write_is_reported(tmp_path) -> None:
    writer = TableWriter(tmp_path / "sends", "sends", prefix="w0", row_group_rows=1)
    writer.submit({"run_id": "r"}, ("sequence_id",), [["not a number"]])
    with pytest.raises(RuntimeError, match=r"writing .* failed"):
        writer.close()
    assert msgspec.structs.fields(SendRecord)[0].name == "run_id"


def test_take_keeps_the_lists_that_hot_loops_append_to() -> None:
    buffer = ColumnBuffer({}, ("a", "b"))
    append_a, append_b = (column.append for column in buffer.lists)
    for i in range(5):
        append_a(i)
        append_b(-i)
    assert buffer.take(2) == [[0, 1], [0, -1]]
    taken = buffer.take()
    append_a(9)
    append_b(-9)
    assert taken == [[2, 3, 4], [-2, -3, -4]]  # not changed by later appends
    assert buffer.take() == [[9], [-9]]


def test_the_documented_schema_lists_every_field_in_order() -> None:
    import re
    from pathlib import Path

    text = Path(__file__).resolve().parents[3].joinpath("docs", "loadgen-trace.md").read_text()
    for table, record in TABLES.items():
        section = text.split(f"## Table `{table}`", 1)[1].split("\n## ", 1)[0]
        documented = re.findall(r"^\| \d+ \| `(\w+)` \|", section, flags=re.MULTILINE)
        assert documented == list(field_names(record)), table
