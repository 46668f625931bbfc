"""What every trace table is: a msgspec record, a major version, and the Arrow schema they make.

The traces (loadgen's ``sends``/``receives``/``seconds``/``events``, the brokers' ``dispatch``
and ``loadbalance``) follow one rule (STYLE.md rule 6): a table only grows, new fields go last
and have defaults; a field is never renamed, reordered or retyped. The version a file carries is
therefore a *major* version: it changes only when that rule is broken. A reader refuses only a
major version it does not know, and gives the columns an older file lacks their defaults
(:meth:`TraceTable.absent`), so a run written before a column was added stays readable.

pyarrow is imported on first use: a broker that writes no trace never loads it (importing it
costs every broker ~5 % of its start-up, docs/performance.md, cluster start-up).
"""

from __future__ import annotations

import functools
import types
from typing import TYPE_CHECKING, Any, Union, get_args, get_origin

import msgspec

if TYPE_CHECKING:
    from collections.abc import Collection

    import pyarrow as pa

__all__ = ["TraceTable", "UnreadableTraceError", "plain_type"]


class UnreadableTraceError(Exception):
    """A trace file this reader cannot read: an unknown major version or a required column gone."""


class TraceTable(msgspec.Struct, frozen=True, dict=True):  # dict: the cached properties
    """One trace table.

    Args:
        name: The table's name (its directory in a run: ``sends/``, ``dispatch/``, ...).
        record: Its row type; field order is file order.
        version: Its major version (the ``schema_version`` written with every file).
        metadata_prefix: The Arrow schema metadata keys' prefix (``loadgen``, ``emubroker``).
        metadata_name: The key (after the prefix) that names the table (``table``, ``trace``).
    """

    name: str
    record: type[msgspec.Struct]
    version: int
    metadata_prefix: str
    metadata_name: str

    @functools.cached_property
    def fields(self) -> tuple[msgspec.structs.FieldInfo, ...]:
        return msgspec.structs.fields(self.record)

    @functools.cached_property
    def field_names(self) -> tuple[str, ...]:
        """The columns, in file order."""
        # Not from self.fields: that evaluates the record's annotations (~1 ms a table), and
        # the broker's trace modules read the names at import.
        return self.record.__struct_fields__

    @functools.cached_property
    def defaults(self) -> dict[str, Any]:
        """The columns with a default (every column added after the first version), by name."""
        return {field.name: field.default for field in self.fields if not field.required}

    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema of a file of this table, its name and version in the metadata."""
        return _arrow_schema(self)

    @functools.cached_property
    def int64_columns(self) -> frozenset[str]:
        """The integer columns that are never null (loadgen buffers them as ``array("q")``)."""
        return frozenset(
            field.name
            for field in self.fields
            if plain_type(field.type) == (int, False)  # not Optional, not bool
        )

    def check_version(self, found: object, where: str) -> None:
        """Refuse a major version this reader does not know.

        Raises:
            UnreadableTraceError: ``found`` is not this table's major version.
        """
        if found != self.version:
            raise UnreadableTraceError(
                f"{where}: {self.name} schema version {found!r} is not one this reader knows "
                f"({self.version}); read it with the emubroker that wrote it"
            )

    def absent(self, present: Collection[str], columns: tuple[str, ...] = ()) -> dict[str, Any]:
        """The wanted columns a file lacks, each with its default (an older file's columns).

        Args:
            present: The file's columns.
            columns: The columns wanted (all of the table's when empty).

        Returns:
            ``{column: default}`` for each wanted column not present.

        Raises:
            UnreadableTraceError: A wanted column is absent and has no default: it was there
                from the table's first version, so the file is not this table's.
        """
        wanted = columns or self.field_names
        filled: dict[str, Any] = {}
        missing = []
        for name in wanted:
            if name in present:
                continue
            if name in self.defaults:
                filled[name] = self.defaults[name]
            else:
                missing.append(name)
        if missing:
            raise UnreadableTraceError(
                f"table {self.name} lacks column(s) {', '.join(missing)} of its schema"
            )
        return filled


def plain_type(annotation: Any) -> tuple[Any, bool]:
    """(the type, nullable) of a field annotation ``T`` or ``T | None``."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [arg for arg in get_args(annotation) if arg is not type(None)]
        (plain,) = args
        return plain, True
    return annotation, False


@functools.cache
def _arrow_schema(table: TraceTable) -> pa.Schema:
    import pyarrow as pa

    arrow_types: dict[Any, Any] = {
        int: pa.int64(),
        float: pa.float64(),
        str: pa.string(),
        bool: pa.bool_(),
    }
    fields = []
    for field in table.fields:
        plain, nullable = plain_type(field.type)
        fields.append(pa.field(field.name, arrow_types[plain], nullable=nullable))
    prefix = table.metadata_prefix
    return pa.schema(
        fields,
        metadata={
            f"{prefix}.{table.metadata_name}".encode(): table.name.encode(),
            f"{prefix}.schema_version".encode(): str(table.version).encode(),
        },
    )
