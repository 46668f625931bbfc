"""Metadata store: the ``MetadataStore`` protocol and its in-memory backend."""

from __future__ import annotations

from emubroker.metadata.memory import (
    WATCH_BUFFER_SIZE,
    MemoryMetadataStore,
    MemoryMetadataTree,
    MemoryMetadataTreeStatistics,
)
from emubroker.metadata.store import (
    SEQUENTIAL_DIGITS,
    BadVersionError,
    InvalidPathError,
    MetadataStore,
    MetadataStoreError,
    NotFoundError,
    Notification,
    NotificationKind,
    PutResult,
    StoreClosedError,
    VersionedValue,
    WatchOverflowError,
    validate_path,
)

__all__ = [
    "SEQUENTIAL_DIGITS",
    "WATCH_BUFFER_SIZE",
    "BadVersionError",
    "InvalidPathError",
    "MemoryMetadataStore",
    "MemoryMetadataTree",
    "MemoryMetadataTreeStatistics",
    "MetadataStore",
    "MetadataStoreError",
    "NotFoundError",
    "Notification",
    "NotificationKind",
    "PutResult",
    "StoreClosedError",
    "VersionedValue",
    "WatchOverflowError",
    "validate_path",
]
