"""Pulsar's schema data validation (``SchemaDataValidator``), before any registration."""

from __future__ import annotations

import json
import struct

import pytest

from emubroker.schemas.compat import SchemaData
from emubroker.schemas.validation import InvalidSchemaDataError, validate_schema_data
from protocol.commands import SchemaType
from protocol.errors import IncompatibleSchemaError

RECORD = json.dumps(
    {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
).encode()


def key_value(key: SchemaData, value: SchemaData) -> SchemaData:
    data = b"".join(struct.pack(">i", len(p.data)) + p.data for p in (key, value))
    types = {"key.schema.type": key.type.name, "value.schema.type": value.type.name}
    return SchemaData(SchemaType.KEY_VALUE, data, types)


@pytest.mark.parametrize(
    "schema",
    [
        SchemaData(SchemaType.AVRO, RECORD),
        SchemaData(SchemaType.AVRO, b'"string"'),  # a special (non-record) Avro schema
        SchemaData(SchemaType.JSON, RECORD),
        SchemaData(SchemaType.JSON, b'{"type": "object", "properties": {}}'),  # legacy Jackson
        SchemaData(SchemaType.JSON, b'["null", "string"]'),  # unions are refused for AVRO only
        SchemaData(SchemaType.PROTOBUF, RECORD),
        SchemaData(SchemaType.STRING, b""),
        key_value(SchemaData(SchemaType.AVRO, RECORD), SchemaData(SchemaType.JSON, RECORD)),
    ],
)
def test_well_formed_definitions_pass(schema: SchemaData) -> None:
    validate_schema_data(schema)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (SchemaData(SchemaType.AVRO, b"not json"), "for AVRO schema"),
        (SchemaData(SchemaType.AVRO, b'{"type": "record", "name": "R"}'), "for AVRO schema"),
        (SchemaData(SchemaType.AVRO, b'["null", "string"]'), r"typed \[UNION\] is not supported"),
        (SchemaData(SchemaType.JSON, b'{"type": "record", "fields": 1}'), "for JSON schema"),
        (SchemaData(SchemaType.JSON, b'{"type": "nothing"}'), "for JSON schema"),
        (SchemaData(SchemaType.PROTOBUF, b"{}"), "for PROTOBUF schema"),
        (
            key_value(SchemaData(SchemaType.AVRO, RECORD), SchemaData(SchemaType.AVRO, b"x")),
            "for AVRO schema",
        ),
        (SchemaData(SchemaType.KEY_VALUE, b"\x00\x00"), "for KEY_VALUE schema"),
    ],
)
def test_malformed_definitions_are_invalid_schema_data(schema: SchemaData, message: str) -> None:
    with pytest.raises(InvalidSchemaDataError, match=message):
        validate_schema_data(schema)


def test_invalid_data_is_incompatible_schema_on_the_wire() -> None:
    # Pulsar answers it as IncompatibleSchema to a producer (BrokerServiceException).
    assert issubclass(InvalidSchemaDataError, IncompatibleSchemaError)
