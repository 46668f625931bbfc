"""Avro schemas, parsed just enough to decide whether one can read data written with another.

This is the *schema resolution* part of the Avro specification ("Schema Resolution"), the same
rules as Avro's ``SchemaCompatibility.checkReaderWriterCompatibility`` that Pulsar's
``AvroSchemaBasedCompatibilityCheck`` runs through ``SchemaValidatorBuilder``. A reader schema R
can read data written with a writer schema W when:

1. both have the same type and are primitives; or W's type is *promoted* to R's: int to long,
   float or double; long to float or double; float to double; string to bytes; bytes to string;
2. both are records with matching names (R's unqualified name equals W's, or W's full name is one
   of R's aliases), every field of R is either found in W (by name, or one of R's field aliases)
   with a readable type, or has a default; W's extra fields are skipped;
3. both are enums with matching names and every W symbol is an R symbol, unless R has a default;
4. both are fixed with matching names and sizes; both arrays (items readable) or maps (values
   readable);
5. W is a union: every branch of W is readable by R; R is a union (W is not): some branch of R
   reads W.

Recursive named types are handled as Avro does: a pair already under examination counts as
readable. Logical types are ignored (their underlying type decides). Defaults are not validated
(Pulsar parses with ``setValidateDefaults(false)``).
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
    "can_read",
    "parse_avro",
]

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})

_PROMOTIONS: dict[str, frozenset[str]] = {
    # reader type -> writer types it can read (Avro spec, "Schema Resolution").
    "long": frozenset({"int"}),
    "float": frozenset({"int", "long"}),
    "double": frozenset({"int", "long", "float"}),
    "bytes": frozenset({"string"}),
    "string": frozenset({"bytes"}),
}


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
        self, fullname: str, aliases: frozenset[str], symbols: tuple[str, ...], default: str | None
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
            return AvroUnion(tuple(self.parse(branch, namespace) for branch in doc))
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
                record.fields.append(self._field(field, inner))
            return record
        if kind == "enum":
            fullname, aliases = self._naming(doc, namespace)
            symbols = doc.get("symbols")
            if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
                raise AvroSchemaError(f"enum {fullname} needs a symbols array of strings")
            default = doc.get("default")
            enum = AvroEnum(
                fullname, aliases, tuple(symbols), default if isinstance(default, str) else None
            )
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


# ---- resolution ---------------------------------------------------------------------------------


def can_read(reader: AvroType, writer: AvroType) -> str | None:
    """Whether data written with ``writer`` can be read with ``reader``.

    Returns:
        None when it can, else the first reason it cannot (for error messages).
    """
    return _Resolver().check(reader, writer, "")


def _kind(t: AvroType) -> str:
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


class _Resolver:
    def __init__(self) -> None:
        self._in_progress: set[tuple[int, int]] = set()

    def check(self, reader: AvroType, writer: AvroType, where: str) -> str | None:
        key = (id(reader), id(writer))
        if key in self._in_progress:
            return None  # a recursive type: assume readable, as Avro's checker does
        self._in_progress.add(key)
        try:
            return self._check(reader, writer, where or "/")
        finally:
            self._in_progress.discard(key)

    def _check(self, reader: AvroType, writer: AvroType, where: str) -> str | None:
        if isinstance(writer, AvroUnion):
            # Rule 5: every writer branch must be readable (also when the reader is a union).
            for i, branch in enumerate(writer.branches):
                problem = self.check(reader, branch, f"{where}union[{i}]/")
                if problem:
                    return problem
            return None
        if isinstance(reader, AvroUnion):
            if any(self.check(branch, writer, where) is None for branch in reader.branches):
                return None
            return f"{where}: reader union lacks a branch for writer type {_kind(writer)}"
        rk, wk = _kind(reader), _kind(writer)
        if rk != wk:
            if wk in _PROMOTIONS.get(rk, ()):
                return None
            return f"{where}: reader type {rk} cannot read writer type {wk}"
        match reader, writer:
            case AvroRecord(), AvroRecord():
                return self._names(reader, writer, where) or self._fields(reader, writer, where)
            case AvroEnum(), AvroEnum():
                missing = [s for s in writer.symbols if s not in reader.symbols]
                if missing and reader.default is None:
                    return f"{where}: reader enum {reader.fullname} lacks symbols {missing}"
                return self._names(reader, writer, where)
            case AvroFixed(), AvroFixed():
                if reader.size != writer.size:
                    return f"{where}: fixed size {reader.size} != {writer.size}"
                return self._names(reader, writer, where)
            case AvroArray(), AvroArray():
                return self.check(reader.items, writer.items, f"{where}items/")
            case AvroMap(), AvroMap():
                return self.check(reader.values, writer.values, f"{where}values/")
        return None  # same primitive

    @staticmethod
    def _names(reader: _Named, writer: _Named, where: str) -> str | None:
        if reader.name == writer.name or writer.fullname in reader.aliases:
            return None
        return f"{where}: reader name {reader.fullname} does not match writer {writer.fullname}"

    def _fields(self, reader: AvroRecord, writer: AvroRecord, where: str) -> str | None:
        by_name = {field.name: field for field in writer.fields}
        for field in reader.fields:
            found = by_name.get(field.name)
            if found is None:
                found = next((by_name[a] for a in field.aliases if a in by_name), None)
            if found is None:
                if not field.has_default:
                    return (
                        f"{where}{field.name}: reader field is missing in the writer and has no "
                        "default"
                    )
                continue
            problem = self.check(field.type, found.type, f"{where}{field.name}/")
            if problem:
                return problem
        return None
