"""Tests for ``storage_stub.journal``: record format, crash recovery, fsync policies, compaction."""

from __future__ import annotations

import os
import struct
from typing import TYPE_CHECKING

import anyio
import crc32c
import pytest

from protocol.clock import FakeClock
from storage_stub.journal import (
    HEADER,
    MAX_RECORD_SIZE,
    FsyncPolicy,
    Journal,
    JournalCorruptedError,
    JournalFailedError,
    encode_record,
    scan,
)

if TYPE_CHECKING:
    from pathlib import Path

# Varied sizes, including an empty body, so cuts land in headers and bodies of all shapes.
RECORDS = [b"first", b"", b"x" * 40, bytes(range(7)), b"last record"]
GUARD = 5.0  # "don't hang" guard for waits that involve a worker thread (fsync)


def image(records: list[bytes]) -> bytes:
    return HEADER + b"".join(encode_record(r) for r in records)


def boundaries(records: list[bytes]) -> list[int]:
    """Offsets at which each record ends."""
    ends, offset = [], len(HEADER)
    for record in records:
        offset += 8 + len(record)
        ends.append(offset)
    return ends


# ---- the record format ----------------------------------------------------------------------


def test_record_is_length_crc_body() -> None:
    body = b"hello"
    length = struct.pack(">I", 5)
    crc = crc32c.crc32c(body, crc32c.crc32c(length))
    assert encode_record(body) == length + struct.pack(">I", crc) + body


def test_scan_reads_back_every_record_with_offsets() -> None:
    result = scan(image(RECORDS))
    assert result.records == RECORDS
    assert result.offsets == [len(HEADER), *boundaries(RECORDS)[:-1]]
    assert result.valid_end == len(image(RECORDS))
    assert not result.torn


# ---- torn tails: truncation at every offset keeps a prefix, never garbage -------------------


def test_truncation_at_every_offset_keeps_the_longest_complete_prefix() -> None:
    full = image(RECORDS)
    ends = boundaries(RECORDS)
    for cut in range(len(full) + 1):
        result = scan(full[:cut])
        complete = sum(1 for end in ends if end <= cut)
        assert result.records == RECORDS[:complete], cut
        expected_end = 0 if cut < len(HEADER) else ([len(HEADER), *ends][complete])
        assert result.valid_end == expected_end, cut
        assert result.torn == (cut != expected_end), cut


def test_recovery_from_a_file_truncated_at_every_offset(tmp_path: Path) -> None:
    full = image(RECORDS)
    ends = boundaries(RECORDS)
    path = tmp_path / "j"
    for cut in range(len(full) + 1):
        path.write_bytes(full[:cut])
        journal, scanned = Journal.open(path, clock=FakeClock(), policy=FsyncPolicy.NEVER)
        complete = sum(1 for end in ends if end <= cut)
        assert scanned.records == RECORDS[:complete], cut
        # The torn tail is gone from the file, so a new record follows the last good one.
        journal.append(b"after")
        journal._write_and_sync(journal._fd, journal._pending)
        journal.close_now()
        reopened, again = Journal.open(path, clock=FakeClock())
        reopened.close_now()
        assert again.records == [*RECORDS[:complete], b"after"], cut
        assert not again.torn


def test_last_record_with_a_bad_checksum_is_a_torn_tail() -> None:
    broken = bytearray(image(RECORDS))
    broken[-1] ^= 0xFF  # the last record's blocks never reached the disk
    result = scan(bytes(broken))
    assert result.records == RECORDS[:-1]
    assert result.torn


# ---- corruption in the middle is reported with its offset -----------------------------------


@pytest.mark.parametrize("index", [0, 2, 3])
def test_corrupted_body_in_the_middle_is_reported_with_its_offset(index: int) -> None:
    broken = bytearray(image(RECORDS))
    offset = [len(HEADER), *boundaries(RECORDS)][index]
    broken[offset + 8 + len(RECORDS[index]) - 1 if RECORDS[index] else offset + 5] ^= 0x01
    with pytest.raises(JournalCorruptedError, match=f"corrupted at offset {offset}") as info:
        scan(bytes(broken), path="ledgers.journal")
    assert info.value.offset == offset
    assert info.value.path == "ledgers.journal"


def test_flipped_length_bit_in_the_middle_is_corruption_not_a_torn_tail() -> None:
    broken = bytearray(image(RECORDS))
    offset = boundaries(RECORDS)[0]  # second record
    broken[offset + 3] ^= 0x01  # its length is now off by one, still inside the file
    with pytest.raises(JournalCorruptedError) as info:
        scan(bytes(broken))
    assert info.value.offset == offset


def test_impossible_length_is_corruption() -> None:
    broken = image(RECORDS[:1]) + struct.pack(">II", MAX_RECORD_SIZE + 1, 0)
    with pytest.raises(JournalCorruptedError, match="exceeds") as info:
        scan(broken)
    assert info.value.offset == boundaries(RECORDS)[0]


