"""How ``storage_stub``'s metadata model answers map onto the ``MetadataStore`` protocol.

Both backends run on ``storage_stub.metadata.MetadataTree``: the remote one through the stub's
metadata service, the memory one in-process. Its answers and errors are translated here, once
(STYLE.md §1.11): the model's ``InvalidArgument`` becomes ``ValueError``, its other metadata
errors the matching ``emubroker.metadata`` class, and anything else it raises (transport
failures: timeout, lost connection, closed client) ``MetadataStoreError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, NoReturn

import anyio.lowlevel
from anyio.abc import ObjectReceiveStream

from emubroker.metadata.store import (
    BadVersionError,
    InvalidPathError,
    MetadataStoreError,
    NotFoundError,
    Notification,
    NotificationKind,
    VersionedValue,
    WatchOverflowError,
)
from storage_stub import client as model
from storage_stub.client import StorageError

if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from types import TracebackType

    from storage_stub.client import StubWatch

__all__ = ["TranslatedWatchStream", "translated", "versioned_value"]


def _raise_translated(exc: Exception) -> NoReturn:
    match exc:
        case model.NodeNotFoundError():
            raise NotFoundError(str(exc)) from exc
        case model.BadVersionError():
            raise BadVersionError(str(exc)) from exc
        case model.InvalidPathError():
            raise InvalidPathError(str(exc)) from exc
        case model.InvalidArgumentError():
            raise ValueError(str(exc)) from exc
        case model.WatchOverflowError():
            raise WatchOverflowError(str(exc)) from exc
        case _:
            raise MetadataStoreError(f"metadata service failed: {exc}") from exc


class _Translated:
    # A class rather than @contextmanager: it guards every metadata call and every watch
    # receive, and a generator per use doubled the cost of a watched write.
    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, (model.MetadataError, StorageError)):
            _raise_translated(exc)


_TRANSLATED: Final = _Translated()


def translated() -> AbstractContextManager[None]:
    """Re-raise the model's (and the stub client's) errors as ``MetadataStore`` errors."""
    return _TRANSLATED


def versioned_value(stat: model.NodeStat | None) -> VersionedValue | None:
    """A node as the model read it, as ``MetadataStore.get`` returns it."""
    if stat is None:
        return None
    return VersionedValue(stat.value, stat.version, stat.ephemeral, stat.created_by_self)


class TranslatedWatchStream(ObjectReceiveStream[Notification]):
    """A ``StubWatch`` seen through the protocol: its notifications and errors translated."""

    def __init__(self, watch: StubWatch) -> None:
        self._watch = watch

    async def receive(self) -> Notification:
        with translated():
            note = await self._watch.receive()
        return Notification(note.path, NotificationKind(note.kind))

    async def aclose(self) -> None:
        self._watch.close()
        await anyio.lowlevel.checkpoint()
