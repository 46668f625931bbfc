"""Another trio loop, in a thread of its own, busy beside the code under test."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import trio


@contextlib.contextmanager
def another_trio_loop_running() -> Iterator[None]:
    """A trio loop in a thread, its tasks waking together every millisecond until the end."""
    stop = threading.Event()

    async def tick() -> None:
        while True:
            await trio.sleep(0.001)
            if stop.is_set():  # set by the test's thread: no trio.Event
                return

    async def loop() -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(tick)

    thread = threading.Thread(target=trio.run, args=(loop,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