@pytest.mark.parametrize("data", [b"NOTAJRNL", b"EBJRNL02" + encode_record(b"x"), b"X"])
def test_foreign_file_is_rejected_at_offset_zero(data: bytes) -> None:
    with pytest.raises(JournalCorruptedError, match="not a journal") as info:
        scan(data)
    assert info.value.offset == 0


def test_open_refuses_a_corrupted_journal_and_leaves_it_alone(tmp_path: Path) -> None:
    broken = bytearray(image(RECORDS))
    broken[len(HEADER) + 9] ^= 0xFF
    path = tmp_path / "j"
    path.write_bytes(bytes(broken))
    with pytest.raises(JournalCorruptedError, match=f"{path} corrupted at offset {len(HEADER)}"):
        Journal.open(path, clock=FakeClock())
    assert path.read_bytes() == bytes(broken)  # no "repair" that would destroy evidence


# ---- fsync policies (component tests: FakeClock, real files) --------------------------------

pytestmark_async = pytest.mark.anyio


@pytestmark_async
async def test_never_policy_hands_records_to_the_os_before_returning(tmp_path: Path) -> None:
    path = tmp_path / "j"
    journal, _ = Journal.open(path, clock=FakeClock(), policy=FsyncPolicy.NEVER)
    ticket = journal.append(b"a")
    assert path.read_bytes() == HEADER  # only buffered so far
    await journal.wait_durable(ticket)
    assert path.read_bytes() == image([b"a"])
    assert journal.statistics().syncs == 0
    await journal.aclose()


@pytestmark_async
async def test_batch_policy_acknowledges_at_the_end_of_the_window(
    tmp_path: Path, fake_clock: FakeClock
) -> None:
    journal, _ = Journal.open(
        tmp_path / "j", clock=fake_clock, policy=FsyncPolicy.BATCH, batch_window=0.005
    )
    done: list[tuple[int, float]] = []
    finished = anyio.Event()

    async def writer(body: bytes) -> None:
        ticket = journal.append(body)
        await journal.wait_durable(ticket)
        done.append((ticket, fake_clock.now()))
        if len(done) == 3:
            finished.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(journal.run)
        for body in (b"a", b"b", b"c"):
            tg.start_soon(writer, body)
        await anyio.wait_all_tasks_blocked()
        await fake_clock.advance(0.004)
        assert done == []  # inside the window: nothing acknowledged
        await fake_clock.advance(0.001)
        with anyio.fail_after(GUARD):
            await finished.wait()
        assert sorted(done) == [(1, 0.005), (2, 0.005), (3, 0.005)]
        assert journal.statistics().syncs == 1  # one fsync for the whole window
        tg.cancel_scope.cancel()
    await journal.aclose()
    # trio starts tasks in random order, so the records may be in any order.
    assert sorted(scan((tmp_path / "j").read_bytes()).records) == [b"a", b"b", b"c"]


@pytestmark_async
async def test_always_policy_syncs_without_waiting_for_the_clock(
    tmp_path: Path, fake_clock: FakeClock
) -> None:
    journal, _ = Journal.open(tmp_path / "j", clock=fake_clock, policy=FsyncPolicy.ALWAYS)
    async with anyio.create_task_group() as tg:
        tg.start_soon(journal.run)
        with anyio.fail_after(GUARD):
            await journal.wait_durable(journal.append(b"a"))
            await journal.wait_durable(journal.append(b"b"))
        assert fake_clock.now() == 0
        assert journal.statistics().syncs == 2
        assert journal.durable_ticket == 2
        tg.cancel_scope.cancel()
    await journal.aclose()


@pytestmark_async
async def test_failed_fsync_fails_waiters_and_later_appends(
    tmp_path: Path, fake_clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal, _ = Journal.open(tmp_path / "j", clock=fake_clock, policy=FsyncPolicy.ALWAYS)

    def broken_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    async with anyio.create_task_group() as tg:
        tg.start_soon(journal.run)
        ticket = journal.append(b"a")
        with anyio.fail_after(GUARD), pytest.raises(JournalFailedError, match="failed"):
            await journal.wait_durable(ticket)
        assert journal.failed
        with pytest.raises(JournalFailedError, match="not writable"):
            journal.append(b"b")
        tg.cancel_scope.cancel()
    monkeypatch.undo()
    await journal.aclose()


# ---- compaction -----------------------------------------------------------------------------


@pytestmark_async
async def test_rewrite_replaces_the_file_and_keeps_later_appends(
    tmp_path: Path, fake_clock: FakeClock
) -> None:
    path = tmp_path / "j"
    journal, _ = Journal.open(path, clock=fake_clock, policy=FsyncPolicy.NEVER)
    for body in RECORDS:
        await journal.wait_durable(journal.append(body))
    pending = journal.append(b"covered by the snapshot")
    await journal.rewrite(lambda: [b"snapshot"])
    assert journal.durable_ticket == pending
    await journal.wait_durable(journal.append(b"after"))
    await journal.aclose()
    _, scanned = Journal.open(path, clock=fake_clock)
    assert scanned.records == [b"snapshot", b"after"]
    assert not (tmp_path / "j.compact").exists()
