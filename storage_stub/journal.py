"""The durable mode's append-only journal file (issue 4, part 2).

The format and the recovery rules (torn tail dropped, corruption in the middle reported with its
offset) are in ``storage_stub.journal_format``; this module owns the file.

Durability (:class:`FsyncPolicy`): an ``append`` only buffers; ``wait_durable(ticket)`` returns
once the record is as safe as the policy promises. ``always`` fsyncs as soon as someone waits
(waiters that arrive during an fsync share the next one: group commit); ``batch`` waits up to a
window on the injected clock first, so one fsync covers every record of the window; ``never``
hands the bytes to the OS (they survive a killed process, not a power cut). The waiting needs
:meth:`Journal.run`, the flusher, running in a task group. The fsync itself runs in a worker
thread so that the event loop keeps serving while the disk works.

Compaction (:meth:`Journal.rewrite`) replaces the file with a fresh one holding what the owner
says is live, via a temporary file, fsync and an atomic rename, so a crash leaves either the old
or the new journal, never a mix.
"""

from __future__ import annotations

import contextlib
import enum
import os
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import msgspec

from storage_stub.journal_format import (
    HEADER,
    MAX_RECORD_SIZE,
    RECORD_HEADER_SIZE,
    JournalCorruptedError,
    JournalError,
    ScanResult,
    encode_record,
    scan,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from protocol.clock import Clock

__all__ = [
    "HEADER",
    "MAX_RECORD_SIZE",
    "RECORD_HEADER_SIZE",
    "FsyncPolicy",
    "Journal",
    "JournalCorruptedError",
    "JournalError",
    "JournalFailedError",
    "JournalStatistics",
    "ScanResult",
    "encode_record",
    "scan",
]


class FsyncPolicy(enum.StrEnum):
    """When ``wait_durable`` returns (see the module docstring)."""

    ALWAYS = "always"
    BATCH = "batch"
    NEVER = "never"


class JournalFailedError(JournalError):
    """Writing or syncing the journal failed; nothing more can be made durable."""


class JournalStatistics(msgspec.Struct, frozen=True):
    records_appended: int
    size_bytes: int
    syncs: int
    rewrites: int
    durable_ticket: int
    appended_ticket: int


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes | bytearray) -> None:
    with memoryview(data) as view:
        written = 0
        while written < len(view):
            written += os.write(fd, view[written:])


