"""Schema compatibility: Pulsar's strategies over AVRO, JSON and KEY_VALUE schemas (pure).

What Pulsar's ``SchemaRegistryServiceImpl`` decides when a producer brings a schema the topic does
not have yet (``putSchemaIfAbsent``), and when a consumer brings one
(``checkConsumerCompatibility``); the registry calls these functions with the topic's *history*:
its versions after the last deletion, oldest first.

Strategies (``SchemaCompatibilityStrategy``, names exactly as Pulsar's):

* ``ALWAYS_COMPATIBLE``: anything goes, even a change of schema type.
* ``ALWAYS_INCOMPATIBLE``: no new schema is accepted (an identical one is, by the registry, which
  returns the existing version before any check); so is ``UNDEFINED`` if it ever gets here.
* ``BACKWARD``: the new schema can read data written with the latest one; ``FORWARD``: the latest
  can read data written with the new one; ``FULL``: both. The ``*_TRANSITIVE`` forms check against
  every version of the history instead of the latest only.

Other rules, in Pulsar's order: a new schema whose type differs from the checked version(s) is
incompatible; byte-identical data is compatible with the latest version without any check.
AVRO and PROTOBUF data are Avro schemas checked by Avro's resolution rules as Pulsar's validator
applies them (:mod:`emubroker.schemas.resolution`); JSON data is an Avro schema too (what every
current client sends), with Pulsar's leniency for the legacy Jackson JSON-schema format; KEY_VALUE
checks its key and value parts separately; every other type is refused only under
``ALWAYS_INCOMPATIBLE``.
"""

from __future__ import annotations

import enum
import json
import struct
from typing import TYPE_CHECKING

import msgspec

from protocol.commands import SchemaType
from protocol.errors import IncompatibleSchemaError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from emubroker.schemas.avro import AvroType

__all__ = [
    "CompatibilityStrategy",
    "SchemaData",
    "check_compatible",
    "check_consumer_compatible",
    "key_value_parts",
    "same_schema",
    "schema_type_from_name",
    "schema_type_name",
]


class CompatibilityStrategy(enum.StrEnum):
    """Pulsar's ``SchemaCompatibilityStrategy``."""

    UNDEFINED = "UNDEFINED"
    ALWAYS_INCOMPATIBLE = "ALWAYS_INCOMPATIBLE"
    ALWAYS_COMPATIBLE = "ALWAYS_COMPATIBLE"
    BACKWARD = "BACKWARD"
    FORWARD = "FORWARD"
    FULL = "FULL"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @property
    def transitive(self) -> bool:
        """Checked against every version rather than the latest."""
        return self.name.endswith("_TRANSITIVE")

    @classmethod
    def parse(cls, name: str) -> CompatibilityStrategy:
        """A strategy from its name, or from a legacy ``SchemaAutoUpdateCompatibilityStrategy``.

        Raises:
            ValueError: Neither kind of name.
        """
        try:
            return cls(name)
        except ValueError:
            pass
        legacy = _AUTO_UPDATE.get(name)
        if legacy is None:
            raise ValueError(f"unknown schema compatibility strategy {name!r}") from None
        return legacy


# Policies.schema_auto_update_compatibility_strategy, the predecessor of the namespace strategy
# (SchemaCompatibilityStrategy.fromAutoUpdatePolicy).
_AUTO_UPDATE = {
    "AutoUpdateDisabled": CompatibilityStrategy.ALWAYS_INCOMPATIBLE,
    "Backward": CompatibilityStrategy.BACKWARD,
    "Forward": CompatibilityStrategy.FORWARD,
    "Full": CompatibilityStrategy.FULL,
    "AlwaysCompatible": CompatibilityStrategy.ALWAYS_COMPATIBLE,
    "BackwardTransitive": CompatibilityStrategy.BACKWARD_TRANSITIVE,
    "ForwardTransitive": CompatibilityStrategy.FORWARD_TRANSITIVE,
    "FullTransitive": CompatibilityStrategy.FULL_TRANSITIVE,
}

_S = CompatibilityStrategy
_CAN_READ_OLD = frozenset({_S.BACKWARD, _S.BACKWARD_TRANSITIVE, _S.FULL, _S.FULL_TRANSITIVE})
_OLD_CAN_READ = frozenset({_S.FORWARD, _S.FORWARD_TRANSITIVE, _S.FULL, _S.FULL_TRANSITIVE})

_JAVA_NAMES = {SchemaType.BOOL: "BOOLEAN"}  # the only wire enum name Pulsar's REST spells otherwise


def schema_type_name(schema_type: SchemaType) -> str:
    """Pulsar's (Java, REST) name of a schema type: ``AVRO``, ``BOOLEAN``, ``KEY_VALUE`` ..."""
    return _JAVA_NAMES.get(schema_type, schema_type.name)


