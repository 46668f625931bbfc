"""Trace tables: a column added later is read as its default; only unknown versions refused."""

from __future__ import annotations

import msgspec
import pytest

from emubroker.traceschema import BROKER_TRACES, LOADGEN_TABLES, TraceTable, UnreadableTraceError


class Row(msgspec.Struct, frozen=True, kw_only=True):
    wall_ns: int
    broker: str
    added: float = -1.0  # a column of a later release


TABLE = TraceTable("rows", Row, 1, "emubroker", "trace")


def test_a_column_added_later_is_filled_with_its_default() -> None:
    assert TABLE.absent(["wall_ns", "broker"]) == {"added": -1.0}
    assert TABLE.absent(["wall_ns", "broker", "added"]) == {}


def test_a_first_version_column_missing_means_not_this_table() -> None:
    with pytest.raises(UnreadableTraceError, match=r"table rows lacks column\(s\) broker"):
        TABLE.absent(["wall_ns", "added"])


def test_only_an_unknown_major_version_is_refused() -> None:
    TABLE.check_version(1, "run")
    with pytest.raises(UnreadableTraceError, match=r"run: rows schema version 2 is not one"):
        TABLE.check_version(2, "run")


def test_every_table_names_itself_and_its_version_in_the_arrow_metadata() -> None:
    for name, table in {**LOADGEN_TABLES, **BROKER_TRACES}.items():
        metadata = table.arrow_schema().metadata
        assert metadata[f"{table.metadata_prefix}.{table.metadata_name}".encode()] == name.encode()
        assert metadata[f"{table.metadata_prefix}.schema_version".encode()] == b"1"
        assert table.arrow_schema().names == list(table.field_names)


@pytest.mark.parametrize(
    "table", [*BROKER_TRACES.values(), *LOADGEN_TABLES.values()], ids=lambda t: t.name
)
def test_a_tables_column_names_are_its_records_fields_in_order(table: TraceTable) -> None:
    # field_names is read from the record's fields tuple (no annotations evaluated at import).
    assert table.field_names == tuple(field.name for field in msgspec.structs.fields(table.record))
