"""The supervisor's side of a zygote: children forked from a process that imported them once.

A broker's start is almost all importing its modules (~0.35 s of CPU); N brokers started as
fresh interpreters pay that N times, on a machine that may have 2 cores. :class:`Zygote` starts
one process (``python -m emubroker.zygote``) that imports them once, then asks it to fork one
child per broker (``emubroker.processes.forking`` is its loop). Each child is a process of its
own as before: its own pid, session, output (read for its ready line, copied to its log) and
exit status (which the zygote reports, as it is their parent), so killing, stopping and
restarting one works as for an exec'd child.

Only commands starting with the zygote's ``prefix`` (``python -m emubroker``) are forked; any
other, and every command once the zygote is gone, is exec'd (:data:`EXEC`). A zygote that dies
takes its children's exit statuses with it: they are killed then (the supervisor could not see
them exit), reported so, and later starts are exec'd.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import socket
from typing import TYPE_CHECKING, Final

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from emubroker.processes.children import EXEC, Exec, spawn, stop
from emubroker.processes.forking import READY_LINE

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from anyio.abc import ByteReceiveStream, ByteSendStream, Process, TaskGroup

__all__ = ["ForkedProcess", "Zygote"]

log = logging.getLogger(__name__)

_READY: Final = re.compile(re.escape(READY_LINE))
# The zygote's answers and exit reports are short lines; this bounds what one may buffer.
_MAX_LINE: Final = 1 << 16


class ForkedProcess(anyio.abc.Process):
    """A child the zygote forked: signalled by pid, its exit status reported by the zygote."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._returncode: int | None = None
        self._exited = anyio.Event()
        self._stdout: ByteReceiveStream | None = None

    def attach_output(self, stdout: ByteReceiveStream) -> None:
        """Its stdout and stderr, one stream."""
        self._stdout = stdout

    def exited(self, code: int) -> None:
        """The zygote reported its exit status (or is gone: ``-SIGKILL``)."""
        if self._returncode is None:
            self._returncode = code
            self._exited.set()

    async def wait(self) -> int:
        await self._exited.wait()
        assert self._returncode is not None
        return self._returncode

    def send_signal(self, signal: signal.Signals) -> None:
        if self._returncode is not None:
            raise ProcessLookupError(self._pid)  # as an exec'd child that was reaped
        os.kill(self._pid, signal)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    async def aclose(self) -> None:
        if self._stdout is not None:
            await self._stdout.aclose()
        await self.wait()

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def returncode(self) -> int | None:
        return self._returncode

    @property
    def stdin(self) -> ByteSendStream | None:
        return None

    @property
    def stdout(self) -> ByteReceiveStream | None:
        return self._stdout

    @property
    def stderr(self) -> ByteReceiveStream | None:
        return None  # one stream with stdout, as the exec'd children's


