"""The bookie stub's RPC messages: tagged msgspec Structs framed by ``protocol.rpc``.

Two closed unions (STYLE.md §1.4):

- :data:`Request`, client to stub. Every request carries ``rid``, a request id chosen by the
  client and unique among its requests in flight on one connection, so requests can be pipelined
  and replies may come back in any order.
- :data:`ServerMessage`, stub to client: a reply carrying the ``rid`` it answers, or a push
  (:class:`WatchEvent`, :class:`WatchEnded`) that answers no request.

Encoding: msgpack arrays (``array_like``) whose first element is the integer tag. Arrays keep
field names off the wire (an add is a few bytes plus its entry) and decode faster than maps.
Schema evolution rules (STYLE.md §1.6): tags are never reused or renumbered; new fields go last
and have defaults; fields are never reordered or retyped. Tags: 1-19 ledger requests, 20-39
metadata requests, 40-59 control, 100-119 replies, 120-139 pushes.
"""

from __future__ import annotations

from typing import Final

import msgspec

from storage_stub.faults import FaultConfig, FaultStatistics
from storage_stub.ledger import LedgerInfo, LedgerStoreStatistics

__all__ = [
    "AddEntry",
    "BoolReply",
    "ClearFaults",
    "CloseLedger",
    "ConfigureFaults",
    "CreateLedger",
    "DeleteLedger",
    "EntriesReply",
    "ErrorReply",
    "FailNext",
    "FenceLedger",
    "GetLastAddConfirmed",
    "GetLedgerInfo",
    "GetStatistics",
    "Hello",
    "HelloReply",
    "IdsReply",
    "IntReply",
    "LedgerInfoReply",
    "ListLedgers",
    "MetaChildren",
    "MetaDelete",
    "MetaExists",
    "MetaGet",
    "MetaPut",
    "NamesReply",
    "NodeReply",
    "Ok",
    "Ping",
    "PutReply",
    "ReadEntries",
    "Reply",
    "Request",
    "ServerMessage",
    "SessionClose",
    "SessionCreate",
    "SessionHeartbeat",
    "Stall",
    "StatsReply",
    "WatchClose",
    "WatchCreate",
    "WatchEnded",
    "WatchEvent",
]

NO_LEDGER: Final = -1


class _Message(msgspec.Struct, frozen=True, array_like=True, gc=False):
    # gc=False: messages hold no reference cycles, and there are many of them on the hot path,
    # so keep them out of the cyclic garbage collector's work.
    pass


# ---- ledger requests (BookKeeper's ledger API, reduced to what the managed ledger uses) ------


class CreateLedger(_Message, frozen=True, tag=1):
    """Create an empty ledger; answered with :class:`IntReply` (the ledger id)."""

    rid: int


class AddEntry(_Message, frozen=True, tag=2):
    """Append one entry; answered with :class:`IntReply` (the entry id) once it is durable."""

    rid: int
    ledger_id: int
    data: bytes


class ReadEntries(_Message, frozen=True, tag=3):
    """Read entries ``first..last`` inclusive; answered with :class:`EntriesReply`."""

    rid: int
    ledger_id: int
    first: int
    last: int


class GetLastAddConfirmed(_Message, frozen=True, tag=4):
    """Ask for the last entry id (``-1`` if empty); answered with :class:`IntReply`."""

    rid: int
    ledger_id: int


class CloseLedger(_Message, frozen=True, tag=5):
    """Close a ledger (writer side); answered with :class:`IntReply` (the final LAC)."""

    rid: int
    ledger_id: int


class FenceLedger(_Message, frozen=True, tag=6):
    """Fence a ledger (new owner's recovery); answered with :class:`IntReply` (the LAC)."""

    rid: int
    ledger_id: int


class DeleteLedger(_Message, frozen=True, tag=7):
    """Delete a ledger and its entries; answered with :class:`Ok`."""

    rid: int
    ledger_id: int


class GetLedgerInfo(_Message, frozen=True, tag=8):
    """Ask for a ledger's metadata; answered with :class:`LedgerInfoReply`."""

    rid: int
    ledger_id: int


class ListLedgers(_Message, frozen=True, tag=9):
    """Ask for every ledger id held; answered with :class:`IdsReply`."""

    rid: int


# ---- metadata requests (storage_stub.metadata; paths are absolute, '/'-separated) ----------


class SessionCreate(_Message, frozen=True, tag=20):
    """Open a session that expires ``timeout_ms`` after its last heartbeat; :class:`IntReply`."""

    rid: int
    timeout_ms: int


class SessionHeartbeat(_Message, frozen=True, tag=21):
    """Keep a session alive; :class:`Ok`, or ``SessionExpired`` if it already ended."""

    rid: int
    session_id: int


class SessionClose(_Message, frozen=True, tag=22):
    """End a session now, deleting its ephemeral nodes; :class:`Ok` (idempotent)."""

    rid: int
    session_id: int


class MetaGet(_Message, frozen=True, tag=23):
    """Read a node as seen by ``session_id`` (for ``created_by_self``); :class:`NodeReply`."""

    rid: int
    session_id: int
    path: str


class MetaPut(_Message, frozen=True, tag=24):
    """Create or replace a node; :class:`PutReply`.

    ``expected_version``: ``None`` unconditional, ``-1`` must not exist, ``n`` must be at ``n``.
    """

    rid: int
    session_id: int
    path: str
    value: bytes
    expected_version: int | None = None
    ephemeral: bool = False
    sequential: bool = False


