"""Every error the stub can report, and the code -> class registry the client decodes with.

Two families travel in :class:`~storage_stub.messages.ErrorReply` by ``code`` (STYLE.md §1.12):

- :class:`~storage_stub.ledger.StorageError` and its subclasses: ledger operations, plus the
  stub-level failures defined here (unavailable, persistence failed) and the client-side ones
  (timeout, connection lost, client closed), so that a broker's managed ledger catches one
  hierarchy for everything that can go wrong with its storage.
- :class:`~storage_stub.metadata.MetadataError` and its subclasses: metadata operations.

"You closed it" (:class:`StubClosedError`) and "it broke" (:class:`StubConnectionError`) are
different classes (STYLE.md §1.13).
"""

from __future__ import annotations

from typing import Final

from storage_stub.ledger import (
    EntryOutOfRangeError,
    LedgerClosedError,
    LedgerFencedError,
    NoSuchLedgerError,
    StorageError,
)
from storage_stub.metadata import (
    BadVersionError,
    InvalidArgumentError,
    InvalidPathError,
    MetadataError,
    NodeNotFoundError,
    SessionExpiredError,
    WatchOverflowError,
)

__all__ = [
    "NO_LEDGER",
    "PersistenceFailedError",
    "ReadTooLargeError",
    "StubClosedError",
    "StubConnectionError",
    "StubTimeoutError",
    "StubUnavailableError",
    "error_from_reply",
]

# ledger_id of errors that are not about one ledger.
NO_LEDGER: Final = -1


class StubUnavailableError(StorageError):
    """The stub could not serve the request right now (an injected fault); retry later."""

    code = "Unavailable"
    retriable = True


class ReadTooLargeError(StorageError):
    """A read asked for more bytes than one reply may carry; read a shorter range."""

    code = "ReadTooLarge"


class PersistenceFailedError(StorageError):
    """The stub's journal failed (disk error); it accepts no more writes until restarted."""

    code = "PersistenceFailed"


class StubTimeoutError(StorageError):
    """No reply came before the request's deadline; the outcome is unknown."""

    code = "Timeout"
    retriable = True


class StubConnectionError(StorageError):
    """It broke: the connection to the stub was lost with the request in flight.

    The outcome of a mutating request is unknown (it may have been applied). Requests issued
    while the client reconnects wait for the new connection instead of failing.
    """

    code = "ConnectionLost"
    retriable = True


class StubClosedError(StorageError):
    """You closed it: the client was closed before or during the request."""

    code = "ClientClosed"


_STORAGE: Final[dict[str, type[StorageError]]] = {
    cls.code: cls
    for cls in (
        StorageError,
        NoSuchLedgerError,
        EntryOutOfRangeError,
        LedgerClosedError,
        LedgerFencedError,
        StubUnavailableError,
        ReadTooLargeError,
        PersistenceFailedError,
        StubTimeoutError,
        StubConnectionError,
        StubClosedError,
    )
}
_METADATA: Final[dict[str, type[MetadataError]]] = {
    cls.code: cls
    for cls in (
        MetadataError,
        NodeNotFoundError,
        BadVersionError,
        InvalidPathError,
        InvalidArgumentError,
        SessionExpiredError,
        WatchOverflowError,
    )
}


def error_from_reply(code: str, message: str, ledger_id: int = NO_LEDGER) -> Exception:
    """Build the exception an ``ErrorReply`` stands for.

    Args:
        code: The reply's code.
        message: The stub's message.
        ledger_id: The ledger concerned, for storage errors.

    Returns:
        An instance of the registered class; an unknown code (a newer stub) gives the family's
        base class, :class:`StorageError`, with the code in the message so it is not lost.
    """
    metadata_cls = _METADATA.get(code)
    if metadata_cls is not None:
        return metadata_cls(message)
    storage_cls = _STORAGE.get(code)
    if storage_cls is None:
        return StorageError(f"{message} (unknown error code {code!r})", ledger_id=ledger_id)
    return storage_cls(message, ledger_id=ledger_id)
