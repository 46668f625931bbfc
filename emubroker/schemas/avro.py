"""Avro schemas parsed into a small type model, refusing what Avro's Java parser refuses.

Pulsar parses every schema it checks with Avro's ``Schema.Parser`` (``setValidateDefaults
(false)``), and a schema that does not parse is incompatible. Besides JSON shape, that parser
refuses: a type defined twice, an unknown type name, a record without a fields array or with two
fields of one name, an enum with a repeated symbol or a default outside its symbols, a fixed
without a non-negative size, a union inside a union and a union with two branches of one type
(two named branches of one full name, or two of an unnamed type such as two arrays).
Defaults are not validated. Whether one parsed schema can read data written with another is
:mod:`emubroker.schemas.resolution`.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "AvroArray",
    "AvroEnum",
    "AvroField",
    "AvroFixed",
    "AvroMap",
    "AvroPrimitive",
    "AvroRecord",
    "AvroSchemaError",
    "AvroType",
    "AvroUnion",
    "kind_of",
    "parse_avro",
]

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


class AvroSchemaError(ValueError):
    """The text is not an Avro schema."""


class AvroPrimitive:
    __slots__ = ("kind",)

    def __init__(self, kind: str) -> None:
        self.kind = kind


class _Named:
    __slots__ = ("aliases", "fullname", "name")

    def __init__(self, fullname: str, aliases: frozenset[str]) -> None:
        self.fullname = fullname
        self.name = fullname.rpartition(".")[2]
        self.aliases = aliases


class AvroField:
    __slots__ = ("aliases", "has_default", "name", "type")

    def __init__(
        self, name: str, type_: AvroType, aliases: frozenset[str], has_default: bool
    ) -> None:
        self.name = name
        self.type = type_
        self.aliases = aliases
        self.has_default = has_default


class AvroRecord(_Named):
    __slots__ = ("fields",)

    def __init__(self, fullname: str, aliases: frozenset[str]) -> None:
        super().__init__(fullname, aliases)
        self.fields: list[AvroField] = []  # filled after registration: records may recurse


class AvroEnum(_Named):
    __slots__ = ("default", "symbols")

    def __init__(
        self, fullname: str, aliases: frozenset[str], symbols: tuple[str, ...], default: Any
    ) -> None:
        super().__init__(fullname, aliases)
        self.symbols = symbols
        self.default = default


class AvroFixed(_Named):
    __slots__ = ("size",)

    def __init__(self, fullname: str, aliases: frozenset[str], size: int) -> None:
        super().__init__(fullname, aliases)
        self.size = size


class AvroArray:
    __slots__ = ("items",)

    def __init__(self, items: AvroType) -> None:
        self.items = items


class AvroMap:
    __slots__ = ("values",)

    def __init__(self, values: AvroType) -> None:
        self.values = values


class AvroUnion:
    __slots__ = ("branches",)

    def __init__(self, branches: tuple[AvroType, ...]) -> None:
        self.branches = branches


AvroType = AvroPrimitive | AvroRecord | AvroEnum | AvroFixed | AvroArray | AvroMap | AvroUnion


# ---- parsing ------------------------------------------------------------------------------------


def parse_avro(text: str | bytes) -> AvroType:
    """Parse an Avro schema from its JSON text.

    Raises:
        AvroSchemaError: Not JSON, or not a valid Avro schema.
    """
    try:
        doc = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise AvroSchemaError(f"not JSON: {exc}") from None
    return _Parser().parse(doc, "")


class _Parser:
    def __init__(self) -> None:
        self.names: dict[str, AvroType] = {}

    def parse(self, doc: Any, namespace: str) -> AvroType:
        if isinstance(doc, str):
            return self._reference(doc, namespace)
        if isinstance(doc, list):
            return self._union(doc, namespace)
        if not isinstance(doc, dict):
            raise AvroSchemaError(f"a schema is a string, an array or an object, not {doc!r}")
        kind = doc.get("type")
        if kind in ("record", "error"):
            record = AvroRecord(*self._naming(doc, namespace))
            self._register(record)
            inner = record.fullname.rpartition(".")[0]
            fields = doc.get("fields")
            if not isinstance(fields, list):
                raise AvroSchemaError(f"record {record.fullname} has no fields array")
            for field in fields:
                parsed = self._field(field, inner)
                if any(f.name == parsed.name for f in record.fields):
                    raise AvroSchemaError(f"duplicate field {parsed.name} in {record.fullname}")
                record.fields.append(parsed)
            return record
        if kind == "enum":
            fullname, aliases = self._naming(doc, namespace)
            symbols = doc.get("symbols")
            if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
                raise AvroSchemaError(f"enum {fullname} needs a symbols array of strings")
            if len(set(symbols)) != len(symbols):
                raise AvroSchemaError(f"enum {fullname} repeats a symbol")
            default = doc.get("default")
            if default is not None and default not in symbols:
                raise AvroSchemaError(f"enum {fullname}'s default {default!r} is not a symbol")
            enum = AvroEnum(fullname, aliases, tuple(symbols), default)
            self._register(enum)
            return enum
        if kind == "fixed":
            fullname, aliases = self._naming(doc, namespace)
            size = doc.get("size")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise AvroSchemaError(f"fixed {fullname} needs a non-negative integer size")
            fixed = AvroFixed(fullname, aliases, size)
            self._register(fixed)
            return fixed
        if kind == "array":
            if "items" not in doc:
                raise AvroSchemaError("array without items")
            return AvroArray(self.parse(doc["items"], namespace))
        if kind == "map":
            if "values" not in doc:
                raise AvroSchemaError("map without values")
            return AvroMap(self.parse(doc["values"], namespace))
        if isinstance(kind, (str, dict, list)):
            # {"type": "string", "logicalType": ...}, {"type": {...}} or a named reference.
            return self.parse(kind, namespace)
        raise AvroSchemaError(f"schema object without a valid type: {doc!r}")

    def _union(self, doc: list[Any], namespace: str) -> AvroUnion:
        branches = tuple(self.parse(branch, namespace) for branch in doc)
        seen: set[str] = set()
        for branch in branches:
            if isinstance(branch, AvroUnion):
                raise AvroSchemaError("a union cannot contain a union")
            # Java's UnionSchema indexes branches by full name: a named type's, else the type's.
            key = branch.fullname if isinstance(branch, _Named) else kind_of(branch)
            if key in seen:
                raise AvroSchemaError(f"a union has two {key} branches")
            seen.add(key)
        return AvroUnion(branches)

    def _naming(self, doc: dict[str, Any], namespace: str) -> tuple[str, frozenset[str]]:
        name = doc.get("name")
        if not isinstance(name, str) or not name:
            raise AvroSchemaError(f"named type without a name: {doc!r}")
        ns = doc.get("namespace")
        if "." not in name and isinstance(ns, str):
            namespace = ns
        fullname = name if "." in name or not namespace else f"{namespace}.{name}"
        space = fullname.rpartition(".")[0]
        aliases = frozenset(
            alias if "." in alias or not space else f"{space}.{alias}"
            for alias in doc.get("aliases") or ()
            if isinstance(alias, str)
        )
        return fullname, aliases

    def _register(self, named: AvroRecord | AvroEnum | AvroFixed) -> None:
        if named.fullname in self.names or named.fullname in PRIMITIVES:
            raise AvroSchemaError(f"type {named.fullname} is defined twice")
        self.names[named.fullname] = named

    def _reference(self, ref: str, namespace: str) -> AvroType:
        if ref in PRIMITIVES:
            return AvroPrimitive(ref)
        for candidate in (f"{namespace}.{ref}" if namespace and "." not in ref else None, ref):
            if candidate is not None and candidate in self.names:
                return self.names[candidate]
        raise AvroSchemaError(f"unknown type {ref!r}")

    def _field(self, doc: Any, namespace: str) -> AvroField:
        if not isinstance(doc, dict) or not isinstance(doc.get("name"), str) or "type" not in doc:
            raise AvroSchemaError(f"a record field needs a name and a type: {doc!r}")
        aliases = frozenset(a for a in doc.get("aliases") or () if isinstance(a, str))
        return AvroField(doc["name"], self.parse(doc["type"], namespace), aliases, "default" in doc)


def kind_of(t: AvroType) -> str:
    """The Avro type name: a primitive's, or ``record``, ``enum``, ``fixed``, ``array``..."""
    match t:
        case AvroPrimitive():
            return t.kind
        case AvroRecord():
            return "record"
        case AvroEnum():
            return "enum"
        case AvroFixed():
            return "fixed"
        case AvroArray():
            return "array"
        case AvroMap():
            return "map"
        case AvroUnion():
            return "union"
    raise AssertionError(f"not an Avro type: {t!r}")  # pragma: no cover
