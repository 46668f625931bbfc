"""Hypothesis strategies for every protocol record, derived from the records themselves.

Nothing here lists fields by hand: a record's strategy is built from its msgspec fields, their
annotations and the matching field of ``protocol/pulsar.proto`` (found the way the codec finds
it: names compared with case and underscores ignored). So a field added to a record, or a record
added to ``COMMAND_TYPES``, is generated without touching this module.

Value ranges follow the proto type (uint32, uint64, int32, int64), except ledger and entry ids,
which records keep signed (spec/wire-protocol.md §1.3: -1 and 2^63-1 are real values). Optional
scalars draw their proto default often, because "the codec omits defaults" is where round trips
break.
"""

from __future__ import annotations

import collections.abc
import enum
import functools
import typing
from typing import Any

import msgspec
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from hypothesis import strategies as st

from protocol import commands as c
from protocol._pb import pulsar_pb2 as pb
from protocol.codec import encode_record
from protocol.framing import (
    Frame,
    Payload,
    build_entry,
    checksum,
    encode_frame,
    encode_payload_frame,
)

PAYLOAD_COMMAND_TYPES: tuple[type[c.Record], ...] = (c.Send, c.Message)
"""Commands framed with a payload section (spec §2.2)."""

SIMPLE_COMMAND_TYPES: tuple[type[c.Record], ...] = tuple(
    t for t in c.COMMAND_TYPES if t not in PAYLOAD_COMMAND_TYPES
)

RECORD_TYPES: tuple[type[c.Record], ...] = (
    c.KeyValue,
    c.KeyLongValue,
    c.IntRange,
    c.Schema,
    c.MessageIdData,
    c.FeatureFlags,
    c.KeySharedMeta,
    c.EncryptionKeys,
    c.MessageMetadata,
    c.SingleMessageMetadata,
    c.BrokerEntryMetadata,
)
"""The records that are not commands (``encode_record`` / ``decode_record``)."""

# Records keep these signed although the wire has uint64 (spec §1.3).
SIGNED_ID_FIELDS = frozenset({(c.MessageIdData, "ledger_id"), (c.MessageIdData, "entry_id")})

_INT_RANGES: dict[int, tuple[int, int]] = {
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
}

# Deep enough to generate a chunked id inside a message id, shallow enough to stay fast.
_MAX_DEPTH = 2
_MAX_REPEATED = 3


# ---- introspection ------------------------------------------------------------------------


def proto_descriptor(record: type[c.Record]) -> Descriptor:
    """The proto message behind ``record`` (``CommandX`` for commands, ``X`` otherwise)."""
    cls = getattr(pb, "Command" + record.__name__, None) or getattr(pb, record.__name__)
    descriptor: Descriptor = cls.DESCRIPTOR
    return descriptor


def _norm(name: str) -> str:
    return name.replace("_", "").lower()


def proto_field(record: type[c.Record], attr: str) -> FieldDescriptor:
    """The proto field a record attribute maps to."""
    by_norm = {_norm(fd.name): fd for fd in proto_descriptor(record).fields}
    return by_norm[_norm(attr)]


def _members(hint: Any) -> list[Any]:
    args = typing.get_args(hint)
    if not args:
        return [hint]
    out: list[Any] = []
    for arg in args:
        out.extend(_members(arg))
    return out


def _member_of(hint: Any, base: type) -> Any:
    for member in _members(hint):
        if isinstance(member, type) and issubclass(member, base):
            return member
    return None


def record_fields(record: type[c.Record]) -> list[tuple[msgspec.structs.FieldInfo, Any]]:
    """``(field info, resolved annotation)`` for every field of ``record``."""
    hints = typing.get_type_hints(record)
    return [(f, hints[f.name]) for f in msgspec.structs.fields(record)]


# ---- strategies ---------------------------------------------------------------------------


def _scalar(record: type[c.Record], attr: str, hint: Any, fd: FieldDescriptor) -> Any:
    if fd.type == FieldDescriptor.TYPE_ENUM:
        numbers = [v.number for v in fd.enum_type.values]
        enum_cls = _member_of(hint, enum.IntEnum)
        values = [enum_cls(n) for n in numbers] if enum_cls is not None else numbers
        return st.sampled_from(values)
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if fd.type == FieldDescriptor.TYPE_STRING:
        return st.text(max_size=12)
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=12)
    if fd.type == FieldDescriptor.TYPE_DOUBLE:
        return st.floats(allow_nan=False, width=64)
    if fd.type == FieldDescriptor.TYPE_FLOAT:
        return st.floats(allow_nan=False, width=32)
    if (record, attr) in SIGNED_ID_FIELDS:
        low, high = _INT_RANGES[FieldDescriptor.TYPE_INT64]
    else:
        low, high = _INT_RANGES[fd.type]
    return st.integers(low, high)


def _proto_default(hint: Any, fd: FieldDescriptor) -> Any:
    value = fd.default_value
    enum_cls = _member_of(hint, enum.IntEnum)
    if fd.type == FieldDescriptor.TYPE_ENUM and enum_cls is not None:
        return enum_cls(value)
    return value


