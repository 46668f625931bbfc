"""Workers as tasks of this process, their frames through memory (the simulator's traffic).

`open_inprocess_workers` is `loadgen.pool.open_workers` without processes: each plan runs
`loadgen.workers.run_worker` in a task of the caller's event loop, with the caller's clock and
connector, so a run can go on a virtual clock against brokers hosted in the same process
(`emubroker simulate`). The runner talks to them exactly as to worker processes: the same
messages, in the same order.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from loadgen.messages import Ready, ToRunner, ToWorker, WorkerFailed, WorkerPlan
from loadgen.pool import READY_TIMEOUT, WorkerError
from loadgen.workers import run_worker

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from protocol.client import Connector
    from protocol.clock import Clock

__all__ = ["MemoryWorkerHandle", "open_inprocess_workers"]


class MemoryWorkerHandle:
    """The runner's end of an in-process worker (the `loadgen.pool.WorkerLink` surface)."""

    def __init__(
        self,
        index: int,
        to_worker: MemoryObjectSendStream[ToWorker],
        from_worker: MemoryObjectReceiveStream[ToRunner],
    ) -> None:
        self.index = index
        self._to = to_worker
        self._from = from_worker

    async def send(self, message: ToWorker) -> None:
        try:
            await self._to.send(message)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise WorkerError(f"worker {self.index} is gone") from None

    async def receive(self) -> ToRunner:
        """The next message.

        Raises:
            WorkerError: the worker failed, or ended without saying more.
        """
        try:
            message = await self._from.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise WorkerError(f"worker {self.index} ended") from None
        if isinstance(message, WorkerFailed):
            raise WorkerError(f"worker {message.worker}: {message.error}")
        return message

    def close(self) -> None:
        """Tell the worker the runner is gone (its next `receive` raises `EOFError`)."""
        self._to.close()
        self._from.close()


class _MemoryChannel:
    """The worker's end (the `loadgen.workers.Channel` surface)."""

    def __init__(
        self,
        to_runner: MemoryObjectSendStream[ToRunner],
        from_runner: MemoryObjectReceiveStream[ToWorker],
    ) -> None:
        self._to = to_runner
        self._from = from_runner

    async def send(self, message: ToRunner) -> None:
        # The runner stops reading once it has a worker's Final; later messages are dropped.
        try:
            await self._to.send(message)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise EOFError("the runner is gone") from None

    async def receive(self) -> ToWorker:
        try:
            return await self._from.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise EOFError("the runner closed the channel") from None

    def close(self) -> None:
        self._to.close()
        self._from.close()


async def _serve(channel: _MemoryChannel, clock: Clock, connector: Connector) -> None:
    try:
        await run_worker(channel, clock, connector=connector)
    except EOFError:
        return  # the runner ended the run early (it says why)
    finally:
        channel.close()


@asynccontextmanager
async def open_inprocess_workers(
    plans: Sequence[WorkerPlan], *, clock: Clock, connector: Connector
) -> AsyncIterator[list[MemoryWorkerHandle]]:
    """Start one worker task per plan, send the plans and wait until every worker is `Ready`.

    On a normal exit the workers, which have sent their `Final`, are waited for; when the body
    raises they are cancelled.

    Raises:
        WorkerError: a worker failed to get ready.
    """
    handles: list[MemoryWorkerHandle] = []
    async with anyio.create_task_group() as tg:
        try:
            for plan in plans:
                to_worker, worker_in = anyio.create_memory_object_stream[ToWorker](math.inf)
                worker_out, from_worker = anyio.create_memory_object_stream[ToRunner](math.inf)
                handle = MemoryWorkerHandle(plan.worker, to_worker, from_worker)
                handles.append(handle)
                tg.start_soon(_serve, _MemoryChannel(worker_out, worker_in), clock, connector)
                await handle.send(plan)
            try:
                with anyio.fail_after(READY_TIMEOUT):
                    for handle in handles:
                        message = await handle.receive()
                        if not isinstance(message, Ready):
                            raise WorkerError(
                                f"worker {handle.index} said {message!r} instead of Ready"
                            )
            except TimeoutError:
                raise WorkerError(f"the workers did not get ready in {READY_TIMEOUT:g} s") from None
            yield handles
        except BaseException:
            tg.cancel_scope.cancel()
            raise
        finally:
            for handle in handles:
                handle.close()