def schema_type_from_name(name: str) -> SchemaType:
    """The wire schema type of a Pulsar type name (``BYTES`` is no schema: ``NONE``).

    Raises:
        ValueError: Not a schema type name.
    """
    upper = name.upper()
    if upper in ("BYTES", "NONE"):
        return SchemaType.NONE
    if upper == "BOOLEAN":
        return SchemaType.BOOL
    try:
        return SchemaType[upper]
    except KeyError:
        raise ValueError(f"unknown schema type {name!r}") from None


class SchemaData(msgspec.Struct, frozen=True):
    """One schema as the compatibility rules see it.

    Attributes:
        type: The schema type.
        data: The schema definition (an Avro schema's JSON for AVRO and JSON, empty for
            primitives, the encoded pair for KEY_VALUE).
        properties: The schema's properties (KEY_VALUE keeps its parts' types there).
    """

    type: SchemaType
    data: bytes
    properties: dict[str, str] = msgspec.field(default_factory=dict)


_AVRO_DATA = frozenset({SchemaType.AVRO, SchemaType.JSON, SchemaType.PROTOBUF})


def same_schema(a: SchemaData, b: SchemaData) -> bool:
    """Whether two schemas are the same version (``getSchemaVersionBySchemaData``).

    Avro-based types compare the parsed definition (whitespace and key order do not matter);
    the others compare bytes. The types must be equal either way.
    """
    if a.type != b.type:
        return False
    if a.data == b.data:
        return True
    if a.type in _AVRO_DATA:
        try:
            return bool(json.loads(a.data) == json.loads(b.data))
        except ValueError:
            return False
    return False


def check_compatible(
    history: Sequence[SchemaData], new: SchemaData, strategy: CompatibilityStrategy
) -> None:
    """Check whether ``new`` may become the next version (Pulsar's ``putSchemaIfAbsent``).

    Args:
        history: The topic's versions after its last deletion, oldest first.
        new: The candidate schema.
        strategy: The topic's resolved strategy.

    Raises:
        IncompatibleSchemaError: It may not; the message says why.
    """
    if not history or strategy is _S.ALWAYS_COMPATIBLE:
        return
    if strategy.transitive:
        _check_all(history, new, strategy)
    else:
        _check_latest(history[-1], new, strategy)


def check_consumer_compatible(
    history: Sequence[SchemaData], new: SchemaData, strategy: CompatibilityStrategy
) -> None:
    """Check whether a consumer with schema ``new`` may read the topic.

    Pulsar's ``checkConsumerCompatibility``.

    A consumer only reads, so the non-transitive strategies and ``FORWARD_TRANSITIVE`` ask for
    ``BACKWARD`` against the latest version; the other transitive ones check every version.

    Raises:
        IncompatibleSchemaError: The consumer's schema cannot be used; also when the topic has
            no schema to check against (the caller decides whether to register it instead).
    """
    if strategy is _S.ALWAYS_COMPATIBLE:
        return
    if not history:
        raise IncompatibleSchemaError("Topic does not have schema to check")
    if strategy in (_S.BACKWARD, _S.FORWARD, _S.FORWARD_TRANSITIVE, _S.FULL):
        _check_latest(history[-1], new, _S.BACKWARD)
    else:
        _check_all(history, new, strategy)


def _check_latest(latest: SchemaData, new: SchemaData, strategy: CompatibilityStrategy) -> None:
    if strategy is _S.ALWAYS_COMPATIBLE:
        return
    _same_type([latest], new)
    if latest.data == new.data:
        return  # SchemaHash equality: nothing to check
    _check_typed([latest], new, strategy, single=True)


def _check_all(
    history: Sequence[SchemaData], new: SchemaData, strategy: CompatibilityStrategy
) -> None:
    if strategy is _S.ALWAYS_COMPATIBLE:
        return
    _same_type(history, new)
    _check_typed(history, new, strategy, single=False)


def _same_type(history: Sequence[SchemaData], new: SchemaData) -> None:
    for old in history:
        if old.type != new.type:
            raise IncompatibleSchemaError(
                f"Incompatible schema: exists schema type {schema_type_name(old.type)}, "
                f"new schema type {schema_type_name(new.type)}"
            )


def _check_typed(
    history: Sequence[SchemaData],
    new: SchemaData,
    strategy: CompatibilityStrategy,
    *,
    single: bool,
) -> None:
    if new.type is SchemaType.JSON and single:
        _check_json(history[0], new, strategy)
    elif new.type in _AVRO_DATA:
        _check_avro([old.data for old in history], new.data, strategy)
    elif new.type is SchemaType.KEY_VALUE:
        _check_key_value(history, new, strategy)
    elif strategy is _S.ALWAYS_INCOMPATIBLE:
        # SchemaCompatibilityCheck.DEFAULT: only this strategy refuses a primitive schema.
        raise IncompatibleSchemaError("Schema compatibility strategy is ALWAYS_INCOMPATIBLE")