class Journal:
    """An open journal file: appends, durability waits, compaction.

    Tickets: every :meth:`append` returns the next integer ticket; :meth:`wait_durable` takes
    one. Use :meth:`open` to create or recover a journal.
    """

    def __init__(
        self,
        path: Path,
        fd: int,
        size: int,
        *,
        clock: Clock,
        policy: FsyncPolicy,
        batch_window: float,
    ) -> None:
        self._path = path
        self._fd = fd
        self._size = size  # bytes in the file plus bytes buffered in _pending
        self._clock = clock
        self._policy = policy
        self._window = batch_window
        self._pending = bytearray()
        self._appended = 0
        self._durable = 0
        self._failed: BaseException | None = None
        self._io_lock = anyio.Lock()
        self._requested = anyio.Event()
        self._request_time = 0.0
        self._synced = anyio.Event()
        self._syncs = 0
        self._rewrites = 0
        self._closed = False

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        clock: Clock,
        policy: FsyncPolicy = FsyncPolicy.BATCH,
        batch_window: float = 0.002,
    ) -> tuple[Journal, ScanResult]:
        """Open (creating if needed) and recover a journal; drops a torn tail from the file.

        Args:
            path: The journal file.
            clock: Drives the ``batch`` window.
            policy: The fsync policy.
            batch_window: Seconds a ``batch`` sync waits for more records.

        Returns:
            The journal, positioned for appends, and what recovery found (the records).

        Raises:
            JournalCorruptedError: See :func:`scan`.
            OSError: The file cannot be read or written.
        """
        path = Path(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            with open(fd, "rb", closefd=False) as file:
                data = file.read()
            result = scan(data, path=str(path))
            end = result.valid_end
            if end < len(data):
                os.ftruncate(fd, end)  # rule 1: the torn tail goes, so appends follow valid data
            if end == 0:
                os.write(fd, HEADER)
                end = len(HEADER)
            os.fsync(fd)
            _fsync_dir(path.parent)
        except BaseException:
            os.close(fd)
            raise
        journal = cls(path, fd, end, clock=clock, policy=policy, batch_window=batch_window)
        return journal, result

    @property
    def path(self) -> Path:
        return self._path

    @property
    def size(self) -> int:
        """Bytes in the journal, including appended records not yet written out."""
        return self._size

    @property
    def failed(self) -> bool:
        """Whether a write or sync failed (the journal accepts no more appends)."""
        return self._failed is not None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def appended_ticket(self) -> int:
        """The ticket of the last append."""
        return self._appended

    @property
    def durable_ticket(self) -> int:
        """Every append up to this ticket is durable per the policy."""
        return self._durable

    def append(self, body: bytes) -> int:
        """Buffer one record; returns its ticket for :meth:`wait_durable`.

        Raises:
            JournalFailedError: An earlier write or sync failed, or the journal is closed.
        """
        if self._failed is not None or self._closed:
            raise JournalFailedError(f"journal {self._path} is not writable") from self._failed
        if len(body) > MAX_RECORD_SIZE:
            raise ValueError(f"record of {len(body)} bytes exceeds {MAX_RECORD_SIZE}")
        record = encode_record(body)
        self._pending += record
        self._size += len(record)
        self._appended += 1
        return self._appended

    async def wait_durable(self, ticket: int) -> None:
        """Return once the record with ``ticket`` (and every earlier one) is durable.

        Raises:
            JournalFailedError: A write or sync failed.
        """
        while self._durable < ticket:
            if self._failed is not None:
                raise JournalFailedError(f"journal {self._path} failed") from self._failed
            if self._policy is FsyncPolicy.NEVER:
                await self._flush(sync=False)
                continue
            if not self._requested.is_set():
                self._request_time = self._clock.now()
                self._requested.set()
            await self._synced.wait()
        if self._failed is not None and self._durable < ticket:  # pragma: no cover - defensive
            raise JournalFailedError(f"journal {self._path} failed") from self._failed

    async def run(self) -> None:
        """The flusher: performs the syncs ``wait_durable`` asks for; never returns."""
        while True:
            await self._requested.wait()
            if self._policy is FsyncPolicy.BATCH:
                await self._clock.sleep_until(self._request_time + self._window)
            self._requested = anyio.Event()
            # A failure is recorded in _failed and the waiters are woken to raise it.
            with contextlib.suppress(JournalFailedError):
                await self._flush(sync=True)

    async def flush(self) -> None:
        """Write and fsync everything appended so far, whatever the policy."""
        if self._appended > self._durable or self._pending:
            await self._flush(sync=True)

    async def rewrite(self, live_records: Callable[[], Iterable[bytes]]) -> None:
        """Compact: atomically replace the file with the records ``live_records()`` returns.

        ``live_records`` is called with appends quiesced, and must describe the owner's state
        including every record appended so far; those records are then dropped from the write
        buffer and count as durable once the new file is synced.

        Raises:
            JournalFailedError: Writing the new file failed (the old one is left in place).
        """
        async with self._io_lock:
            if self._failed is not None:
                raise JournalFailedError(f"journal {self._path} failed") from self._failed
            image = bytearray(HEADER)
            for body in live_records():
                image += encode_record(body)
            target = self._appended
            self._pending = bytearray()
            tmp = self._path.with_name(self._path.name + ".compact")
            try:
                fd = await anyio.to_thread.run_sync(self._write_new_file, tmp, bytes(image))
            except OSError as exc:
                raise JournalFailedError(f"rewriting journal {self._path} failed") from exc
            os.close(self._fd)
            self._fd = fd
            self._size = len(image) + len(self._pending)  # plus appends made meanwhile
            self._rewrites += 1
            self._mark_durable(target)

    def _write_new_file(self, tmp: Path, image: bytes) -> int:
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        try:
            _write_all(fd, image)
            os.fsync(fd)
            os.replace(tmp, self._path)
            _fsync_dir(self._path.parent)
        except BaseException:
            os.close(fd)
            raise
        return fd

    async def _flush(self, *, sync: bool) -> None:
        async with self._io_lock:
            if self._failed is not None:
                raise JournalFailedError(f"journal {self._path} failed") from self._failed
            target = self._appended
            if target <= self._durable and not self._pending:
                return
            data, self._pending = self._pending, bytearray()
            fd = self._fd
            try:
                if sync:
                    await anyio.to_thread.run_sync(self._write_and_sync, fd, data)
                    self._syncs += 1
                else:
                    _write_all(fd, data)  # into the page cache: microseconds, keep it inline
            except OSError as exc:
                self._failed = exc
                self._wake()
                raise JournalFailedError(f"writing journal {self._path} failed") from exc
            self._mark_durable(target)

    @staticmethod
    def _write_and_sync(fd: int, data: bytearray) -> None:
        if data:
            _write_all(fd, data)
        os.fsync(fd)

    def _mark_durable(self, target: int) -> None:
        self._durable = max(self._durable, target)
        self._wake()

    def _wake(self) -> None:
        event, self._synced = self._synced, anyio.Event()
        event.set()

    async def aclose(self) -> None:
        """Flush what is buffered (with an fsync) and close the file; idempotent."""
        if self._closed:
            return
        try:
            if self._failed is None:
                with anyio.CancelScope(shield=True):
                    await self.flush()
        finally:
            self._closed = True
            os.close(self._fd)

    def close_now(self) -> None:
        """Close the file without flushing (on an error path, before anything was appended)."""
        if not self._closed:
            self._closed = True
            os.close(self._fd)

    def statistics(self) -> JournalStatistics:
        return JournalStatistics(
            records_appended=self._appended,
            size_bytes=self._size,
            syncs=self._syncs,
            rewrites=self._rewrites,
            durable_ticket=self._durable,
            appended_ticket=self._appended,
        )
