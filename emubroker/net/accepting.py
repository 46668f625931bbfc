"""Accepting connections when the process runs out of file descriptors.

A hostile client can open connections until the broker reaches its limit of open files
(``RLIMIT_NOFILE``; 1024 by default on many systems). anyio's accept loop then raises, and its
task group takes the whole broker down with it. Netty's does not: it logs and waits a moment.
:class:`PatientListener` does the same: an ``accept`` that fails for want of resources (no file
descriptor, no buffer, no memory) or for a peer that gave up before it was accepted is logged
and retried after :data:`ACCEPT_RETRY_SECONDS`, while connections already open are served on;
once some close (keep-alive drops idle ones), accepting resumes.

:func:`raise_open_files_limit` raises the process's soft limit to its hard one at start-up, as
the JVM does on Linux and macOS (``-XX:+MaxFDLimit``, on by default), so that the limit a broker
meets is the system's, not a shell's default.
"""

from __future__ import annotations

import errno
import logging
import resource
from typing import TYPE_CHECKING, Any, Final

import anyio
from anyio.abc import Listener, SocketListener, SocketStream

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from anyio.abc import TaskGroup

    from protocol.clock import Clock

__all__ = ["ACCEPT_RETRY_SECONDS", "PatientListener", "raise_open_files_limit"]

log = logging.getLogger(__name__)

ACCEPT_RETRY_SECONDS: Final = 0.1
"""How long the accept loop waits after a failed accept: short enough that a freed descriptor
is used at once, long enough not to spin."""

_RETRIED: Final = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.ECONNABORTED, errno.EPROTO}
)


class PatientListener(Listener[SocketStream]):
    """A socket listener whose accept loop survives failed accepts (module docstring).

    Args:
        inner: The listening socket.
        clock: Times the wait after a failed accept.
        retry_after: Seconds to wait after a failed accept.
    """

    def __init__(
        self, inner: SocketListener, *, clock: Clock, retry_after: float = ACCEPT_RETRY_SECONDS
    ) -> None:
        self._inner = inner
        self._clock = clock
        self._retry_after = retry_after

    @property
    def extra_attributes(self) -> Mapping[Any, Callable[[], Any]]:
        return self._inner.extra_attributes

    async def serve(
        self, handler: Callable[[SocketStream], Any], task_group: TaskGroup | None = None
    ) -> None:
        async with anyio.create_task_group() as own:
            group = own if task_group is None else task_group
            failing = False
            while True:
                try:
                    stream = await self._inner.accept()
                except OSError as exc:
                    if exc.errno not in _RETRIED:
                        raise
                    if not failing:  # once per episode, not once per retry
                        log.warning("cannot accept connections: %s; retrying", exc)
                    failing = True
                    await self._clock.sleep(self._retry_after)
                    continue
                if failing:
                    log.warning("accepting connections again")
                    failing = False
                group.start_soon(handler, stream)

    async def aclose(self) -> None:
        await self._inner.aclose()


def raise_open_files_limit() -> None:
    """Raise the soft limit of open files to the hard one, where the system allows it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (OSError, ValueError):
        # An unlimited hard limit may be more than the kernel allows a process: keep ours.
        log.debug("could not raise the open files limit from %s to %s", soft, hard)
