"""The anyio client of the bookie stub, and everything its users catch or receive.

The client itself, :class:`~storage_stub.stub_client.StubClient` and its connection (described
there, with the errors every method may raise), load at the first use of one of their names here
(``StubClient``, ``open_stub_client``, its timeouts, ``Backoff``, ``parse_stub_url``): a broker on
in-process storage never connects to a stub, and the client's modules (the channel, the messages,
fault injection) were ~2 ms of its start. The error classes and the records a client returns are
imported here as they are.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

from storage_stub.client_watch import StubWatch
from storage_stub.errors import (
    PersistenceFailedError,
    ReadTooLargeError,
    StubClosedError,
    StubConnectionError,
    StubTimeoutError,
    StubUnavailableError,
)
from storage_stub.ledger import (
    EntryOutOfRangeError,
    LedgerClosedError,
    LedgerFencedError,
    LedgerInfo,
    LedgerState,
    NoSuchLedgerError,
    StorageError,
)
from storage_stub.metadata import (
    CREATED,
    DELETED,
    MODIFIED,
    SEQUENTIAL_DIGITS,
    BadVersionError,
    InvalidArgumentError,
    InvalidPathError,
    MetadataError,
    NodeNotFoundError,
    NodeStat,
    Notification,
    SessionExpiredError,
    WatchOverflowError,
    validate_path,
)

if TYPE_CHECKING:
    from storage_stub.channel import Backoff, parse_stub_url
    from storage_stub.stub_client import (
        DEFAULT_CONNECT_TIMEOUT,
        DEFAULT_REQUEST_TIMEOUT,
        StubClient,
        open_stub_client,
    )

# Everything a user of the client catches or receives is importable from here, so the broker
# depends on ``storage_stub.client`` only (STYLE.md §2).
__all__ = [
    "CREATED",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_REQUEST_TIMEOUT",
    "DELETED",
    "MODIFIED",
    "SEQUENTIAL_DIGITS",
    "Backoff",
    "BadVersionError",
    "EntryOutOfRangeError",
    "InvalidArgumentError",
    "InvalidPathError",
    "LedgerClosedError",
    "LedgerFencedError",
    "LedgerInfo",
    "LedgerState",
    "MetadataError",
    "NoSuchLedgerError",
    "NodeNotFoundError",
    "NodeStat",
    "Notification",
    "PersistenceFailedError",
    "ReadTooLargeError",
    "SessionExpiredError",
    "StorageError",
    "StubClient",
    "StubClosedError",
    "StubConnectionError",
    "StubTimeoutError",
    "StubUnavailableError",
    "StubWatch",
    "WatchOverflowError",
    "open_stub_client",
    "parse_stub_url",
    "validate_path",
]

_AT_FIRST_USE: Final = {
    "DEFAULT_CONNECT_TIMEOUT": "storage_stub.stub_client",
    "DEFAULT_REQUEST_TIMEOUT": "storage_stub.stub_client",
    "StubClient": "storage_stub.stub_client",
    "open_stub_client": "storage_stub.stub_client",
    "Backoff": "storage_stub.channel",
    "parse_stub_url": "storage_stub.channel",
}


def __getattr__(name: str) -> Any:
    """The client's names, imported at their first use (see the module docstring)."""
    module = _AT_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
