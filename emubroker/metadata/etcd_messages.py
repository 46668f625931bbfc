"""The subset of etcd's v3 API that the etcd metadata backend speaks, as JSON for its gateway.

etcd serves its gRPC API as JSON too (grpc-gateway, ``POST /v3/kv/range`` and so on), with the
protobuf field names of ``etcdserverpb/rpc.proto``. These Structs are written from that
documentation; the encoding rules that matter:

- ``bytes`` fields (keys, values) travel as base64, which msgspec does for ``bytes``.
- 64-bit integers come back as JSON *strings* (proto3 JSON), so replies are decoded with
  ``strict=False``, which converts ``"42"`` to ``42``.
- Fields at their default are left out of replies (a ``PUT`` event has no ``type``, a failed
  transaction no ``succeeded``), so every reply field has the proto default as ours; requests
  leave them out too (``omit_defaults``).
- Server-streaming calls (watch, lease keep-alive) answer with one ``{"result": ...}`` or
  ``{"error": ...}`` object per line.
"""

from __future__ import annotations

from typing import Final, Generic, TypeVar

import msgspec

__all__ = [
    "Compare",
    "DeleteRangeRequest",
    "DeleteRangeResponse",
    "Event",
    "GatewayStatus",
    "KeyValue",
    "LeaseGrantRequest",
    "LeaseGrantResponse",
    "LeaseKeepAliveRequest",
    "LeaseKeepAliveResponse",
    "LeaseRevokeRequest",
    "LeaseRevokeResponse",
    "PutRequest",
    "PutResponse",
    "RangeRequest",
    "RangeResponse",
    "RequestOp",
    "ResponseHeader",
    "ResponseOp",
    "StreamMessage",
    "TxnRequest",
    "TxnResponse",
    "WatchCreateRequest",
    "WatchRequest",
    "WatchResponse",
]

T = TypeVar("T")

# Compare.target and Compare.result, by their proto enum names (the gateway accepts names).
VERSION: Final = "VERSION"
CREATE: Final = "CREATE"
EQUAL: Final = "EQUAL"
GREATER: Final = "GREATER"
# Event.type; PUT is the enum's zero value, so the gateway leaves it out.
PUT: Final = "PUT"
DELETE: Final = "DELETE"


class _Request(msgspec.Struct, omit_defaults=True, frozen=True):
    pass


class RangeRequest(_Request, frozen=True):
    """Read ``key``, or ``[key, range_end)``."""

    key: bytes
    range_end: bytes = b""
    limit: int = 0
    keys_only: bool = False


class PutRequest(_Request, frozen=True):
    """Write ``key``; with ``ignore_lease`` the key keeps the lease it has."""

    key: bytes
    value: bytes = b""
    lease: int = 0
    prev_kv: bool = False
    ignore_lease: bool = False


class DeleteRangeRequest(_Request, frozen=True):
    key: bytes
    range_end: bytes = b""


class Compare(_Request, frozen=True):
    """A transaction guard; with ``range_end`` it must hold for every key in the range.

    A range without keys compares as one key with every field zero, so
    ``VERSION == 0`` over a range means "the range is empty".
    """

    key: bytes
    target: str
    result: str = EQUAL
    version: int = 0
    create_revision: int = 0
    range_end: bytes = b""


class RequestOp(_Request, frozen=True):
    """One operation of a transaction: exactly one field is set."""

    request_range: RangeRequest | None = None
    request_put: PutRequest | None = None
    request_delete_range: DeleteRangeRequest | None = None
    request_txn: TxnRequest | None = None


class TxnRequest(_Request, frozen=True):
    """``if all(compare) then success else failure``, atomically, in one revision.

    Every compare, nested transactions' included, is evaluated against the state *before* the
    transaction, never against its own earlier writes.
    """

    compare: list[Compare] = []
    success: list[RequestOp] = []
    failure: list[RequestOp] = []


class LeaseGrantRequest(_Request, frozen=True):
    ttl: int = msgspec.field(name="TTL", default=0)


class LeaseRevokeRequest(_Request, frozen=True):
    lease_id: int = msgspec.field(name="ID", default=0)


class LeaseKeepAliveRequest(_Request, frozen=True):
    lease_id: int = msgspec.field(name="ID", default=0)


class WatchCreateRequest(_Request, frozen=True):
    key: bytes
    range_end: bytes = b""
    start_revision: int = 0


class WatchRequest(_Request, frozen=True):
    create_request: WatchCreateRequest


# ---- replies --------------------------------------------------------------------------------


class ResponseHeader(msgspec.Struct, frozen=True):
    revision: int = 0


class KeyValue(msgspec.Struct, frozen=True):
    """A key as etcd stores it.

    ``version`` counts the writes since the key was (re)created, starting at 1, and is 0 for a
    deleted key; ``lease`` is 0 for a key without one.
    """

    key: bytes
    create_revision: int = 0
    mod_revision: int = 0
    version: int = 0
    value: bytes = b""
    lease: int = 0


class RangeResponse(msgspec.Struct, frozen=True):
    header: ResponseHeader = ResponseHeader()
    kvs: list[KeyValue] = []
    more: bool = False
    count: int = 0


class PutResponse(msgspec.Struct, frozen=True):
    header: ResponseHeader = ResponseHeader()
    prev_kv: KeyValue | None = None


class DeleteRangeResponse(msgspec.Struct, frozen=True):
    header: ResponseHeader = ResponseHeader()
    deleted: int = 0


class ResponseOp(msgspec.Struct, frozen=True):
    response_range: RangeResponse | None = None
    response_put: PutResponse | None = None
    response_delete_range: DeleteRangeResponse | None = None
    response_txn: TxnResponse | None = None


class TxnResponse(msgspec.Struct, frozen=True):
    header: ResponseHeader = ResponseHeader()
    succeeded: bool = False
    responses: list[ResponseOp] = []


class LeaseGrantResponse(msgspec.Struct, frozen=True):
    header: ResponseHeader = ResponseHeader()
    lease_id: int = msgspec.field(name="ID", default=0)
    ttl: int = msgspec.field(name="TTL", default=0)
    error: str = ""


class LeaseRevokeResponse(msgspec.Struct, frozen=True):
    header: ResponseHeader = ResponseHeader()


class LeaseKeepAliveResponse(msgspec.Struct, frozen=True):
    """``ttl`` is the lease's renewed time to live; 0 means the lease is gone."""

    header: ResponseHeader = ResponseHeader()
    lease_id: int = msgspec.field(name="ID", default=0)
    ttl: int = msgspec.field(name="TTL", default=0)


class Event(msgspec.Struct, frozen=True):
    kv: KeyValue
    type: str = PUT


class WatchResponse(msgspec.Struct, frozen=True):
    """One message of a watch stream: its creation, events of one revision, or its end."""

    header: ResponseHeader = ResponseHeader()
    watch_id: int = 0
    created: bool = False
    canceled: bool = False
    compact_revision: int = 0
    cancel_reason: str = ""
    events: list[Event] = []


class GatewayStatus(msgspec.Struct, frozen=True):
    """An error as the gateway reports it: a gRPC status code and message."""

    code: int = 0
    message: str = ""
    error: str = ""


class StreamMessage(msgspec.Struct, Generic[T], frozen=True):
    """One line of a server-streaming reply."""

    result: T | None = None
    error: GatewayStatus | None = None