def _field_strategy(
    record: type[c.Record], info: msgspec.structs.FieldInfo, hint: Any, depth: int
) -> Any:
    fd = proto_field(record, info.name)
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        nested = _member_of(hint, c.Record)
        if depth >= _MAX_DEPTH:
            # Stop recursion (MessageIdData.first_chunk_message_id) where the record allows it.
            if fd.is_repeated:
                return st.just(())
            if info.default is None:
                return st.none()
        element = records(nested, depth + 1)
    else:
        element = _scalar(record, info.name, hint, fd)
        if not (fd.is_required or fd.is_repeated):
            # The value the codec may leave off the wire: draw it often.
            element = st.one_of(st.just(_proto_default(hint, fd)), element)
    if fd.is_repeated:
        return st.lists(element, max_size=_MAX_REPEATED).map(tuple)
    if info.default is None:
        return st.one_of(st.none(), element)
    return element


@functools.cache
def records(record: type[c.Record], depth: int = 0) -> st.SearchStrategy[Any]:
    """Any valid instance of ``record``, every field drawn per its annotation and proto type."""
    fields = {
        info.name: _field_strategy(record, info, hint, depth)
        for info, hint in record_fields(record)
    }
    return st.fixed_dictionaries(fields).map(lambda kwargs: record(**kwargs))


def commands(types: tuple[type[c.Record], ...] = c.COMMAND_TYPES) -> st.SearchStrategy[Any]:
    """Any command of the given types (all of ``COMMAND_TYPES`` by default)."""
    return st.one_of([records(t) for t in types])


@st.composite
def entries(draw: st.DrawFn) -> bytes:
    """``metadata_size | MessageMetadata | payload`` as a producer writes it (spec §2.2)."""
    metadata = encode_record(draw(records(c.MessageMetadata)))
    return build_entry(metadata, draw(st.binary(max_size=64)))


@st.composite
def frames(draw: st.DrawFn) -> tuple[Frame, bytes]:
    """A frame and its bytes: simple, or SEND/MESSAGE with every optional section combination.

    The checksum is right, wrong or absent (framing keeps it; ``Payload.checksum_ok`` judges
    it); broker entry metadata only rides on MESSAGE (spec §2.2).
    """
    command = draw(commands())
    if not isinstance(command, (c.Send, c.Message)):
        return Frame(command), encode_frame(command)
    entry = draw(entries())
    crc = draw(st.one_of(st.none(), st.just(checksum(entry)), st.integers(0, 2**32 - 1)))
    bem = None
    if isinstance(command, c.Message):
        bem = draw(st.one_of(st.none(), records(c.BrokerEntryMetadata).map(encode_record)))
    data = encode_payload_frame(command, entry, crc, bem)
    return Frame(command, Payload(entry, crc, bem)), data


def cut_points(data: bytes) -> st.SearchStrategy[list[int]]:
    """Sorted offsets at which to split ``data`` into chunks (possibly empty ones)."""
    return st.lists(st.integers(0, len(data)), max_size=12).map(sorted)


# ---- samples and conformance --------------------------------------------------------------


def sample(record: type[c.Record]) -> Any:
    """The smallest valid instance: required fields zero, empty or the first enum member."""
    kwargs: dict[str, Any] = {}
    for info, hint in record_fields(record):
        if info.default is not msgspec.NODEFAULT or info.default_factory is not msgspec.NODEFAULT:
            continue
        fd = proto_field(record, info.name)
        if fd.type == FieldDescriptor.TYPE_MESSAGE:
            kwargs[info.name] = sample(_member_of(hint, c.Record))
        elif fd.type == FieldDescriptor.TYPE_ENUM:
            kwargs[info.name] = _proto_default(hint, fd)
        else:
            kwargs[info.name] = {str: "", bytes: b"", bool: False, float: 0.0}.get(hint, 0)
    return record(**kwargs)


def _conforms(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin is tuple:
        (item, _ellipsis) = typing.get_args(hint)
        return isinstance(value, tuple) and all(_conforms(v, item) for v in value)
    if origin is collections.abc.Sequence:
        (item,) = typing.get_args(hint)
        return (
            isinstance(value, collections.abc.Sequence)
            and not isinstance(value, str | bytes)
            and all(_conforms(v, item) for v in value)
        )
    if origin is not None:  # a union (X | None)
        return any(_conforms(value, member) for member in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, float) or type(value) is int  # NaN is a valid double too
    if hint is int:
        return type(value) is int or isinstance(value, enum.IntEnum)
    if isinstance(hint, type) and issubclass(hint, c.Record):
        return isinstance(value, hint) and conforms(value)
    return isinstance(value, hint)


def conforms(record: c.Record) -> bool:
    """True when every field holds a value of its annotated type, recursively.

    Decoding must validate at the boundary (STYLE.md §1.5): a decoded record whose ``str``
    field holds ``bytes`` would fail far from the frame that carried it.
    """
    return all(
        _conforms(getattr(record, info.name), hint) for info, hint in record_fields(type(record))
    )
