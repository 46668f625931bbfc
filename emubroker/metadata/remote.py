"""A ``MetadataStore`` backed by the bookie stub's metadata service (``storage-stub serve``).

The local-cluster deployment (DESIGN.md, "Processes and deployments") hosts the metadata tree in
the stub process; every broker opens one :class:`RemoteMetadataStore` (one ZooKeeper-like
session) per broker through a ``storage_stub.client.StubClient``, which several stores may share.

How the ``MetadataStore`` contract maps onto the service:

- A store is one service session, created with ``metadataStoreSessionTimeoutMillis`` (30 s by
  default, Pulsar's) and heartbeated by the client. If the service ends it (expiry, stub
  restart) the store opens a new one on its next operation, exactly as ``expire_session`` does,
  so ephemeral nodes of the old session are gone and watchers saw them go.
- Watches are the service's: pushed notifications land in a per-watch buffer of
  ``watch_buffer_size``; a watcher that falls behind (or whose connection broke, losing
  notifications) gets ``WatchOverflowError`` after what was buffered, as with the memory backend.
- Errors are translated at this boundary (STYLE.md §1.11), by ``stub_mapping`` as for the
  memory backend: the service's ``InvalidArgument`` becomes ``ValueError``, its other metadata
  errors the matching ``emubroker.metadata`` class, and transport failures (timeout, lost
  connection, closed client) ``MetadataStoreError``.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final, Self

import anyio.lowlevel

from emubroker.metadata.memory import WATCH_BUFFER_SIZE
from emubroker.metadata.store import (
    MetadataStoreError,
    PutResult,
    StoreClosedError,
)
from emubroker.metadata.stub_mapping import TranslatedWatchStream, translated, versioned_value
from storage_stub import client as stub

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from types import TracebackType

    from anyio.abc import ObjectReceiveStream

    from emubroker.metadata.store import MetadataStore, Notification, VersionedValue

__all__ = ["DEFAULT_SESSION_TIMEOUT", "RemoteMetadataStore", "open_remote_metadata_store"]

logger = logging.getLogger(__name__)

# Pulsar's metadataStoreSessionTimeoutMillis default.
DEFAULT_SESSION_TIMEOUT: Final = 30.0


class RemoteMetadataStore:
    """One session on the stub's metadata service; implements ``MetadataStore``.

    Create it with :meth:`open` (on a client you own) or :func:`open_remote_metadata_store`.
    """

    def __init__(
        self,
        client: stub.StubClient,
        session: int,
        *,
        session_timeout: float,
        watch_buffer_size: int,
    ) -> None:
        self._client = client
        self._session = session
        self._session_timeout = session_timeout
        self._watch_buffer_size = watch_buffer_size
        self._watches: set[stub.StubWatch] = set()
        self._closed = False

    @classmethod
    async def open(
        cls,
        client: stub.StubClient,
        *,
        session_timeout: float = DEFAULT_SESSION_TIMEOUT,
        watch_buffer_size: int = WATCH_BUFFER_SIZE,
    ) -> RemoteMetadataStore:
        """Open a session on the service ``client`` is connected to.

        Raises:
            MetadataStoreError: The service could not be reached.
        """
        with translated():
            session = await client.session_create(session_timeout)
        return cls(
            client,
            session,
            session_timeout=session_timeout,
            watch_buffer_size=watch_buffer_size,
        )

    @property
    def session_id(self) -> int:
        """The current session's id; it changes when the session expires."""
        return self._session

    async def _current_session(self) -> int:
        if self._closed:
            raise StoreClosedError("the metadata store session is closed")
        if not self._client.session_alive(self._session):
            logger.warning("metadata session %s ended; opening a new one", self._session)
            with translated():
                self._session = await self._client.session_create(self._session_timeout)
        return self._session

    async def get(self, path: str) -> VersionedValue | None:
        """See ``MetadataStore.get``."""
        session = await self._current_session()
        with translated():
            return versioned_value(await self._client.get(session, path))

    async def put(
        self,
        path: str,
        value: bytes,
        expected_version: int | None = None,
        *,
        ephemeral: bool = False,
        sequential: bool = False,
    ) -> PutResult:
        """See ``MetadataStore.put``."""
        session = await self._current_session()
        with translated():
            try:
                put_path, version = await self._client.put(
                    session,
                    path,
                    value,
                    expected_version,
                    ephemeral=ephemeral,
                    sequential=sequential,
                )
            except stub.SessionExpiredError:
                # Expired between heartbeats: carry on with a new session, as expiry does.
                self._client.forget_session(session)
                session = await self._current_session()
                put_path, version = await self._client.put(
                    session,
                    path,
                    value,
                    expected_version,
                    ephemeral=ephemeral,
                    sequential=sequential,
                )
        return PutResult(put_path, version)

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        """See ``MetadataStore.delete``."""
        await self._current_session()
        with translated():
            await self._client.delete(path, expected_version)

    async def children(self, path: str) -> list[str]:
        """See ``MetadataStore.children``."""
        await self._current_session()
        with translated():
            return await self._client.children(path)

    async def exists(self, path: str) -> bool:
        """See ``MetadataStore.exists``."""
        await self._current_session()
        with translated():
            return await self._client.exists(path)

    @asynccontextmanager
    async def watch(self, path_prefix: str) -> AsyncIterator[ObjectReceiveStream[Notification]]:
        """See ``MetadataStore.watch``."""
        await self._current_session()
        with translated():
            watch = await self._client.watch(path_prefix, buffer_size=self._watch_buffer_size)
        self._watches.add(watch)
        try:
            yield TranslatedWatchStream(watch)
        finally:
            self._watches.discard(watch)
            watch.close()

    async def expire_session(self) -> None:
        """See ``MetadataStore.expire_session``."""
        old = await self._current_session()
        with translated():
            await self._client.session_close(old)  # our own watchers hear the deletions
            self._session = await self._client.session_create(self._session_timeout)

    async def wait_session_lost(self) -> str:
        """See ``MetadataStore.wait_session_lost``.

        Lost: the stub answered no heartbeat for the session's whole timeout
        (``storage_stub.channel``).
        """
        return await self._client.wait_unreachable()

    async def aclose(self) -> None:
        """See ``MetadataStore.aclose``."""
        if self._closed:
            await anyio.lowlevel.checkpoint()
            return
        self._closed = True
        # End our own watches first: a closing session is told nothing more.
        for watch in self._watches:
            watch.finish()
        self._watches.clear()
        if not self._client.session_alive(self._session):
            return  # ended already (lost, expired): nothing to close, no stub to wait for
        try:
            await self._client.session_close(self._session)
        except (stub.MetadataError, stub.StorageError) as exc:
            # Its ephemeral nodes go when the session times out on the service instead.
            logger.warning("could not close metadata session %s: %s", self._session, exc)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


@asynccontextmanager
async def open_remote_metadata_store(
    url: str,
    *,
    session_timeout: float = DEFAULT_SESSION_TIMEOUT,
    watch_buffer_size: int = WATCH_BUFFER_SIZE,
) -> AsyncIterator[RemoteMetadataStore]:
    """Connect to a metadata service at ``url`` (``stub://host:port``) with a session of its own.

    Raises:
        MetadataStoreError: The service could not be reached.
    """
    try:
        async with stub.open_stub_client(url) as client:
            store = await RemoteMetadataStore.open(
                client, session_timeout=session_timeout, watch_buffer_size=watch_buffer_size
            )
            async with store:
                yield store
    except stub.StubConnectionError as exc:
        raise MetadataStoreError(f"cannot reach the metadata service at {url}: {exc}") from exc


if TYPE_CHECKING:

    def _conforms(store: RemoteMetadataStore) -> MetadataStore:
        # mypy proves here that RemoteMetadataStore satisfies the MetadataStore protocol.
        return store