class Zygote:
    """A running zygote; a :class:`~emubroker.processes.Launcher` for ``spawn``."""

    def __init__(
        self, prefix: Sequence[str], process: Process, control: anyio.abc.UNIXSocketStream
    ) -> None:
        self._prefix = list(prefix)
        self._process = process
        self._control = control
        self._lock = anyio.Lock()  # one request and its answer at a time
        self._answers_in, self._answers = anyio.create_memory_object_stream[ForkedProcess | str](1)
        self._children: dict[int, ForkedProcess] = {}
        self._gone = False
        self._closing = False

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        prefix: Sequence[str],
        *,
        log_path: Path,
        task_group: TaskGroup,
    ) -> Zygote:
        """Start ``argv`` (a zygote) and wait until it serves.

        Args:
            argv: The zygote's command (``python -m emubroker.zygote``).
            prefix: What a command forked by it starts with (``python -m emubroker``).
            log_path: Where its own output goes.
            task_group: Where its output's copier and the reader of its answers run.

        Raises:
            ChildStartError: It did not start.
            OSError: It cannot be started.
        """
        ours, theirs = socket.socketpair()
        try:
            with theirs:
                process, _ = await spawn(
                    "zygote",
                    argv,
                    ready=_READY,
                    log_path=log_path,
                    task_group=task_group,
                    launcher=Exec(stdin=theirs.fileno()),
                )
            control = await anyio.abc.UNIXSocketStream.from_socket(ours)
        except BaseException:
            ours.close()
            raise
        zygote = cls(prefix, process, control)
        task_group.start_soon(zygote._read)
        log.info("brokers fork from a zygote (pid %d) that imported their modules", process.pid)
        return zygote

    async def open(self, argv: Sequence[str], *, own_session: bool) -> Process:
        """Fork ``argv`` if it is the zygote's program (and the zygote runs), else exec it.

        The forked child is in a session of its own whatever ``own_session`` says; a command
        that must stay in the caller's session is exec'd.
        """
        ours = list(argv[: len(self._prefix)]) == self._prefix
        if self._gone or not own_session or not ours:
            return await EXEC.open(argv, own_session=own_session)
        async with self._lock:
            # Shielded: an answer left unread would be taken as the next request's, and a
            # child forked for a cancelled start would run unseen.
            with anyio.CancelScope(shield=True):
                answer = await self._fork(list(argv[len(self._prefix) :]))
        if isinstance(answer, str):
            log.warning("%s; exec'ing %s", answer, " ".join(argv))
            return await EXEC.open(argv, own_session=own_session)
        return answer

    async def _fork(self, args: list[str]) -> ForkedProcess | str:
        """The forked child (its output attached), or why there is none."""
        if self._gone:
            return "the zygote is gone"
        ours, theirs = socket.socketpair()
        with theirs:
            message = json.dumps({"args": args}).encode() + b"\n"
            try:
                await self._control.send_fds(message, [theirs.fileno()])
                answer = await self._answers.receive()
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
                answer = "the zygote is gone"
            except OSError as exc:
                answer = f"the zygote cannot be reached: {exc}"
        if isinstance(answer, str):
            ours.close()
            return answer
        answer.attach_output(await anyio.abc.UNIXSocketStream.from_socket(ours))
        return answer

    async def _read(self) -> None:
        """The zygote's answers and exit reports, until it is gone or closed (``aclose``)."""
        # Shielded: the forked children's exits are known only from here, and a supervisor
        # that is cancelled (a signal) waits for them as it stops; ``aclose`` ends it.
        with anyio.CancelScope(shield=True):
            try:
                await self._read_reports()
            finally:
                self._gone = True
                self._answers_in.close()
                if not self._closing:
                    log.warning("the zygote exited; brokers start as fresh interpreters from now")
                self._kill_unseen()

    async def _read_reports(self) -> None:
        lines = BufferedByteReceiveStream(self._control)
        with contextlib.suppress(
            anyio.EndOfStream,
            anyio.IncompleteRead,
            anyio.DelimiterNotFound,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,  # by aclose
        ):
            while True:
                message = json.loads(await lines.receive_until(b"\n", _MAX_LINE))
                if "exit" in message:
                    child = self._children.pop(message["exit"], None)
                    if child is not None:
                        child.exited(message["code"])
                elif "pid" in message:
                    # Known before the answer is handed over: its exit report may come next.
                    child = self._children[message["pid"]] = ForkedProcess(message["pid"])
                    await self._answers_in.send(child)
                else:
                    await self._answers_in.send(str(message["error"]))

    def _kill_unseen(self) -> None:
        """Kill the children still running: with the zygote gone, their exits would go unseen.

        After a cluster's stop none is left but one whose start was under way as it stopped;
        a zygote killed from outside leaves them all.
        """
        if self._children:
            log.warning(
                "killing the %d processes the zygote forked that still run (their exits would "
                "go unseen)",
                len(self._children),
            )
        for child in self._children.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
            child.exited(-signal.SIGKILL)
        self._children.clear()

    async def aclose(self) -> None:
        """Stop the zygote; a child still running is killed (``_kill_unseen``)."""
        self._gone = self._closing = True
        self._answers.close()
        with anyio.CancelScope(shield=True):
            await self._control.aclose()  # ends the reader; the zygote exits at the EOF
            await stop(self._process)
