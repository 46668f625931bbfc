"""The JSON Pulsar stores and serves for load data, byte-compatible in shape with Jackson's.

Pulsar writes these nodes with its ``ObjectMapperFactory`` mapper (Jackson, ``NON_NULL``):

- ``/loadbalance/brokers/<broker>``: ``LocalBrokerData``, every field in declaration order,
  then the getter-only properties ``maxResourceUsage`` and ``loadReportType``
  (``"LocalBrokerData"``); ``bundleStats`` (an alias of ``lastStats``) is ignored both ways;
- ``/loadbalance/bundle-data/<tenant>/<ns>/<range>``: ``BundleData``;
- ``/loadbalance/broker-time-average/<broker>``: ``TimeAverageBrokerData``;
- the extensible manager's ``BrokerLoadData`` and ``TopBundlesLoadData``.

Jackson writes ``null`` fields not at all (``NON_NULL``), Java doubles always with a fraction
(``0.0``), and sets as arrays; reading, it ignores unknown properties and leaves missing ones at
their defaults. We do the same; sets are written sorted, so equal data gives equal bytes.
"""

from __future__ import annotations

import functools
from typing import Any, Final, TypeVar

import msgspec

from emubroker.loadbalance.model.data import LocalBrokerData

__all__ = [
    "LoadDataDecodeError",
    "decode",
    "encode",
    "to_jackson",
]

S = TypeVar("S", bound=msgspec.Struct)

LOAD_REPORT_TYPE: Final = "LocalBrokerData"
"""``LocalBrokerData.loadReportType``: how a reader tells it from the legacy ``LoadReport``."""


class LoadDataDecodeError(ValueError):
    """A stored load-data node is not valid JSON of the expected shape."""


@functools.cache
def _plan(cls: type[msgspec.Struct]) -> tuple[tuple[str, str, bool], ...]:
    """Per field: attribute, JSON name, and whether Java declares it a double."""
    info = msgspec.inspect.type_info(cls)
    assert isinstance(info, msgspec.inspect.StructType)  # cls is a Struct
    plan = []
    for field in info.fields:
        types = (
            field.type.types if isinstance(field.type, msgspec.inspect.UnionType) else (field.type,)
        )
        is_double = any(isinstance(t, msgspec.inspect.FloatType) for t in types)
        plan.append((field.name, field.encode_name, is_double))
    return tuple(plan)


_SCALARS = frozenset({str, int, float, bool})


def _jackson(value: Any) -> Any:
    kind = type(value)
    if kind in _SCALARS:
        return value
    if isinstance(value, msgspec.Struct):
        encoded = {}
        for name, key, is_double in _plan(type(value)):
            item = getattr(value, name)
            if item is None:
                continue  # NON_NULL
            if is_double and type(item) is int:
                item = float(item)  # Jackson writes a Java double as 1.0, never 1
            encoded[key] = item if type(item) in _SCALARS else _jackson(item)
        return encoded
    if isinstance(value, dict):
        return {k: v if type(v) in _SCALARS else _jackson(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, (list, tuple)):
        return [_jackson(v) for v in value]
    return value


def to_jackson(value: msgspec.Struct) -> dict[str, Any]:
    """The JSON object Jackson would write for ``value`` (as builtins)."""
    result = _jackson(value)
    if isinstance(value, LocalBrokerData):
        result["maxResourceUsage"] = value.max_resource_usage()
        result["loadReportType"] = LOAD_REPORT_TYPE
    assert isinstance(result, dict)
    return result


def encode(value: msgspec.Struct) -> bytes:
    """JSON bytes of a load-data object, as Pulsar stores it."""
    return msgspec.json.encode(to_jackson(value))


_DECODERS: dict[type[Any], msgspec.json.Decoder[Any]] = {}


def decode(data: bytes, cls: type[S]) -> S:
    """Parse a stored load-data node into ``cls`` (unknown properties ignored, as Jackson does).

    Raises:
        LoadDataDecodeError: Not JSON, or a field has the wrong type.
    """
    decoder = _DECODERS.get(cls)
    if decoder is None:
        decoder = _DECODERS[cls] = msgspec.json.Decoder(cls)
    try:
        result: S = decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise LoadDataDecodeError(f"invalid {cls.__name__} JSON: {exc}") from exc
    return result
