"""The session's MESSAGE runs (``SessionWriter.send_messages``): one ``send_message`` each.

Same outbox bytes, same writability and the same stopping point as queuing the entries one by
one and stopping before the first entry the connection is not writable for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import pytest

from emubroker.net.writer import WRITE_BUFFER_HIGH_WATER_MARK, SessionWriter
from protocol.connection import Connection, Role

if TYPE_CHECKING:
    from anyio.abc import ByteStream

pytestmark = pytest.mark.anyio


def writer() -> SessionWriter:
    # Only the outbox is looked at: no writer task, so no stream is needed.
    return SessionWriter(cast("ByteStream", None), "test", Connection(Role.BROKER))


def one_by_one(out: SessionWriter, entry_id: int, sections: list[bytes]) -> int:
    for offset, section in enumerate(sections):
        if not out.writable:
            return offset
        out.send_message(3, 1, entry_id + offset, -1, 0, (), section)
    return len(sections)


@pytest.mark.parametrize(
    ("queued", "sizes"),
    [
        (0, [100] * 50),  # the common case: the run fits under the high water mark
        (WRITE_BUFFER_HIGH_WATER_MARK - 1000, [300] * 10),  # it turns unwritable within the run
        (WRITE_BUFFER_HIGH_WATER_MARK + 1, [10] * 3),  # unwritable before it: nothing goes
        (0, [WRITE_BUFFER_HIGH_WATER_MARK // 2] * 3),  # large entries
        (0, []),
    ],
)
async def test_a_run_is_queued_as_its_messages_one_by_one(queued: int, sizes: list[int]) -> None:
    sections = [bytes([i % 256]) * size for i, size in enumerate(sizes)]
    run, single = writer(), writer()
    for out in (run, single):
        out._count(queued)  # bytes of earlier replies, as if queued before
    sent = run.send_messages(3, 1, 20_000, -1, sections)
    assert sent == one_by_one(single, 20_000, sections)
    assert b"".join(run._outbox) == b"".join(single._outbox)
    assert (run.queued_bytes, run.writable) == (single.queued_bytes, single.writable)
