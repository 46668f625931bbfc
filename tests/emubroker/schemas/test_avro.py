"""Parsing Avro schemas: what Avro's Java parser refuses, we refuse."""

from __future__ import annotations

import pytest

from emubroker.schemas.avro import AvroSchemaError, parse_avro


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '"nosuchtype"',
        '{"type": "record", "name": "R"}',
        '{"type": "record", "fields": []}',
        '{"type": "enum", "name": "E", "symbols": [1]}',
        '{"type": "fixed", "name": "F", "size": -1}',
        '{"type": "array"}',
        "42",
        '[{"type": "record", "name": "R", "fields": []}, "R", {"type": "enum", "name": "R",'
        ' "symbols": []}]',
        # Avro's Java parser refuses these too.
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"},'
        ' {"name": "a", "type": "long"}]}',
        '{"type": "enum", "name": "E", "symbols": ["A", "A"]}',
        '{"type": "enum", "name": "E", "symbols": ["A"], "default": "B"}',
        '["null", ["int", "long"]]',
        '["int", "string", "int"]',
        '[{"type": "array", "items": "int"}, {"type": "array", "items": "long"}]',
        '[{"type": "fixed", "name": "F", "size": 1}, "F"]',
    ],
)
def test_invalid_avro_schemas_are_rejected(text: str) -> None:
    with pytest.raises(AvroSchemaError):
        parse_avro(text)


def test_a_union_may_hold_named_types_of_one_kind_under_different_names() -> None:
    parse_avro(
        '["null", {"type": "record", "name": "A", "fields": []},'
        ' {"type": "record", "name": "B", "fields": []}, {"type": "array", "items": "A"}]'
    )
