"""The supervisor's control socket: ``emubroker cluster kill|start|stop`` from another shell.

A Unix socket in the run directory (so only its owner reaches it). One request per connection:
the client sends a JSON :data:`Request` and a newline, the supervisor answers one JSON
:class:`Reply` and a newline and closes. ``status`` needs no socket: it reads the state file.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Final

import anyio
import msgspec
from anyio.streams.buffered import BufferedByteReceiveStream

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from anyio.abc import SocketStream, TaskStatus

__all__ = [
    "ControlError",
    "KillBroker",
    "Reply",
    "Request",
    "StartBroker",
    "StopCluster",
    "call",
    "serve_control",
]

log = logging.getLogger(__name__)

# A request is a few dozen bytes and a reply carries the state (~300 bytes per broker).
_MAX_MESSAGE: Final = 1 << 20
# A request that waits for a broker to start may take as long as the start itself.
CALL_TIMEOUT: Final = 90.0


class StartBroker(msgspec.Struct, tag="start", frozen=True):
    """Start a broker that is not running, on its ports."""

    broker: str


class KillBroker(msgspec.Struct, tag="kill", frozen=True):
    """Send a signal (a name like ``KILL`` or a number) to a broker."""

    broker: str
    signal: str = "TERM"


class StopCluster(msgspec.Struct, tag="stop", frozen=True):
    """Stop the whole cluster, as SIGTERM to the supervisor does."""


Request = StartBroker | KillBroker | StopCluster


class Reply(msgspec.Struct, frozen=True):
    """The supervisor's answer: whether it worked, and what happened, in words."""

    ok: bool
    message: str


class ControlError(RuntimeError):
    """The supervisor cannot be reached, or refused the request."""


_REQUEST = msgspec.json.Decoder(Request)
_REPLY = msgspec.json.Decoder(Reply)
_ENCODER = msgspec.json.Encoder()


async def serve_control(
    path: Path,
    handle: Callable[[Request], Awaitable[Reply]],
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Answer requests on the Unix socket ``path`` with ``handle`` until cancelled."""
    await anyio.Path(path).unlink(missing_ok=True)  # left by a supervisor that died
    listener = await anyio.create_unix_listener(path)
    try:
        async with listener:
            task_status.started()
            await listener.serve(lambda stream: _answer(stream, handle))
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.Path(path).unlink(missing_ok=True)


async def _answer(stream: SocketStream, handle: Callable[[Request], Awaitable[Reply]]) -> None:
    async with stream:
        try:
            raw = await BufferedByteReceiveStream(stream).receive_until(b"\n", _MAX_MESSAGE)
            request = _REQUEST.decode(raw)
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound):
            return
        except msgspec.DecodeError as exc:
            reply = Reply(ok=False, message=f"bad request: {exc}")
        else:
            try:
                reply = await handle(request)
            except Exception as exc:  # a task boundary: the supervisor goes on
                log.exception("control request %s failed", request)
                reply = Reply(ok=False, message=f"{type(exc).__name__}: {exc}")
        # The caller may have given up waiting.
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await stream.send(_ENCODER.encode(reply) + b"\n")


async def call(path: Path, request: Request, *, within: float = CALL_TIMEOUT) -> Reply:
    """Send ``request`` to the supervisor listening on ``path``.

    Raises:
        ControlError: Nobody listens there, or the answer is unreadable.
    """
    try:
        with anyio.fail_after(within):
            async with await anyio.connect_unix(path) as stream:
                await stream.send(_ENCODER.encode(request) + b"\n")
                raw = await BufferedByteReceiveStream(stream).receive_until(b"\n", _MAX_MESSAGE)
    except (OSError, anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound) as exc:
        raise ControlError(f"no cluster supervisor answers on {path}: {exc}") from exc
    except TimeoutError:
        raise ControlError(f"the cluster supervisor did not answer within {within:g} s") from None
    try:
        return _REPLY.decode(raw)
    except msgspec.DecodeError as exc:
        raise ControlError(f"unreadable answer from the supervisor: {exc}") from exc
