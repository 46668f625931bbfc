"""Child processes: start one, wait for its ``ready`` line, stop it.

The cluster supervisor starts its stub and brokers with :func:`spawn`, and loadgen its broker,
stub or ``emubroker cluster``. Their stdout and stderr go through one pipe: read line by line
until the ``ready`` line, then copied to their log file until they exit, so a chatty child never
blocks on a full pipe. The copy outlives its task group's cancellation (a signal to the
supervisor cancels everything at once, while the children it then stops still write their last
lines): once cancelled, it goes on until the child's pipe closes, for at most ``DRAIN_TIMEOUT``.
The supervisor's children run in a session of their own
(``own_session``): Ctrl-C in a terminal signals the terminal's foreground process group, and
the supervisor, not the terminal, must decide the order in which the cluster stops (brokers
first, then the stub). loadgen's children stay in its session: Ctrl-C reaches them with it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
from typing import TYPE_CHECKING, BinaryIO, Final, Protocol

import anyio
import psutil
from anyio.streams.buffered import BufferedByteReceiveStream

if TYPE_CHECKING:
    import re
    from collections.abc import Sequence
    from pathlib import Path

    from anyio.abc import Process, TaskGroup

__all__ = [
    "DRAIN_TIMEOUT",
    "EXEC",
    "READY_TIMEOUT",
    "STOP_TIMEOUT",
    "ChildStartError",
    "Exec",
    "Launcher",
    "describe_exit",
    "parse_signal",
    "spawn",
    "start_time",
    "stop",
]

log = logging.getLogger(__name__)

READY_TIMEOUT: Final = 60.0
"""Seconds a child may take to print its ready line (a guard: a broker takes well under one)."""

STOP_TIMEOUT: Final = 15.0
"""Seconds a child may take to stop after SIGTERM before it is killed."""

DRAIN_TIMEOUT: Final = 2 * STOP_TIMEOUT + 5.0
"""Seconds a child's output is still copied after the copy was cancelled, until its pipe closes.

A stopping supervisor stops its brokers (``STOP_TIMEOUT`` each, together), then the stub
(``STOP_TIMEOUT``): their last lines come meanwhile. A bound, for a child nobody stops."""

# A ready line is short; a longer line before it is a log line we only copy. Bounds what we buffer.
_MAX_LINE: Final = 1 << 20
# The last lines before a failed start are quoted in the error.
_TAIL: Final = 10


class ChildStartError(RuntimeError):
    """A child exited, or stayed silent, before printing its ready line."""


class Launcher(Protocol):
    """How a child's process comes to be: :class:`Exec`, or forked by a zygote."""

    async def open(self, argv: Sequence[str], *, own_session: bool) -> Process:
        """Start ``argv``, its stdout and stderr one stream (``Process.stdout``).

        Raises:
            OSError: It cannot be started.
        """
        ...

    async def aclose(self) -> None:
        """Release what starting children takes (children already started run on)."""
        ...


class Exec:
    """Children as fresh interpreters: ``argv`` exec'd."""

    def __init__(self, *, stdin: int = subprocess.DEVNULL) -> None:
        self._stdin = stdin

    async def open(self, argv: Sequence[str], *, own_session: bool) -> Process:
        return await anyio.open_process(
            list(argv),
            stdin=self._stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=own_session,
            env=_child_env(),
        )

    async def aclose(self) -> None:
        pass


EXEC: Final = Exec()


def _open_log(path: Path) -> BinaryIO:
    return path.open("ab", buffering=0)


def _child_env() -> dict[str, str]:
    # Unbuffered, so the log file and the ready line follow the child as it runs.
    return dict(os.environ, PYTHONUNBUFFERED="1")


