"""The etcd transactions behind each metadata write, and how their replies read (pure).

Every write is one transaction, so it is atomic and a failed one changes nothing:

- **put** (see ``etcd.py`` for the version mapping): a create puts the node (with the session's
  lease if ephemeral) and one link per ancestor (``etcd_keys``), guarded by
  ``create_revision == 0``; a modify puts the node with ``ignore_lease`` (it stays whoever's it
  was), guarded by ``version == expected + 1``. An unconditional put is "create if absent, else
  modify", both branches of one transaction.
- **delete** removes the node and, in nested transactions, the links of every ancestor edge
  that covers nothing once the node is gone. etcd evaluates all compares, nested ones included,
  before applying anything, so "nothing left" is asked of the ranges around the deleted key
  rather than of a state in which it is already gone.

On failure both read the node back in the failure branch, which tells "not found" from "bad
version" and gives the version found for the error message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from emubroker.metadata.etcd_messages import (
    CREATE,
    EQUAL,
    GREATER,
    VERSION,
    Compare,
    DeleteRangeRequest,
    KeyValue,
    PutRequest,
    RangeRequest,
    RequestOp,
    TxnRequest,
    TxnResponse,
)
from emubroker.metadata.store import BadVersionError, NotFoundError, VersionedValue

if TYPE_CHECKING:
    from emubroker.metadata.etcd_keys import KeyLayout

__all__ = [
    "MAX_TXN_OPS",
    "check_put_arguments",
    "confirm_children",
    "delete_txn",
    "drop_links_txn",
    "join",
    "put_txn",
    "put_version",
    "raise_unless_succeeded",
    "versioned_value",
]

# etcd's default --max-txn-ops: operations one transaction may hold.
MAX_TXN_OPS: Final = 128


def join(parent: str, name: str) -> str:
    """The path of ``parent``'s child ``name``."""
    return f"/{name}" if parent == "/" else f"{parent}/{name}"


def check_put_arguments(expected_version: int | None, sequential: bool) -> None:
    """Raise ``ValueError`` for arguments ``MetadataStore.put`` refuses."""
    if expected_version is not None and expected_version < -1:
        raise ValueError(f"expected_version must be None, -1 or >= 0, got {expected_version}")
    if sequential and expected_version not in (None, -1):
        raise ValueError("a sequential put always creates: expected_version must be None or -1")


def versioned_value(kv: KeyValue, own_lease: int) -> VersionedValue:
    """A node read from etcd, as the session holding ``own_lease`` sees it."""
    return VersionedValue(
        kv.value,
        kv.version - 1,
        ephemeral=kv.lease != 0,
        created_by_self=kv.lease != 0 and kv.lease == own_lease,
    )


def _range(key: bytes, end: bytes = b"", *, keys_only: bool = False, limit: int = 0) -> RequestOp:
    return RequestOp(request_range=RangeRequest(key, end, limit=limit, keys_only=keys_only))


def _empty(key: bytes, end: bytes = b"") -> Compare:
    # Over a range, VERSION == 0 holds only if no key is in it (a key's version is >= 1).
    return Compare(key, VERSION, EQUAL, version=0, range_end=end)


def put_txn(
    layout: KeyLayout, path: str, value: bytes, expected_version: int | None, lease: int
) -> TxnRequest:
    """The transaction of ``put(path, value, expected_version)``; ``lease`` 0 = persistent."""
    key = layout.node(path)
    create = [RequestOp(request_put=PutRequest(key, value, lease=lease))]
    create += [
        RequestOp(request_put=PutRequest(layout.link(parent, child, lease), lease=lease))
        for parent, child in layout.ancestry(path)
    ]
    absent = Compare(key, CREATE, EQUAL, create_revision=0)
    if expected_version is None:
        modify = PutRequest(key, value, prev_kv=True, ignore_lease=True)
        return TxnRequest([absent], create, [RequestOp(request_put=modify)])
    if expected_version == -1:
        return TxnRequest([absent], create, [_range(key)])
    matches = Compare(key, VERSION, EQUAL, version=expected_version + 1)
    modify = PutRequest(key, value, ignore_lease=True)
    return TxnRequest([matches], [RequestOp(request_put=modify)], [_range(key)])


