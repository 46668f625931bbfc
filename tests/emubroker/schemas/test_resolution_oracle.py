"""Our Avro resolution against the Avro project's own checker, on generated schema pairs.

The oracle is ``avro.compatibility`` from the ``avro`` package (the Avro project's Python port of
Java's ``SchemaCompatibility``). It is not quite the check Pulsar runs: Pulsar's
``SchemaValidator`` asks Avro's resolving grammar instead (see
:mod:`emubroker.schemas.resolution`), and the two differ in exactly two ways on the schemas
generated here, so the oracle is handed a copy of each pair with those two things neutralised:

* the grammar does not compare record names, ``SchemaCompatibility`` does: the oracle's copy
  keeps record names equal where ours were renamed;
* the grammar leaves writer enum symbols the reader lacks to read time, ``SchemaCompatibility``
  refuses them unless the reader enum has a default: the oracle's copy gives every enum one.

Everything else (field matching, defaults, promotions, enum and fixed names, fixed sizes, arrays,
maps, unions on either side) must agree. The generated schemas keep to what both checkers take
the same way: no namespaces, no aliases, no recursion, at most one branch of each kind in a union
(the grammar *picks* a reader branch where ``SchemaCompatibility`` tries them all, which only
matters with several record branches). Those rules have their own tests in ``test_compat.py``.

Why not fastavro or ``avro.io``, writing with one schema and reading with the other: both
compare record names too, and decide per datum (a missing enum symbol or union branch fails only
when a value uses it), so neither sees the static verdict Pulsar's validator gives.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, replace
from typing import Any

import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType
from hypothesis import given, note, settings
from hypothesis import strategies as st

from emubroker.schemas.avro import parse_avro
from emubroker.schemas.resolution import can_read

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
FIELD_NAMES = ("a", "b", "c", "d")
SYMBOLS = ("A", "B", "C", "D")
SUFFIXES = ("", "2")  # a renamed named type: "R_a" becomes "R_a2"


# ---- a small model of Avro schemas, named by position ------------------------------------------


@dataclass(frozen=True)
class Prim:
    kind: str


@dataclass(frozen=True)
class Field:
    name: str
    type: Any
    default: bool


@dataclass(frozen=True)
class Rec:
    fields: tuple[Field, ...]
    suffix: str = ""


@dataclass(frozen=True)
class Enum:
    symbols: tuple[str, ...]
    suffix: str = ""


@dataclass(frozen=True)
class Fixed:
    size: int
    suffix: str = ""


@dataclass(frozen=True)
class Arr:
    items: Any


@dataclass(frozen=True)
class Map:
    values: Any


@dataclass(frozen=True)
class Union:
    branches: tuple[Any, ...]


def kind(t: Any) -> str:
    """A union may hold one branch of each kind (each primitive is a kind of its own)."""
    return t.kind if isinstance(t, Prim) else type(t).__name__


_NO_DEFAULT = object()


def default_of(t: Any) -> Any:
    """A valid default for ``t`` (a union's is its first branch's), or ``_NO_DEFAULT``."""
    match t:
        case Prim(kind="null"):
            return None
        case Prim(kind="boolean"):
            return False
        case Prim(kind="int" | "long"):
            return 0
        case Prim(kind="float" | "double"):
            return 0.5
        case Prim():
            return ""
        case Enum():
            return t.symbols[0]
        case Fixed():
            return "\u0000" * t.size
        case Arr():
            return []
        case Map():
            return {}
        case Union():
            return default_of(t.branches[0])
    return _NO_DEFAULT  # records: not worth generating


def to_avro(t: Any, path: str, *, oracle: bool) -> Any:
    """The schema's JSON; named types are named by where they sit, so a pair lines up."""
    match t:
        case Prim():
            return t.kind
        case Rec():
            fields = []
            for field in t.fields:
                doc = {
                    "name": field.name,
                    "type": to_avro(field.type, f"{path}_{field.name}", oracle=oracle),
                }
                default = default_of(field.type)
                if field.default and default is not _NO_DEFAULT:
                    doc["default"] = default
                fields.append(doc)
            name = f"R{path}" + ("" if oracle else t.suffix)
            return {"type": "record", "name": name, "fields": fields}
        case Enum():
            doc = {"type": "enum", "name": f"E{path}{t.suffix}", "symbols": list(t.symbols)}
            if oracle:
                doc["default"] = t.symbols[0]
            return doc
        case Fixed():
            return {"type": "fixed", "name": f"F{path}{t.suffix}", "size": t.size}
        case Arr():
            return {"type": "array", "items": to_avro(t.items, f"{path}_i", oracle=oracle)}
        case Map():
            return {"type": "map", "values": to_avro(t.values, f"{path}_v", oracle=oracle)}
        case Union():
            # A union holds one named type of each kind: its branches keep the union's place.
            return [to_avro(b, path, oracle=oracle) for b in t.branches]
    raise AssertionError(t)


# ---- generation: a base schema and two independent evolutions of it ----------------------------

