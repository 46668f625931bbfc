"""Schemas: the per-topic registry (``registry``) and Pulsar's compatibility rules (``compat``).

The handlers consult :class:`SchemaService` when a PRODUCER or SUBSCRIBE carries a schema and for
GET_SCHEMA (spec/wire-protocol.md §6.1, §11); the admin API's schema routes use the registry.
"""

from __future__ import annotations

from emubroker.schemas.compat import (
    CompatibilityStrategy,
    SchemaData,
    check_compatible,
    check_consumer_compatible,
    same_schema,
    schema_type_from_name,
    schema_type_name,
)
from emubroker.schemas.registry import (
    SchemaRegistry,
    StoredSchema,
    schema_id,
    version_from_wire,
    version_to_wire,
)
from emubroker.schemas.service import SchemaService, schema_data_of, wire_schema

__all__ = [
    "CompatibilityStrategy",
    "SchemaData",
    "SchemaRegistry",
    "SchemaService",
    "StoredSchema",
    "check_compatible",
    "check_consumer_compatible",
    "same_schema",
    "schema_data_of",
    "schema_id",
    "schema_type_from_name",
    "schema_type_name",
    "version_from_wire",
    "version_to_wire",
    "wire_schema",
]