def _check_avro(history: Sequence[bytes], new: bytes, strategy: CompatibilityStrategy) -> None:
    if strategy not in _CAN_READ_OLD and strategy not in _OLD_CAN_READ:
        # ALWAYS_INCOMPATIBLE and UNDEFINED: Pulsar's NeverSchemaValidator.
        raise IncompatibleSchemaError(f"Schema compatibility strategy is {strategy}")
    # The Avro parser and resolution rules load with the first Avro schema, not with the broker.
    from emubroker.schemas.avro import AvroSchemaError, parse_avro

    try:
        candidate = parse_avro(new)
        olds = [parse_avro(data) for data in history]
    except AvroSchemaError as exc:
        raise IncompatibleSchemaError(f"Error during schema parsing: {exc}") from None
    for old in reversed(olds):  # newest first, as Avro's validateAll iterates
        _avro_pair(old, candidate, strategy)


def _avro_pair(old: AvroType, new: AvroType, strategy: CompatibilityStrategy) -> None:
    from emubroker.schemas.resolution import can_read

    problem = None
    if strategy in _CAN_READ_OLD:
        problem = can_read(new, old)
        if problem:
            problem = f"new schema cannot read data written with an existing one: {problem}"
    if problem is None and strategy in _OLD_CAN_READ:
        problem = can_read(old, new)
        if problem:
            problem = f"an existing schema cannot read data written with the new one: {problem}"
    if problem:
        raise IncompatibleSchemaError(
            f"Error during schema compatibility check with strategy {strategy}: {problem}"
        )


def _is_avro(data: bytes) -> bool:
    from emubroker.schemas.avro import AvroSchemaError, parse_avro

    try:
        parse_avro(data)
    except AvroSchemaError:
        return False
    return True


def _is_legacy_json_schema(data: bytes) -> bool:
    # The pre-2.x Jackson JsonSchema format: a JSON object that is not an Avro schema.
    try:
        return isinstance(json.loads(data), dict)
    except ValueError:
        return False


def _check_json(old: SchemaData, new: SchemaData, strategy: CompatibilityStrategy) -> None:
    # JsonSchemaCompatibilityCheck.checkCompatible(from, to): Avro rules when both are Avro
    # definitions; legacy JSON-schema data on either side is accepted as an upgrade path.
    if _is_avro(old.data):
        if _is_avro(new.data):
            _check_avro([old.data], new.data, strategy)
        elif not _is_legacy_json_schema(new.data):
            raise IncompatibleSchemaError("Unknown schema format")
    elif _is_legacy_json_schema(old.data):
        if _is_avro(new.data):
            return
        if not _is_legacy_json_schema(new.data):
            raise IncompatibleSchemaError("Unknown schema format")
        if json.loads(old.data).get("id") != json.loads(new.data).get("id"):
            raise IncompatibleSchemaError("Incompatible Schema: the JSON schema ids differ")
    # An existing schema in an unknown format is overwritten, as Pulsar does.


_I32 = struct.Struct(">i")


def key_value_parts(schema: SchemaData) -> tuple[SchemaData, SchemaData]:
    """Split KEY_VALUE data: ``| i32 len | key data | i32 len | value data |`` (-1 = null)."""
    data, pos, parts = schema.data, 0, []
    for side in ("key", "value"):
        if len(data) - pos < 4:
            raise IncompatibleSchemaError("KEY_VALUE schema data is truncated")
        (size,) = _I32.unpack_from(data, pos)
        pos += 4
        chunk = b""
        if size > 0:
            if size > len(data) - pos:
                raise IncompatibleSchemaError("KEY_VALUE schema data is truncated")
            chunk = data[pos : pos + size]
            pos += size
        try:
            kind = schema_type_from_name(schema.properties.get(f"{side}.schema.type", "BYTES"))
        except ValueError as exc:
            raise IncompatibleSchemaError(f"KEY_VALUE {side} schema: {exc}") from None
        parts.append(SchemaData(kind, chunk))
    return parts[0], parts[1]


def _check_key_value(
    history: Sequence[SchemaData], new: SchemaData, strategy: CompatibilityStrategy
) -> None:
    new_key, new_value = key_value_parts(new)
    old_keys, old_values = [], []
    for old in history:
        key, value = key_value_parts(old)
        if key.type != new_key.type or value.type != new_value.type:
            raise IncompatibleSchemaError("Key schemas or Value schemas are different schema type")
        old_keys.append(key)
        old_values.append(value)
    _check_typed(old_keys, new_key, strategy, single=False)
    _check_typed(old_values, new_value, strategy, single=False)
