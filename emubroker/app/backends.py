"""Where the broker keeps its metadata and entries: in memory, a stub in this process, or outside.

The stub's server and the etcd client are imported only by the brokers that use them (start-up
CPU, docs/performance.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

from emubroker.metadata.etcd_url import is_etcd_url
from emubroker.metadata.remote import (
    DEFAULT_SESSION_TIMEOUT,
    RemoteMetadataStore,
    open_remote_metadata_store,
)
from emubroker.storage import BookieBackend
from storage_stub import client as stub
from storage_stub.journal import FsyncPolicy

if TYPE_CHECKING:
    from emubroker.metadata import MetadataStore
    from emubroker.storage import LedgerBackend


@asynccontextmanager
async def open_storage(
    *,
    data_dir: str | None = None,
    metadata_url: str | None = None,
    bookie_url: str | None = None,
    fsync: FsyncPolicy = FsyncPolicy.BATCH,
    session_timeout: float = DEFAULT_SESSION_TIMEOUT,
) -> AsyncIterator[tuple[MetadataStore | None, LedgerBackend | None]]:
    """The broker's storage: in memory, a durable stub in this process, or an external stub.

    Args:
        data_dir: Host the stub and the metadata service in this process, durable in this
            directory (``emubroker standalone --data-dir``).
        metadata_url: ``stub://host:port`` of an external metadata service, or
            ``etcd://host:port[,host:port...][/chroot]`` of an etcd cluster.
        bookie_url: ``stub://host:port`` of an external bookie stub.
        fsync: The hosted stub's journal fsync policy.
        session_timeout: Seconds an external metadata session outlives its last heartbeat
            (``metadataStoreSessionTimeoutMillis``).

    Yields:
        ``(metadata, ledgers)`` for :func:`open_broker`: where entries live (a
        ``storage.LedgerBackend``); ``(None, None)`` for memory.

    Raises:
        RuntimeError: ``data_dir`` is used by another process.
        MetadataStoreError, StorageError: An external service cannot be reached.
    """
    async with AsyncExitStack() as stack:
        metadata: MetadataStore | None = None
        ledgers: LedgerBackend | None = None
        if data_dir is not None:
            # Only ``--data-dir`` hosts the stub in-process: brokers of a cluster skip importing
            # the server, ~6 % of their start-up CPU (docs/performance.md, cluster start-up).
            from storage_stub.server import open_stub_server

            server = await stack.enter_async_context(
                open_stub_server(data_dir=data_dir, fsync=fsync)
            )
            client = await stack.enter_async_context(server.open_local_client())
            metadata = await stack.enter_async_context(
                await RemoteMetadataStore.open(client, session_timeout=session_timeout)
            )
            ledgers = BookieBackend(client)
        if metadata_url is not None and is_etcd_url(metadata_url):
            # The etcd client (nine modules) is imported only by the brokers that use it.
            from emubroker.metadata.etcd import open_etcd_metadata_store

            metadata = await stack.enter_async_context(
                open_etcd_metadata_store(metadata_url, session_timeout=session_timeout)
            )
        elif metadata_url is not None:
            metadata = await stack.enter_async_context(
                open_remote_metadata_store(metadata_url, session_timeout=session_timeout)
            )
        if bookie_url is not None:
            ledgers = BookieBackend(
                await stack.enter_async_context(stub.open_stub_client(bookie_url))
            )
        yield metadata, ledgers