class MetaDelete(_Message, frozen=True, tag=25):
    """Delete a node's value; :class:`Ok`."""

    rid: int
    path: str
    expected_version: int | None = None


class MetaChildren(_Message, frozen=True, tag=26):
    """List a node's child names, sorted; :class:`NamesReply`."""

    rid: int
    path: str


class MetaExists(_Message, frozen=True, tag=27):
    """Whether a node holds a value; :class:`BoolReply`."""

    rid: int
    path: str


class WatchCreate(_Message, frozen=True, tag=28):
    """Watch a prefix; :class:`Ok`, then :class:`WatchEvent` pushes tagged ``watch_id``.

    The client picks ``watch_id`` (unique on its connection), so it can route pushes that
    arrive before this request's reply.
    """

    rid: int
    watch_id: int
    prefix: str


class WatchClose(_Message, frozen=True, tag=29):
    """Stop a watch; :class:`Ok`. Pushes sent before the reply still arrive before it."""

    rid: int
    watch_id: int


# ---- control (never subject to faults, so a stalled stub can always be un-stalled) ----------


class ConfigureFaults(_Message, frozen=True, tag=40):
    """Replace the fault configuration; :class:`Ok`."""

    rid: int
    config: FaultConfig


class FailNext(_Message, frozen=True, tag=41):
    """Fail the next ``count`` requests of kinds ``ops`` (all if ``None``); :class:`Ok`."""

    rid: int
    count: int
    ops: list[str] | None = None
    code: str = "Unavailable"


class Stall(_Message, frozen=True, tag=42):
    """Hold every reply for ``seconds`` of the stub's clock from now; :class:`Ok`."""

    rid: int
    seconds: float


class ClearFaults(_Message, frozen=True, tag=43):
    """Drop every fault, pending failure and stall; :class:`Ok`."""

    rid: int


class GetStatistics(_Message, frozen=True, tag=44):
    """Ask for counters; :class:`StatsReply`."""

    rid: int


class Ping(_Message, frozen=True, tag=45):
    """Round-trip check; :class:`Ok`."""

    rid: int


class Hello(_Message, frozen=True, tag=46):
    """First request on every connection; :class:`HelloReply`."""

    rid: int


Request = (
    CreateLedger
    | AddEntry
    | ReadEntries
    | GetLastAddConfirmed
    | CloseLedger
    | FenceLedger
    | DeleteLedger
    | GetLedgerInfo
    | ListLedgers
    | SessionCreate
    | SessionHeartbeat
    | SessionClose
    | MetaGet
    | MetaPut
    | MetaDelete
    | MetaChildren
    | MetaExists
    | WatchCreate
    | WatchClose
    | ConfigureFaults
    | FailNext
    | Stall
    | ClearFaults
    | GetStatistics
    | Ping
    | Hello
)

# ---- replies ---------------------------------------------------------------------------------


class Ok(_Message, frozen=True, tag=100):
    rid: int


class IntReply(_Message, frozen=True, tag=101):
    rid: int
    value: int


class EntriesReply(_Message, frozen=True, tag=102):
    rid: int
    entries: list[bytes]


class LedgerInfoReply(_Message, frozen=True, tag=103):
    rid: int
    info: LedgerInfo


class IdsReply(_Message, frozen=True, tag=104):
    rid: int
    ids: list[int]


class NodeReply(_Message, frozen=True, tag=105):
    """A node's value, or ``value=None`` when the node holds none."""

    rid: int
    value: bytes | None
    version: int = -1
    ephemeral: bool = False
    created_by_self: bool = False


class PutReply(_Message, frozen=True, tag=106):
    rid: int
    path: str
    version: int


class BoolReply(_Message, frozen=True, tag=107):
    rid: int
    value: bool


class NamesReply(_Message, frozen=True, tag=108):
    rid: int
    names: list[str]


class StatsReply(_Message, frozen=True, tag=109):
    rid: int
    ledgers: LedgerStoreStatistics
    faults: FaultStatistics
    connections: int
    sessions: int
    nodes: int


class HelloReply(_Message, frozen=True, tag=111):
    """Identifies the stub's run: it changes whenever the stub restarts.

    Sessions of another incarnation are gone, and their ids may have been handed out again.
    """

    rid: int
    incarnation: int


class ErrorReply(_Message, frozen=True, tag=110):
    """The request failed; ``code`` names the error class (``storage_stub.errors``)."""

    rid: int
    code: str
    message: str
    ledger_id: int = NO_LEDGER


# ---- pushes ----------------------------------------------------------------------------------


class WatchEvent(_Message, frozen=True, tag=120):
    """A node under a watched prefix was ``created``, ``modified`` or ``deleted``."""

    watch_id: int
    path: str
    kind: str


class WatchEnded(_Message, frozen=True, tag=121):
    """The stub ended a watch; ``overflowed`` if notifications were lost."""

    watch_id: int
    overflowed: bool


Reply = (
    Ok
    | IntReply
    | EntriesReply
    | LedgerInfoReply
    | IdsReply
    | NodeReply
    | PutReply
    | BoolReply
    | NamesReply
    | StatsReply
    | ErrorReply
    | HelloReply
)

ServerMessage = Reply | WatchEvent | WatchEnded