async def spawn(
    name: str,
    argv: Sequence[str],
    *,
    ready: re.Pattern[str],
    log_path: Path,
    task_group: TaskGroup,
    ready_within: float = READY_TIMEOUT,
    own_session: bool = True,
    launcher: Launcher = EXEC,
) -> tuple[Process, re.Match[str]]:
    """Start ``argv`` and wait until a line of its output matches ``ready``.

    Args:
        name: What to call the child in messages.
        argv: The command.
        ready: The ready line's pattern.
        log_path: Where the child's output goes (appended).
        task_group: Where the task copying its output after the ready line runs.
        ready_within: Seconds to wait for the ready line.
        own_session: Start it in a session of its own (a terminal's Ctrl-C does not reach it).
        launcher: How its process comes to be (exec'd by default).

    Returns:
        The running process and the ready line's match.

    Raises:
        ChildStartError: It exited or timed out first (it is killed then); the message quotes
            its last lines and names its log.
        OSError: The command cannot be started.
    """
    sink = _open_log(log_path)
    try:
        process = await launcher.open(argv, own_session=own_session)
    except BaseException:
        sink.close()
        raise
    assert process.stdout is not None
    output = BufferedByteReceiveStream(process.stdout)
    tail: list[str] = []
    try:
        with anyio.fail_after(ready_within):
            while True:
                try:
                    raw = await output.receive_until(b"\n", _MAX_LINE)
                except (anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound):
                    code = await process.wait()
                    raise ChildStartError(
                        f"{name} exited with status {code} before it was ready"
                        + _quote(tail, log_path)
                    ) from None
                sink.write(raw + b"\n")
                line = raw.decode(errors="replace")
                tail = [*tail[-(_TAIL - 1) :], line]
                match = ready.search(line)
                if match is not None:
                    break
    except BaseException as exc:
        with anyio.CancelScope(shield=True):
            await stop(process)
            await output.aclose()
        sink.close()
        if isinstance(exc, TimeoutError):
            raise ChildStartError(
                f"{name} printed no ready line within {ready_within:g} s" + _quote(tail, log_path)
            ) from None
        raise
    task_group.start_soon(_copy_output, output, sink)
    return process, match


def _quote(tail: list[str], log_path: Path) -> str:
    lines = "".join(f"\n  | {line}" for line in tail)
    return f"{lines}\n  (its output is in {log_path})"


async def _copy_output(output: BufferedByteReceiveStream, sink: BinaryIO) -> None:
    with sink:
        try:
            try:
                await _copy_until_closed(output, sink)
            except anyio.get_cancelled_exc_class():
                # The child is being stopped, or will be: its last lines are still to come.
                with anyio.move_on_after(DRAIN_TIMEOUT, shield=True):
                    await _copy_until_closed(output, sink)
                raise
        finally:
            with anyio.CancelScope(shield=True):
                await output.aclose()


async def _copy_until_closed(output: BufferedByteReceiveStream, sink: BinaryIO) -> None:
    # What the ready-line reader buffered past the ready line comes out first.
    with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
        while True:
            sink.write(await output.receive())


async def stop(
    process: Process, *, sig: signal.Signals = signal.SIGTERM, grace: float = STOP_TIMEOUT
) -> int:
    """Send ``sig`` and wait for the exit; SIGKILL after ``grace`` s. Returns the exit status.

    A process that already exited is only reaped.
    """
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)
        with anyio.move_on_after(grace):
            return await process.wait()
        log.warning("pid %s did not stop within %g s; killing it", process.pid, grace)
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    return await process.wait()


def parse_signal(name: str) -> signal.Signals:
    """``KILL``, ``SIGKILL`` or ``9`` as a signal.

    Raises:
        ValueError: No such signal.
    """
    text = name.strip().upper()
    try:
        if text.isdecimal():
            return signal.Signals(int(text))
        return signal.Signals[text if text.startswith("SIG") else "SIG" + text]
    except (KeyError, ValueError):
        raise ValueError(f"unknown signal {name!r}") from None


def describe_exit(code: int) -> str:
    """``exited with status 1``, ``killed by SIGKILL`` (a negative status is the signal)."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def start_time(pid: int) -> float | None:
    """When the process started, as the OS records it (tells it from a later one with its pid)."""
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None
