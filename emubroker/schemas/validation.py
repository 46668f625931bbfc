"""Is a schema definition well formed? Pulsar's ``SchemaDataValidator``, before any registration.

Pulsar's registry checks the data of every schema it is asked to store
(``SchemaRegistryServiceWithSchemaDataValidator.putSchemaIfAbsent``) before it looks for an
equal version or checks compatibility:

- AVRO, JSON and PROTOBUF data must parse as an Avro schema (defaults are not validated); an
  AVRO schema whose top level is a union is refused ("Avro schema typed [UNION] is not
  supported"). JSON data that is not Avro is still accepted in the legacy Jackson JSON-schema
  form (a JSON object whose ``type`` is a JSON-schema type), for old clients.
- KEY_VALUE data: its key and value parts, each by its own type.
- Other types are not checked here (Pulsar also checks that primitives carry no data and
  ``PROTOBUF_NATIVE`` descriptors; not built).

A failure is :class:`InvalidSchemaDataError` "Invalid schema definition data for AVRO schema": a
REST ``POST .../schema`` answers it with 422, the binary protocol as ``IncompatibleSchema`` (it
subclasses that error, as Pulsar maps it "for backward compatibility with old clients").
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

from emubroker.schemas.compat import key_value_parts
from protocol.commands import SchemaType
from protocol.errors import IncompatibleSchemaError

if TYPE_CHECKING:
    from emubroker.schemas.compat import SchemaData

__all__ = ["InvalidSchemaDataError", "validate_schema_data"]

_STRUCT: Final = frozenset({SchemaType.AVRO, SchemaType.JSON, SchemaType.PROTOBUF})
# Jackson's JsonFormatTypes: the ``type`` ids its legacy JsonSchema reader knows.
_JSON_SCHEMA_TYPES: Final = frozenset(
    {"any", "array", "boolean", "integer", "null", "number", "object", "string"}
)


class InvalidSchemaDataError(IncompatibleSchemaError):
    """Pulsar's ``InvalidSchemaDataException``: the definition is not a schema of its type."""


def _invalid(schema: SchemaData) -> InvalidSchemaDataError:
    return InvalidSchemaDataError(f"Invalid schema definition data for {schema.type.name} schema")


def _legacy_json_schema(data: bytes) -> bool:
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(doc, dict) and doc.get("type") in _JSON_SCHEMA_TYPES


def validate_schema_data(schema: SchemaData) -> None:
    """Refuse a malformed definition (module docstring).

    Raises:
        InvalidSchemaDataError: What Pulsar's validator would refuse.
    """
    if schema.type is SchemaType.KEY_VALUE:
        try:
            key, value = key_value_parts(schema)
        except IncompatibleSchemaError:
            raise _invalid(schema) from None
        validate_schema_data(key)
        validate_schema_data(value)
        return
    if schema.type not in _STRUCT:
        return
    # The Avro parser loads with the first struct schema, not with the broker.
    from emubroker.schemas.avro import AvroSchemaError, AvroUnion, parse_avro

    try:
        parsed = parse_avro(schema.data)
    except AvroSchemaError:
        if schema.type is SchemaType.JSON and _legacy_json_schema(schema.data):
            return
        raise _invalid(schema) from None
    if schema.type is SchemaType.AVRO and isinstance(parsed, AvroUnion):
        raise InvalidSchemaDataError("Avro schema typed [UNION] is not supported")
