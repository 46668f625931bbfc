"""Accepting through a shortage of file descriptors, and the open files limit at start-up."""

from __future__ import annotations

import errno
import logging
import resource
from typing import Any, ClassVar

import anyio
import pytest

from emubroker.net.accepting import PatientListener, raise_open_files_limit
from protocol.clock import FakeClock

pytestmark = pytest.mark.anyio


class ScriptedSocketListener:
    """Stands in for anyio's socket listener: each accept fails or succeeds as scripted."""

    extra_attributes: ClassVar[dict[Any, Any]] = {}

    def __init__(self, script: list[OSError | str]) -> None:
        self.script = script
        self.more = anyio.Event()

    async def accept(self) -> str:
        if not self.script:
            await self.more.wait()  # nothing more to accept
        item = self.script.pop(0)
        if isinstance(item, OSError):
            raise item
        return item

    async def aclose(self) -> None:
        pass


async def test_a_shortage_of_descriptors_pauses_accepting_without_ending_it(
    fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    no_fd = OSError(errno.EMFILE, "Too many open files")
    inner = ScriptedSocketListener(
        ["first", no_fd, no_fd, OSError(errno.ENFILE, "table full"), "second"]
    )
    accepted: list[str] = []
    listener = PatientListener(inner, clock=fake_clock, retry_after=0.1)  # type: ignore[arg-type]

    async def handle(stream: Any) -> None:
        accepted.append(stream)

    with caplog.at_level(logging.WARNING, "emubroker.net.accepting"):
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, handle, tg)
            await fake_clock.advance(0)
            assert accepted == ["first"]  # waiting 0.1 s after each failure
            await fake_clock.advance(0.1)
            await fake_clock.advance(0.1)
            assert accepted == ["first"]
            await fake_clock.advance(0.1)
            assert accepted == ["first", "second"]
            tg.cancel_scope.cancel()
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [
        "cannot accept connections: [Errno 24] Too many open files; retrying",
        "accepting connections again",
    ]


async def test_other_accept_errors_still_end_the_loop(fake_clock: FakeClock) -> None:
    inner = ScriptedSocketListener([OSError(errno.EBADF, "Bad file descriptor")])
    listener = PatientListener(inner, clock=fake_clock)  # type: ignore[arg-type]

    async def handle(stream: Any) -> None:
        raise AssertionError(stream)

    with pytest.raises(ExceptionGroup) as raised:
        await listener.serve(handle)
    assert raised.group_contains(OSError, match="Bad file descriptor")


def test_the_soft_open_files_limit_is_raised_to_the_hard_one() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard < 64:
        pytest.skip("needs a finite hard limit of open files")
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard // 2, hard))
        raise_open_files_limit()
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