symbol_sets = st.lists(st.sampled_from(SYMBOLS), min_size=1, max_size=3, unique=True).map(tuple)
suffixes = st.sampled_from(SUFFIXES)


@functools.cache
def types(depth: int, *, in_union: bool = False) -> st.SearchStrategy[Any]:
    leaves: list[st.SearchStrategy[Any]] = [
        st.sampled_from(PRIMITIVES).map(Prim),
        st.builds(Enum, symbol_sets, suffixes),
        st.builds(Fixed, st.integers(1, 2), suffixes),
    ]
    if depth <= 0:
        return st.one_of(leaves)
    inner = types(depth - 1)
    composites = [
        st.builds(Arr, inner),
        st.builds(Map, inner),
        records(depth - 1),
    ]
    if not in_union:
        composites.append(unions(depth - 1))
    return st.one_of(*leaves, *composites)


@functools.cache
def records(depth: int) -> st.SearchStrategy[Rec]:
    field = st.tuples(types(depth), st.booleans())
    return st.builds(
        lambda fields, suffix: Rec(
            tuple(Field(name, t, d) for name, (t, d) in zip(FIELD_NAMES, fields, strict=False)),
            suffix,
        ),
        st.lists(field, min_size=0, max_size=3),
        suffixes,
    )


@functools.cache
def unions(depth: int) -> st.SearchStrategy[Union]:
    return st.lists(types(depth, in_union=True), min_size=1, max_size=4, unique_by=kind).map(
        lambda branches: Union(tuple(branches))
    )


@st.composite
def evolved(draw: st.DrawFn, t: Any, depth: int = 2) -> Any:
    """``t`` with random changes: replaced outright, or changed in place part by part."""
    if draw(st.integers(0, 9)) == 0:
        return draw(types(depth, in_union=False))
    match t:
        case Prim():
            return Prim(draw(st.sampled_from(PRIMITIVES))) if draw(st.booleans()) else t
        case Rec():
            fields = [
                replace(f, type=draw(evolved(f.type)), default=draw(st.booleans()))
                for f in t.fields
                if draw(st.integers(0, 4)) > 0  # sometimes a field is removed
            ]
            free = [n for n in FIELD_NAMES if n not in {f.name for f in fields}]
            if free and draw(st.booleans()):
                fields.append(Field(free[0], draw(types(1)), draw(st.booleans())))
            return Rec(tuple(fields), draw(suffixes))
        case Enum():
            return Enum(draw(st.one_of(st.just(t.symbols), symbol_sets)), draw(suffixes))
        case Fixed():
            return Fixed(draw(st.sampled_from((t.size, 1, 2))), draw(suffixes))
        case Arr():
            return Arr(draw(evolved(t.items)))
        case Map():
            return Map(draw(evolved(t.values)))
        case Union():
            branches = [draw(evolved(b)) for b in t.branches if draw(st.integers(0, 4)) > 0]
            branches.append(draw(types(1, in_union=True)))
            unique = list({kind(b): b for b in branches if not isinstance(b, Union)}.values())
            return Union(tuple(unique)) if unique else t
    raise AssertionError(t)


@st.composite
def schema_pairs(draw: st.DrawFn) -> tuple[Any, Any]:
    base = draw(records(2))
    return draw(evolved(base)), draw(evolved(base))


# ---- the comparison ----------------------------------------------------------------------------


def oracle_can_read(reader: Any, writer: Any) -> bool:
    parsed = [avro.schema.parse(json.dumps(to_avro(t, "", oracle=True))) for t in (reader, writer)]
    result = ReaderWriterCompatibilityChecker().get_compatibility(*parsed)
    return result.compatibility is SchemaCompatibilityType.compatible


def our_can_read(reader: Any, writer: Any) -> bool:
    parsed = [parse_avro(json.dumps(to_avro(t, "", oracle=False))) for t in (reader, writer)]
    return can_read(*parsed) is None


@given(schema_pairs())
def test_resolution_agrees_with_the_avro_library(pair: tuple[Any, Any]) -> None:
    reader, writer = pair
    note(f"reader {json.dumps(to_avro(reader, '', oracle=False))}")
    note(f"writer {json.dumps(to_avro(writer, '', oracle=False))}")
    assert our_can_read(reader, writer) == oracle_can_read(reader, writer)
    assert our_can_read(writer, reader) == oracle_can_read(writer, reader)


def test_generated_pairs_are_often_compatible_and_often_not() -> None:
    # A generator that only made hopeless pairs would make the comparison above worthless.
    verdicts: list[bool] = []

    # A fixed sample: the share is a property of the generator, not of one random draw of 50.
    @settings(max_examples=200, derandomize=True)
    @given(schema_pairs())
    def collect(pair: tuple[Any, Any]) -> None:
        verdicts.append(our_can_read(*pair))

    collect()
    assert 0.2 < sum(verdicts) / len(verdicts) < 0.8, sum(verdicts) / len(verdicts)
