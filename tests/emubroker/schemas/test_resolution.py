"""Avro resolution as Pulsar's validator applies it: the rules one by one (Java's ``Resolver``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from emubroker.schemas.avro import parse_avro
from emubroker.schemas.resolution import can_read


def record(*fields: dict[str, Any], name: str = "User", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


NAME = {"name": "name", "type": "string"}
AGE_DEFAULT = {"name": "age", "type": "int", "default": 0}
AGE = {"name": "age", "type": "int"}

V1 = record(NAME)
WITH_DEFAULT = record(NAME, AGE_DEFAULT)
WITHOUT_DEFAULT = record(NAME, AGE)


def readable(reader: Any, writer: Any) -> str | None:
    """``can_read`` on JSON documents."""
    return can_read(parse_avro(json.dumps(reader)), parse_avro(json.dumps(writer)))


@pytest.mark.parametrize(
    ("reader", "writer", "ok"),
    [
        ("int", "int", True),
        ("long", "int", True),  # promotions
        ("float", "long", True),
        ("double", "float", True),
        ("bytes", "string", True),
        ("string", "bytes", True),
        ("int", "long", False),  # no demotion
        ("string", "int", False),
        (["null", "string"], "string", True),  # reader union has a branch for the writer
        ("string", ["null", "string"], False),  # the writer's null branch is unreadable
        (["null", "long"], ["null", "int"], True),  # every writer branch finds a reader branch
        ({"type": "array", "items": "long"}, {"type": "array", "items": "int"}, True),
        ({"type": "map", "values": "int"}, {"type": "map", "values": "long"}, False),
        ({"type": "string", "logicalType": "uuid"}, "string", True),  # logical types ignored
    ],
)
def test_primitive_and_structural_resolution(reader: Any, writer: Any, ok: bool) -> None:
    result = readable(reader, writer)
    assert (result is None) is ok, result


def test_record_fields_need_a_writer_field_or_a_default() -> None:
    assert readable(WITH_DEFAULT, V1) is None
    problem = readable(WITHOUT_DEFAULT, V1)
    assert problem is not None
    assert "age" in problem
    # The writer's extra fields are skipped.
    assert readable(V1, WITHOUT_DEFAULT) is None


def test_record_names_are_not_compared() -> None:
    # Resolver.RecordAdjust matches fields by name and never looks at the records' names.
    other = record(NAME, name="Person", namespace="elsewhere")
    assert readable(other, V1) is None
    assert readable(V1, other) is None


def test_field_aliases_find_renamed_fields() -> None:
    renamed = record({"name": "full_name", "type": "string", "aliases": ["name"]})
    assert readable(renamed, V1) is None
    plain = record({"name": "full_name", "type": "string"})
    assert readable(plain, V1) is not None


def test_field_aliases_apply_to_the_writer_record_of_that_name_or_alias() -> None:
    # Schema.applyAliases keys field aliases by the reader record's full name (and aliases).
    renamed = {"name": "full_name", "type": "string", "aliases": ["name"]}
    elsewhere = record(renamed, name="Person")
    assert readable(elsewhere, V1) is not None
    aliased = record(renamed, name="Person", aliases=["User"])
    assert readable(aliased, V1) is None


def test_field_aliases_that_collide_with_a_writer_field_are_incompatible() -> None:
    reader = record({"name": "b", "type": "string", "aliases": ["a"]})
    writer = record({"name": "a", "type": "string"}, {"name": "b", "type": "string"})
    assert "two fields" in (readable(reader, writer) or "")


def enum(*symbols: str, name: str = "E", **extra: Any) -> Any:
    return parse_avro(json.dumps({"type": "enum", "name": name, "symbols": symbols, **extra}))


def test_enum_names_are_compared_unqualified_and_through_aliases() -> None:
    assert can_read(enum("A", name="a.E"), enum("A", name="b.E")) is None
    assert can_read(enum("A", name="F"), enum("A", name="E")) is not None
    assert can_read(enum("A", name="F", aliases=["E"]), enum("A", name="E")) is None


def test_writer_enum_symbols_the_reader_lacks_are_left_to_read_time() -> None:
    # The resolving grammar maps an unknown symbol to the reader's default or to a failure when
    # such a value is read (Symbol.EnumAdjustAction), which SchemaValidator does not count.
    assert can_read(enum("A", "B", "C"), enum("A", "B")) is None
    assert can_read(enum("A", "B"), enum("A", "B", "C")) is None
    assert can_read(enum("A", "B", default="A"), enum("A", "B", "C")) is None


def test_fixed_sizes_must_match() -> None:
    def fixed(size: int) -> Any:
        return parse_avro(json.dumps({"type": "fixed", "name": "F", "size": size}))

    assert can_read(fixed(4), fixed(4)) is None
    assert can_read(fixed(4), fixed(8)) is not None


def test_recursive_and_namespaced_types() -> None:
    linked = {
        "type": "record",
        "name": "Node",
        "namespace": "com.example",
        "fields": [
            {"name": "value", "type": "int"},
            {"name": "next", "type": ["null", "Node"], "default": None},
        ],
    }
    widened = json.loads(json.dumps(linked))
    widened["fields"][0]["type"] = "long"
    assert readable(widened, linked) is None
    assert readable(linked, widened) is not None
    qualified = {
        "type": "record",
        "name": "Outer",
        "namespace": "a.b",
        "fields": [
            {"name": "x", "type": {"type": "fixed", "name": "Hash", "size": 2}},
            {"name": "y", "type": "a.b.Hash"},
            {"name": "z", "type": "Hash"},
        ],
    }
    parse_avro(json.dumps(qualified))


# ---- reader unions: a branch is picked, then resolved (Resolver.ReaderUnion) -------------------


def test_a_reader_union_picks_the_branch_of_the_writers_type_first() -> None:
    assert readable(["null", "string"], "string") is None
    assert readable(["string", "float", "long"], "int") is None  # the first it promotes to
    assert readable(["null", "boolean"], "int") is not None


def test_a_picked_record_branch_must_resolve_even_if_a_later_one_would() -> None:
    # The first record branch whose fields resolve at their top level is picked; a failure
    # deeper down (array items) is found only after the choice, so Y is never tried.
    ints = {"name": "x", "type": {"type": "array", "items": "int"}}
    strings = {"name": "x", "type": {"type": "array", "items": "string"}}
    writer = record(ints, name="W")
    assert readable([record(strings, name="X"), record(ints, name="Y")], writer) is not None
    assert readable([record(ints, name="Y"), record(strings, name="X")], writer) is None
    # A top-level mismatch rules a branch out, so the next record branch gets its chance.
    flat = record({"name": "x", "type": "string"}, name="X")
    assert readable([flat, record(ints, name="Y")], writer) is None
    # A branch of the writer's own full name is taken whatever its fields.
    assert readable([record(strings, name="W"), record(ints, name="Y")], writer) is not None


def test_named_branches_match_by_full_name() -> None:
    writer = {"type": "enum", "name": "E", "namespace": "a", "symbols": ["A"]}
    reader_enum = {"type": "enum", "name": "E", "namespace": "b", "symbols": ["A"]}
    assert readable(reader_enum, writer) is None  # alone: unqualified names are compared
    assert readable(["null", reader_enum], writer) is not None  # in a union: full names


def test_equivalent_unions_resolve_branch_by_branch() -> None:
    # Resolver.unionEquiv compares unqualified names, so these match although, branch by
    # branch, a.E would find no b.E in the reader's union.
    writer = ["null", {"type": "enum", "name": "E", "namespace": "a", "symbols": ["A", "B"]}]
    reader = ["null", {"type": "enum", "name": "E", "namespace": "b", "symbols": ["A", "B"]}]
    assert readable(reader, writer) is None
    fewer = ["null", {"type": "enum", "name": "E", "namespace": "b", "symbols": ["A"]}]
    assert readable(fewer, writer) is not None
