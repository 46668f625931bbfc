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

A store failure that escapes the broker's own tasks once it serves, while the session is not yet
counted as lost (a request to an unreachable store timing out), ends the broker the same way:
nothing but a lost store makes them fail for good. Before it serves, such a failure is a failure
to start, and propagates as it is (``emubroker: cannot start: ...``).
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

__all__ = ["MetadataSessionLostError", "SessionGuard", "stop_on_session_loss"]

log = logging.getLogger(__name__)


class MetadataSessionLostError(RuntimeError):
    """The broker stopped because its metadata session was lost; the message says why."""


class SessionGuard:
    """What :func:`stop_on_session_loss` yields; the block says when the broker serves."""

    def __init__(self) -> None:
        self.is_serving = False
        self.lost: str | None = None

    def serving(self) -> None:
        """From now on a store failure under the block stops a serving broker.

        Before, it is a failure to start and propagates as it is.
        """
        self.is_serving = True

    def give_up(self, reason: str) -> None:
        if self.lost is None:
            self.lost = reason
            log.error(
                "metadata session lost: %s; shutting down the broker "
                "(zookeeperSessionExpiredPolicy=shutdown)",
                reason,
            )


@asynccontextmanager
async def stop_on_session_loss(store: MetadataStore) -> AsyncIterator[SessionGuard]:
    """Run the block (the broker) until ``store`` loses its session, then cancel it.

    Raises:
        MetadataSessionLostError: The session was lost, or the store failed under the block
            once it called :meth:`SessionGuard.serving`.
        MetadataStoreError: The store failed under the block before that.
    """
    guard = SessionGuard()

    async def watch(scope: anyio.CancelScope) -> None:
        guard.give_up(await store.wait_session_lost())
        scope.cancel()
        await store.aclose()  # every later call fails at once: nothing waits on the way out

    failure: MetadataStoreError | None = None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch, tg.cancel_scope)
            yield guard
            tg.cancel_scope.cancel()
    except* MetadataStoreError as group:
        failure = _first(group)
    if failure is not None and guard.lost is None:
        if not guard.is_serving:
            raise failure
        guard.give_up(f"the metadata store failed: {failure}")
    if guard.lost is not None:
        raise MetadataSessionLostError(guard.lost)


def _first(group: BaseExceptionGroup[MetadataStoreError]) -> MetadataStoreError:
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first
