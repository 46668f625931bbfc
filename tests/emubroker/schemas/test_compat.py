"""Schema compatibility: Avro resolution, Pulsar's strategies, JSON and KEY_VALUE schemas."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest

from emubroker.schemas.compat import (
    CompatibilityStrategy,
    SchemaData,
    check_compatible,
    check_consumer_compatible,
    same_schema,
    schema_type_from_name,
    schema_type_name,
)
from protocol.commands import SchemaType
from protocol.errors import IncompatibleSchemaError

S = CompatibilityStrategy


def record(*fields: dict[str, Any], name: str = "User", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def avro(doc: Any, kind: SchemaType = SchemaType.AVRO) -> SchemaData:
    return SchemaData(kind, json.dumps(doc).encode())


NAME = {"name": "name", "type": "string"}
AGE_DEFAULT = {"name": "age", "type": "int", "default": 0}
AGE = {"name": "age", "type": "int"}

V1 = record(NAME)
WITH_DEFAULT = record(NAME, AGE_DEFAULT)  # added a field with a default
WITHOUT_DEFAULT = record(NAME, AGE)  # added a field without a default


# ---- strategies ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [SchemaType.AVRO, SchemaType.JSON])
@pytest.mark.parametrize(
    ("old", "new", "compatible"),
    [
        # (old, new): which of BACKWARD, FORWARD, FULL accept the change
        (V1, WITH_DEFAULT, {S.BACKWARD, S.FORWARD, S.FULL}),
        (V1, WITHOUT_DEFAULT, {S.FORWARD}),
        (WITHOUT_DEFAULT, V1, {S.BACKWARD}),  # removed a field that had no default
        (WITH_DEFAULT, V1, {S.BACKWARD, S.FORWARD, S.FULL}),
        (
            record({"name": "n", "type": "int"}),
            record({"name": "n", "type": "long"}),
            {S.BACKWARD},  # widened: new reads old, old cannot read new
        ),
        (
            record({"name": "n", "type": "long"}),
            record({"name": "n", "type": "int"}),
            {S.FORWARD},
        ),
        # Pulsar's validator resolves without comparing record names (schema_test.py's
        # test_schema_evolve registers User2 after User1 under FORWARD) ...
        (V1, record(NAME, name="Other"), {S.BACKWARD, S.FORWARD, S.FULL}),
        # ... but it compares the names of enums and fixed.
        (
            record({"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}}),
            record({"name": "e", "type": {"type": "enum", "name": "F", "symbols": ["A"]}}),
            set(),
        ),
    ],
)
def test_backward_forward_full(
    kind: SchemaType, old: Any, new: Any, compatible: set[CompatibilityStrategy]
) -> None:
    for strategy in (S.BACKWARD, S.FORWARD, S.FULL):
        transitive = S(f"{strategy}_TRANSITIVE")
        for s in (strategy, transitive):  # with one old version, both forms agree
            if strategy in compatible:
                check_compatible([avro(old, kind)], avro(new, kind), s)
            else:
                with pytest.raises(IncompatibleSchemaError, match="strategy"):
                    check_compatible([avro(old, kind)], avro(new, kind), s)


def test_transitive_strategies_check_every_version() -> None:
    history = [avro(V1), avro(WITH_DEFAULT)]
    new = avro(WITHOUT_DEFAULT)  # can read WITH_DEFAULT data, not V1 data
    check_compatible(history, new, S.BACKWARD)
    with pytest.raises(IncompatibleSchemaError):
        check_compatible(history, new, S.BACKWARD_TRANSITIVE)
    # Forward: V1 can read data written with the new schema (extra field skipped) ...
    check_compatible(history, new, S.FORWARD_TRANSITIVE)
    with pytest.raises(IncompatibleSchemaError):
        check_compatible(history, new, S.FULL_TRANSITIVE)


def test_always_compatible_and_always_incompatible() -> None:
    string = SchemaData(SchemaType.STRING, b"")
    check_compatible([avro(V1)], avro(WITHOUT_DEFAULT), S.ALWAYS_COMPATIBLE)
    check_compatible([avro(V1)], string, S.ALWAYS_COMPATIBLE)  # even a type change
    with pytest.raises(IncompatibleSchemaError, match="ALWAYS_INCOMPATIBLE"):
        check_compatible([avro(V1)], avro(WITH_DEFAULT), S.ALWAYS_INCOMPATIBLE)
    with pytest.raises(IncompatibleSchemaError, match="ALWAYS_INCOMPATIBLE"):
        check_compatible([string], SchemaData(SchemaType.STRING, b"x"), S.ALWAYS_INCOMPATIBLE)
    # Primitives change freely under the other strategies (Pulsar's DEFAULT check).
    check_compatible([string], SchemaData(SchemaType.STRING, b"x"), S.FULL)
    # An empty history accepts anything.
    check_compatible([], avro(V1), S.ALWAYS_INCOMPATIBLE)


def test_type_changes_are_incompatible_unless_always_compatible() -> None:
    with pytest.raises(IncompatibleSchemaError, match="exists schema type AVRO, new schema type"):
        check_compatible([avro(V1)], avro(V1, SchemaType.JSON), S.BACKWARD)
    with pytest.raises(IncompatibleSchemaError, match="type"):
        check_compatible([avro(V1)], SchemaData(SchemaType.STRING, b""), S.FULL_TRANSITIVE)


def test_identical_bytes_skip_the_check_and_unparsable_schemas_are_incompatible() -> None:
    check_compatible([avro(V1)], avro(V1), S.ALWAYS_INCOMPATIBLE)
    with pytest.raises(IncompatibleSchemaError, match="parsing"):
        check_compatible([avro(V1)], SchemaData(SchemaType.AVRO, b"{oops"), S.BACKWARD)


def test_legacy_json_schemas_are_an_upgrade_path() -> None:
    legacy = SchemaData(SchemaType.JSON, b'{"type": "object", "id": "urn:a", "properties": {}}')
    other_id = SchemaData(SchemaType.JSON, b'{"type": "object", "id": "urn:b"}')
    json_avro = avro(V1, SchemaType.JSON)
    check_compatible([legacy], json_avro, S.FULL)  # old format replaced by an Avro definition
    check_compatible([json_avro], legacy, S.FULL)  # and accepted the other way too
    with pytest.raises(IncompatibleSchemaError, match="ids differ"):
        check_compatible([legacy], other_id, S.FULL)
    with pytest.raises(IncompatibleSchemaError, match="Unknown schema format"):
        check_compatible([json_avro], SchemaData(SchemaType.JSON, b"[1, 2"), S.FULL)


def key_value(key: SchemaData, value: SchemaData) -> SchemaData:
    data = struct.pack(">i", len(key.data)) + key.data + struct.pack(">i", len(value.data))
    data += value.data
    props = {"key.schema.type": schema_type_name(key.type), "value.schema.type": "AVRO"}
    return SchemaData(SchemaType.KEY_VALUE, data, props)


def test_key_value_checks_key_and_value_separately() -> None:
    string = SchemaData(SchemaType.STRING, b"")
    old = key_value(string, avro(V1))
    check_compatible([old], key_value(string, avro(WITH_DEFAULT)), S.BACKWARD)
    with pytest.raises(IncompatibleSchemaError):
        check_compatible([old], key_value(string, avro(WITHOUT_DEFAULT)), S.BACKWARD)
    int_key = SchemaData(SchemaType.INT32, b"")
    with pytest.raises(IncompatibleSchemaError, match="different schema type"):
        check_compatible([old], key_value(int_key, avro(WITH_DEFAULT)), S.BACKWARD)
    with pytest.raises(IncompatibleSchemaError, match="truncated"):
        check_compatible([old], SchemaData(SchemaType.KEY_VALUE, b"\x00\x00"), S.BACKWARD)


def test_consumer_compatibility() -> None:
    history = [avro(V1), avro(WITH_DEFAULT)]
    # FORWARD for a consumer still means "the consumer can read the latest" (BACKWARD).
    check_consumer_compatible(history, avro(V1), S.FORWARD)
    with pytest.raises(IncompatibleSchemaError):
        check_consumer_compatible([avro(V1)], avro(WITHOUT_DEFAULT), S.FORWARD)
    with pytest.raises(IncompatibleSchemaError):  # must read every version
        check_consumer_compatible(history, avro(WITHOUT_DEFAULT), S.BACKWARD_TRANSITIVE)
    check_consumer_compatible(history, avro(WITHOUT_DEFAULT), S.BACKWARD)
    with pytest.raises(IncompatibleSchemaError, match="does not have schema"):
        check_consumer_compatible([], avro(V1), S.BACKWARD)
    check_consumer_compatible([], avro(V1), S.ALWAYS_COMPATIBLE)


def test_same_schema_ignores_json_layout_but_not_the_type() -> None:
    a = SchemaData(SchemaType.AVRO, json.dumps(V1).encode())
    b = SchemaData(SchemaType.AVRO, json.dumps(V1, indent=4, sort_keys=True).encode())
    assert same_schema(a, b)
    assert not same_schema(a, SchemaData(SchemaType.JSON, a.data))
    assert not same_schema(a, avro(WITH_DEFAULT))
    assert same_schema(SchemaData(SchemaType.STRING, b""), SchemaData(SchemaType.STRING, b""))


def test_strategy_and_type_names() -> None:
    assert S.parse("BACKWARD_TRANSITIVE") is S.BACKWARD_TRANSITIVE
    assert S.parse("BackwardTransitive") is S.BACKWARD_TRANSITIVE  # legacy auto-update names
    assert S.parse("AutoUpdateDisabled") is S.ALWAYS_INCOMPATIBLE
    assert S.FULL_TRANSITIVE.transitive
    assert not S.FULL.transitive
    with pytest.raises(ValueError, match="unknown"):
        S.parse("SOMETIMES")
    assert schema_type_name(SchemaType.BOOL) == "BOOLEAN"
    assert schema_type_name(SchemaType.KEY_VALUE) == "KEY_VALUE"
    assert schema_type_from_name("BOOLEAN") is SchemaType.BOOL
    assert schema_type_from_name("avro") is SchemaType.AVRO
    assert schema_type_from_name("BYTES") is SchemaType.NONE
    with pytest.raises(ValueError, match="unknown schema type"):
        schema_type_from_name("XML")