def put_version(reply: TxnResponse, path: str, expected_version: int | None) -> int:
    """The node's version after the put of :func:`put_txn`.

    Raises:
        BadVersionError: ``expected_version`` did not match.
    """
    if expected_version is None:
        if reply.succeeded:
            return 0
        put = reply.responses[0].response_put
        previous = put.prev_kv if put is not None else None
        # Our version after the write is etcd's old version (etcd's new one minus one).
        return previous.version if previous is not None else 0
    raise_unless_succeeded(reply, "put", path, expected_version)
    return expected_version + 1


def delete_txn(layout: KeyLayout, path: str, expected_version: int | None) -> TxnRequest:
    """The transaction of ``delete(path, expected_version)``."""
    key = layout.node(path)
    guard = (
        Compare(key, VERSION, GREATER, version=0)
        if expected_version is None
        else Compare(key, VERSION, EQUAL, version=expected_version + 1)
    )
    success = [RequestOp(request_delete_range=DeleteRangeRequest(key))]
    success += [
        _unlink_if_empty(layout, path, parent, child) for parent, child in layout.ancestry(path)
    ]
    return TxnRequest([guard], success, [_range(key)])


def _unlink_if_empty(layout: KeyLayout, deleted: str, parent: str, child: str) -> RequestOp:
    # Drop the links of parent/child if nothing is left at or below it once `deleted` is gone;
    # `deleted` itself is left out of the ranges (see the module docstring).
    node = join(parent, child)
    below_start, below_end = layout.below(node)
    if node == deleted:
        nothing_left = [_empty(below_start, below_end)]
    else:
        key = layout.node(deleted)
        nothing_left = [
            _empty(layout.node(node)),
            _empty(below_start, key),
            _empty(key + b"\x00", below_end),  # key + b"\x00" is the key right after `key`
        ]
    unlink = DeleteRangeRequest(*layout.links_of_child(parent, child))
    return RequestOp(request_txn=TxnRequest(nothing_left, [RequestOp(request_delete_range=unlink)]))


def raise_unless_succeeded(
    reply: TxnResponse, op: str, path: str, expected_version: int | None
) -> None:
    """Raise the error a failed put or delete transaction stands for.

    Raises:
        NotFoundError: A delete found no node.
        BadVersionError: The node's version (or existence) was not the expected one.
    """
    if reply.succeeded:
        return
    ranged = reply.responses[0].response_range if reply.responses else None
    found = ranged.kvs[0].version - 1 if ranged is not None and ranged.kvs else None
    if found is None and op == "delete":
        raise NotFoundError(f"delete {path!r}: no such node")
    raise BadVersionError(
        f"{op} {path!r}: expected version {expected_version}, "
        f"found {'none' if found is None else found}"
    )


def confirm_children(layout: KeyLayout, path: str, names: list[str]) -> list[TxnRequest]:
    """Read-only transactions asking, per name, whether anything is at or below ``path/name``.

    Each holds up to :data:`MAX_TXN_OPS` names, one range (``limit`` 1) per name, in order.
    """
    return [
        TxnRequest(
            success=[
                _range(*layout.subtree(join(path, name)), keys_only=True, limit=1)
                for name in names[start : start + MAX_TXN_OPS]
            ]
        )
        for start in range(0, len(names), MAX_TXN_OPS)
    ]


def drop_links_txn(layout: KeyLayout, parent: str, name: str) -> TxnRequest:
    """Delete the links of ``parent/name`` if nothing is at or below it (stale links)."""
    unlink = DeleteRangeRequest(*layout.links_of_child(parent, name))
    return TxnRequest(
        [_empty(*layout.subtree(join(parent, name)))],
        [RequestOp(request_delete_range=unlink)],
    )
