"""What a broker does when its metadata session is lost: it shuts down, at once.

Pulsar's broker reacts to the metadata store's ``SessionLost`` event (the store stayed
unreachable for the whole session timeout, so nothing proves its locks and leadership still
hold) by its ``zookeeperSessionExpiredPolicy``, ``shutdown`` by default: it stops. So does ours,
as a clean, prompt stop:

- one ERROR line says why;
- the store is closed first, so nothing on the way out waits for the unreachable service
  (the final cursor flush, the release of the leadership and of the registration each fail at
  once instead of waiting their timeouts), and everything the broker runs is cancelled;
- the block raises :class:`MetadataSessionLostError`, which ``emubroker broker`` turns into exit
  status 1 without a traceback.

A store failure that escapes the broker's own tasks while the session is not yet counted as lost
(a request to an unreachable store timing out, ``metadataStoreOperationTimeoutSeconds``) ends the
broker the same way: nothing but a lost store makes them fail for good.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from emubroker.metadata.store import MetadataStoreError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from emubroker.metadata.store import MetadataStore

__all__ = ["MetadataSessionLostError", "stop_on_session_loss"]

log = logging.getLogger(__name__)


class MetadataSessionLostError(RuntimeError):
    """The broker stopped because its metadata session was lost; the message says why."""


@asynccontextmanager
async def stop_on_session_loss(store: MetadataStore) -> AsyncIterator[None]:
    """Run the block (the broker) until ``store`` loses its session, then cancel it.

    Raises:
        MetadataSessionLostError: The session was lost, or the store failed under the block.
    """
    lost: list[str] = []

    async def watch(scope: anyio.CancelScope) -> None:
        reason = await store.wait_session_lost()
        give_up(reason, scope)
        await store.aclose()  # every later call fails at once: nothing waits on the way out

    def give_up(reason: str, scope: anyio.CancelScope) -> None:
        if not lost:
            lost.append(reason)
            log.error(
                "metadata session lost: %s; shutting down the broker "
                "(zookeeperSessionExpiredPolicy=shutdown)",
                reason,
            )
        scope.cancel()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch, tg.cancel_scope)
            yield
            tg.cancel_scope.cancel()
    except* MetadataStoreError as group:
        give_up(f"the metadata store failed: {group.exceptions[0]}", anyio.CancelScope())
    if lost:
        raise MetadataSessionLostError(lost[0])
