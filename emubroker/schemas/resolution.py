"""Whether data written with one Avro schema can be read with another, as Pulsar decides it.

Pulsar's ``AvroSchemaBasedCompatibilityCheck`` runs Avro's ``SchemaValidator`` (built by
``SchemaValidatorBuilder``: ``canReadStrategy``, ``canBeReadStrategy``, ``mutualReadStrategy``).
Those do not use Avro's ``SchemaCompatibility`` checker: ``ValidateMutualRead.canRead`` builds
the *resolving grammar* a decoder would run (``ResolvingGrammarGenerator`` over
``Resolver.resolve``) and refuses the pair when that grammar holds an error. So the rules are
the Avro specification's "Schema Resolution" as the Java library implements it:

1. **Aliases first.** The reader's aliases rename the writer before anything is compared: a
   writer named type whose full name is an alias of a reader named type takes that type's
   name; a writer record's field whose name is an alias of a field of the reader record with
   the writer record's (new) full name, or with that full name among its aliases, takes the
   field's name. Two writer fields of one name after that make the schemas incompatible.
2. **Records** are *not* compared by name. Each reader field is found in the writer by name,
   or has a default; writer fields the reader lacks are skipped; found fields resolve.
3. **Enums** need equal unqualified names. Writer symbols the reader lacks are *not* an error:
   the grammar maps them to the reader's default or to a failure when such a value is read,
   which the validator does not look at.
4. **Fixed** need equal unqualified names and sizes; **arrays** and **maps** need their items
   and values to resolve.
5. **Primitives** are equal or promoted: int to long, float or double; long to float or
   double; float to double; string to bytes and bytes to string.
6. **A writer union** whose branches match the reader union's one by one (same types, names,
   enum symbols, fixed sizes and record field names) resolves; otherwise every writer branch
   must resolve against the whole reader schema.
7. **A reader union** facing a writer that is not a union *picks* one branch, which must then
   resolve: the first branch of the writer's type (for named types, of the writer's full name;
   failing that, for a record, the first record branch whose own fields resolve at their top
   level, preferring one of the writer's unqualified name), else the first branch the writer's
   type promotes to. No such branch is an error, even if a later branch would have resolved.
8. **Recursion**: a pair of records already being resolved counts as resolved.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emubroker.schemas.avro import (
    AvroArray,
    AvroEnum,
    AvroFixed,
    AvroMap,
    AvroPrimitive,
    AvroRecord,
    AvroUnion,
    kind_of,
)

if TYPE_CHECKING:
    from emubroker.schemas.avro import AvroType

__all__ = ["can_read"]

# Writer type -> the reader types it is promoted to (Resolver.Promote.isValid).
_PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}


def can_read(reader: AvroType, writer: AvroType) -> str | None:
    """Whether data written with ``writer`` can be read with ``reader`` (see the module doc).

    Returns:
        None when it can, else a reason it cannot (for error messages).
    """
    resolver = _Resolver(reader)
    return _first_error(resolver.resolve(writer, reader, "/"), set())


class _Action:
    """One step of the resolving grammar: an error, or what must be resolved next."""

    __slots__ = ("error", "next")

    def __init__(self, error: str | None = None, next_: list[_Action] | None = None) -> None:
        self.error = error
        self.next = next_ if next_ is not None else []


_DONE = _Action()


def _first_error(action: _Action, visited: set[int]) -> str | None:
    # Symbol.hasErrors: walk the grammar once (recursive records loop back to themselves).
    if id(action) in visited:
        return None
    visited.add(id(action))
    if action.error is not None:
        return action.error
    for step in action.next:
        error = _first_error(step, visited)
        if error is not None:
            return error
    return None


class _Resolver:
    def __init__(self, reader: AvroType) -> None:
        # Schema.applyAliases, read off the reader once: named-type aliases and field aliases.
        self._renames: dict[str, str] = {}
        self._field_renames: dict[str, dict[str, str]] = {}
        self._collect_aliases(reader, set())
        self._records: dict[tuple[int, int], _Action] = {}

    def _collect_aliases(self, t: AvroType, seen: set[int]) -> None:
        match t:
            case AvroRecord():
                if id(t) in seen:
                    return
                seen.add(id(t))
                self._renames.update(dict.fromkeys(t.aliases, t.fullname))
                fields: dict[str, str] = {}
                for field in t.fields:
                    fields.update(dict.fromkeys(field.aliases, field.name))
                    self._collect_aliases(field.type, seen)
                if fields:
                    for name in (t.fullname, *t.aliases):
                        self._field_renames[name] = fields
            case AvroEnum() | AvroFixed():
                self._renames.update(dict.fromkeys(t.aliases, t.fullname))
            case AvroArray():
                self._collect_aliases(t.items, seen)
            case AvroMap():
                self._collect_aliases(t.values, seen)
            case AvroUnion():
                for branch in t.branches:
                    self._collect_aliases(branch, seen)

    def _fullname(self, writer: AvroRecord | AvroEnum | AvroFixed) -> str:
        return self._renames.get(writer.fullname, writer.fullname)

    def _name(self, writer: AvroRecord | AvroEnum | AvroFixed) -> str:
        return self._fullname(writer).rpartition(".")[2]

    def _field_names(self, writer: AvroRecord) -> list[str]:
        renames = self._field_renames.get(self._fullname(writer), {})
        return [renames.get(field.name, field.name) for field in writer.fields]

    # ---- Resolver.resolve --------------------------------------------------------------------

    def resolve(self, writer: AvroType, reader: AvroType, where: str) -> _Action:
        if isinstance(writer, AvroUnion):
            return self._writer_union(writer, reader, where)
        wk, rk = kind_of(writer), kind_of(reader)
        if wk == rk:
            match writer, reader:
                case AvroRecord(), AvroRecord():
                    return self._record(writer, reader, where)
                case AvroEnum(), AvroEnum():
                    return self._names(writer, reader, where) or _DONE
                case AvroFixed(), AvroFixed():
                    if problem := self._names(writer, reader, where):
                        return problem
                    if writer.size != reader.size:
                        return _Action(f"{where}: fixed size {reader.size} != {writer.size}")
                    return _DONE
                case AvroArray(), AvroArray():
                    return _Action(
                        next_=[self.resolve(writer.items, reader.items, f"{where}items/")]
                    )
                case AvroMap(), AvroMap():
                    return _Action(
                        next_=[self.resolve(writer.values, reader.values, f"{where}values/")]
                    )
            return _DONE  # the same primitive
        if isinstance(reader, AvroUnion):
            return self._reader_union(writer, reader, where)
        if rk in _PROMOTIONS.get(wk, ()):
            return _DONE
        return _Action(f"{where}: reader type {rk} cannot read writer type {wk}")

    def _names(
        self, writer: AvroEnum | AvroFixed, reader: AvroEnum | AvroFixed, where: str
    ) -> _Action | None:
        if self._name(writer) == reader.name:
            return None
        return _Action(
            f"{where}: reader name {reader.fullname} does not match writer {writer.fullname}"
        )

    def _record(self, writer: AvroRecord, reader: AvroRecord, where: str) -> _Action:
        key = (id(writer), id(reader))
        known = self._records.get(key)
        if known is not None:
            return known  # resolved, or being resolved further up (a recursive type)
        action = self._records[key] = _Action()
        names = self._field_names(writer)
        if len(set(names)) != len(names):
            action.error = (
                f"{where}: the reader's field aliases give the writer two fields of a name"
            )
            return action
        by_name = dict(zip(names, writer.fields, strict=True))
        for field in reader.fields:
            found = by_name.get(field.name)
            if found is not None:
                action.next.append(self.resolve(found.type, field.type, f"{where}{field.name}/"))
            elif not field.has_default:
                action.error = (
                    f"{where}{field.name}: reader field is missing in the writer and has no default"
                )
                action.next.clear()
                return action
        return action

    def _writer_union(self, writer: AvroUnion, reader: AvroType, where: str) -> _Action:
        if self._equivalent(writer, reader, set()):
            return _DONE
        return _Action(
            next_=[
                self.resolve(branch, reader, f"{where}union[{i}]/")
                for i, branch in enumerate(writer.branches)
            ]
        )

    def _reader_union(self, writer: AvroType, reader: AvroUnion, where: str) -> _Action:
        branch = self._pick_branch(writer, reader)
        if branch is None:
            return _Action(
                f"{where}: reader union lacks a branch for writer type {kind_of(writer)}"
            )
        return _Action(next_=[self.resolve(writer, branch, where)])

    def _pick_branch(self, writer: AvroType, reader: AvroUnion) -> AvroType | None:
        # Resolver.ReaderUnion.firstMatchingBranch.
        wk = kind_of(writer)
        structural: AvroRecord | None = None
        for branch in reader.branches:
            if kind_of(branch) != wk:
                continue
            if not isinstance(writer, AvroRecord | AvroEnum | AvroFixed):
                return branch
            assert isinstance(branch, AvroRecord | AvroEnum | AvroFixed)
            if self._fullname(writer) == branch.fullname:
                return branch
            if (
                isinstance(writer, AvroRecord)
                and isinstance(branch, AvroRecord)
                and self._fields_resolve(writer, branch)
                and (structural is None or self._name(writer) == branch.name)
            ):
                structural = branch
        if structural is not None:
            return structural
        promoted = _PROMOTIONS.get(wk, ())
        return next((b for b in reader.branches if kind_of(b) in promoted), None)

    def _fields_resolve(self, writer: AvroRecord, reader: AvroRecord) -> bool:
        # ReaderUnion.hasMatchError: only the record's own step and its fields' first steps.
        action = self._record(writer, reader, "/")
        return action.error is None and all(step.error is None for step in action.next)

    def _equivalent(self, writer: AvroType, reader: AvroType, seen: set[tuple[int, int]]) -> bool:
        # Resolver.unionEquiv: same shapes, unqualified names, symbols, sizes and field names.
        if kind_of(writer) != kind_of(reader):
            return False
        match writer, reader:
            case AvroRecord(), AvroRecord():
                if self._name(writer) != reader.name:
                    return False
                key = (id(writer), id(reader))
                if key in seen:
                    return True
                seen.add(key)
                return len(writer.fields) == len(reader.fields) and all(
                    name == r.name and self._equivalent(w.type, r.type, seen)
                    for name, w, r in zip(
                        self._field_names(writer), writer.fields, reader.fields, strict=True
                    )
                )
            case AvroEnum(), AvroEnum():
                return self._name(writer) == reader.name and writer.symbols == reader.symbols
            case AvroFixed(), AvroFixed():
                return self._name(writer) == reader.name and writer.size == reader.size
            case AvroArray(), AvroArray():
                return self._equivalent(writer.items, reader.items, seen)
            case AvroMap(), AvroMap():
                return self._equivalent(writer.values, reader.values, seen)
            case AvroUnion(), AvroUnion():
                return len(writer.branches) == len(reader.branches) and all(
                    self._equivalent(w, r, seen)
                    for w, r in zip(writer.branches, reader.branches, strict=True)
                )
            case AvroPrimitive(), AvroPrimitive():
                return True
        return False  # pragma: no cover - kinds are equal, so one case matched
