"""The runner's side of its worker processes: start them, hand out plans, talk frames."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final, Protocol

import anyio
import anyio.abc

from loadgen.messages import Ready, ToRunner, ToWorker, WorkerFailed, WorkerPlan
from protocol import rpc
from protocol.errors import RemoteProtocolError

__all__ = ["WorkerError", "WorkerHandle", "WorkerLink", "open_workers"]

READY_TIMEOUT: Final = 60.0
"""Seconds a worker may take to import, connect and create its producers and consumers."""

EXIT_TIMEOUT: Final = 30.0


class WorkerError(Exception):
    """A worker failed; the message says which and why (its log has the rest)."""


class WorkerLink(Protocol):
    """The runner's end of a worker: a process (`WorkerHandle`) or a task (`loadgen.inprocess`)."""

    @property
    def index(self) -> int: ...

    async def send(self, message: ToWorker) -> None: ...

    async def receive(self) -> ToRunner:
        """The next message; raises `WorkerError` when the worker failed or is gone."""
        ...


class WorkerHandle:
    def __init__(self, index: int, process: anyio.abc.Process, log_path: Path) -> None:
        self.index = index
        self.process = process
        self.log_path = log_path
        self._decoder: rpc.RpcDecoder[ToRunner] = rpc.RpcDecoder(ToRunner)
        self._lock = anyio.Lock()

    async def send(self, message: ToWorker) -> None:
        assert self.process.stdin is not None
        async with self._lock:
            try:
                await self.process.stdin.send(rpc.encode(message))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                raise WorkerError(f"worker {self.index} is gone (log {self.log_path})") from None

    async def receive(self) -> ToRunner:
        """The next message.

        Raises:
            WorkerError: the worker exited without saying more.
        """
        assert self.process.stdout is not None
        try:
            while (message := self._decoder.next_message()) is None:
                try:
                    data = await self.process.stdout.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    raise WorkerError(f"worker {self.index} exited (log {self.log_path})") from None
                self._decoder.feed(data)
        except RemoteProtocolError as exc:
            raise WorkerError(f"worker {self.index} sent garbage: {exc}") from None
        if isinstance(message, WorkerFailed):
            raise WorkerError(f"worker {message.worker}: {message.error}")
        return message


@asynccontextmanager
async def open_workers(plans: list[WorkerPlan], log_dir: Path) -> AsyncIterator[list[WorkerHandle]]:
    """Start one process per plan, send the plans and wait until every worker is `Ready`.

    On exit the workers' pipes are closed and any worker still running is killed.

    Raises:
        WorkerError: a worker failed to start or to get ready.
    """
    log_dir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240  # once per run, before any I/O
    handles: list[WorkerHandle] = []
    logs = []
    try:
        for plan in plans:
            log_path = log_dir / f"worker-{plan.worker}.log"
            log = log_path.open("ab")
            logs.append(log)
            process = await anyio.open_process(
                [sys.executable, "-m", "loadgen.workers"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
            )
            handle = WorkerHandle(plan.worker, process, log_path)
            handles.append(handle)
            await handle.send(plan)
        with anyio.fail_after(READY_TIMEOUT):
            for handle in handles:
                message = await handle.receive()
                if not isinstance(message, Ready):
                    raise WorkerError(f"worker {handle.index} said {message!r} instead of Ready")
        yield handles
    except TimeoutError:
        raise WorkerError(f"the workers did not get ready in {READY_TIMEOUT:g} s") from None
    finally:
        with anyio.CancelScope(shield=True):
            for handle in handles:
                if handle.process.stdin is not None:
                    await handle.process.stdin.aclose()
            with anyio.move_on_after(EXIT_TIMEOUT):
                for handle in handles:
                    await handle.process.wait()
            for handle in handles:
                if handle.process.returncode is None:
                    handle.process.kill()
                    await handle.process.wait()
            for log in logs:
                log.close()
