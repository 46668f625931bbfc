"""Integration tests: the stub over real loopback TCP, and ``storage-stub serve`` as a process.

Real time here: waits are on conditions under ``fail_after`` deadlines, never fixed sleeps.
"""

from __future__ import annotations

import os
import signal
import sys
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import pytest
from anyio.streams.text import TextReceiveStream

from storage_stub.client import Backoff, open_stub_client
from storage_stub.errors import StubConnectionError, StubTimeoutError
from storage_stub.journal import HEADER
from storage_stub.metadata import NodeStat
from storage_stub.server import LEDGER_JOURNAL, serve_stub

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from anyio.abc import Process

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

DEADLINE = 20.0  # generous: the machine is shared
FAST_BACKOFF = Backoff(initial=0.01, maximum=0.1)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


async def test_loopback_round_trip_with_pipelining() -> None:
    async with anyio.create_task_group() as tg:
        address = await tg.start(serve_stub, "127.0.0.1", 0)
        async with open_stub_client(address.url) as client:
            lid = await client.create_ledger()
            results: dict[int, bytes] = {}

            async def add(i: int) -> None:
                data = b"%d" % i * (i % 50)
                results[await client.add_entry(lid, data)] = data

            with anyio.fail_after(DEADLINE):
                async with anyio.create_task_group() as adds:
                    for i in range(1000):
                        adds.start_soon(add, i)
            assert sorted(results) == list(range(1000))
            entries = await client.read(lid, 0, 999)
            assert all(entries[eid] == data for eid, data in results.items())
            big = os.urandom(3 * 1024 * 1024)  # larger than one socket read
            assert await client.add_entry(lid, big) == 1000
            assert await client.read(lid, 1000, 1000) == [big]
        tg.cancel_scope.cancel()


async def test_client_reconnects_after_the_server_restarts() -> None:
    async with anyio.create_task_group() as tg:
        first = anyio.CancelScope()

        async def run_first(*, task_status: anyio.abc.TaskStatus[object]) -> None:
            with first:
                await serve_stub("127.0.0.1", 0, task_status=task_status)

        address = await tg.start(run_first)
        async with open_stub_client(
            address.url, backoff=FAST_BACKOFF, request_timeout=DEADLINE
        ) as client:
            session = await client.session_create(30.0)
            await client.create_ledger()
            first.cancel()  # the stub goes away
            with anyio.fail_after(DEADLINE):
                while client.connected:
                    await anyio.lowlevel.checkpoint()
            with pytest.raises(StubTimeoutError):
                await client.ping(request_timeout=0.2)  # nobody there to answer
            await tg.start(serve_stub, "127.0.0.1", address.port)  # a new, empty stub
            with anyio.fail_after(DEADLINE):
                assert await client.create_ledger() == 1  # it really is a new stub
            assert client.reconnects >= 1
            assert not client.session_alive(session)  # another incarnation: session gone
        tg.cancel_scope.cancel()


async def test_unreachable_stub_fails_fast_on_open() -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    await listener.aclose()  # nobody listens there now
    with pytest.raises(StubConnectionError, match="cannot connect"):
        async with open_stub_client(f"stub://127.0.0.1:{port}"):
            pass


# ---- the storage-stub process ---------------------------------------------------------------


@asynccontextmanager
async def stub_process(*args: str) -> AsyncIterator[tuple[Process, str]]:
    """Start ``storage-stub serve`` and wait for its ``ready`` line; kill it on exit."""
    env = {**os.environ, "PYTHONPATH": REPO}
    command = [sys.executable, "-m", "storage_stub", "serve", "--port", "0", *args]
    process = await anyio.open_process(command, env=env)
    try:
        assert process.stdout is not None
        with anyio.fail_after(DEADLINE):
            async for line in TextReceiveStream(process.stdout):
                if "ready" in line:
                    url = line.split()[3]
                    break
            else:
                raise AssertionError("storage-stub exited before it was ready")
        yield process, url
    finally:
        if process.returncode is None:
            process.kill()
        with anyio.CancelScope(shield=True):
            await process.wait()
            await process.aclose()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_kill_9_loses_nothing_that_was_acknowledged(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    acked: list[tuple[int, bytes]] = []
    async with (
        stub_process("--data-dir", data_dir, "--fsync", "batch") as (process, url),
        open_stub_client(url) as client,
    ):
        lid = await client.create_ledger()
        session = await client.session_create(30.0)
        await client.put(session, "/managed-ledgers/t", b"ledgers=[1]")
        for i in range(200):
            data = b"message-%d" % i
            acked.append((await client.add_entry(lid, data), data))
        await client.fence(lid)
        os.kill(process.pid, signal.SIGKILL)
        with anyio.fail_after(DEADLINE):
            await process.wait()
    async with stub_process("--data-dir", data_dir) as (_, url), open_stub_client(url) as client:
        assert await client.read(lid, 0, len(acked) - 1) == [data for _, data in acked]
        assert (await client.info(lid)).state.value == "fenced"
        assert await client.get(0, "/managed-ledgers/t") == NodeStat(
            b"ledgers=[1]", 0, False, False
        )
        assert await client.create_ledger() == lid + 1


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_sigterm_stops_the_process_cleanly(tmp_path: Path) -> None:
    async with stub_process("--data-dir", str(tmp_path)) as (process, url):
        async with open_stub_client(url) as client:
            await client.create_ledger()
        process.terminate()
        with anyio.fail_after(DEADLINE):
            assert await process.wait() == 0


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_corrupted_journal_stops_start_up_with_its_offset(tmp_path: Path) -> None:
    journal = tmp_path / LEDGER_JOURNAL
    # Two records ([tag 1 = create, ledger 1]); the first's body is damaged.
    from storage_stub.journal import encode_record

    first, second = encode_record(b"\x92\x01\x01"), encode_record(b"\x92\x01\x02")
    damaged = bytearray(HEADER + first + second)
    damaged[len(HEADER) + 9] ^= 0xFF
    journal.write_bytes(bytes(damaged))
    env = {**os.environ, "PYTHONPATH": REPO}
    with anyio.fail_after(DEADLINE):
        result = await anyio.run_process(
            [
                sys.executable,
                "-m",
                "storage_stub",
                "serve",
                "--port",
                "0",
                "--data-dir",
                str(tmp_path),
            ],
            env=env,
            check=False,
        )
    assert result.returncode == 1
    assert f"corrupted at offset {len(HEADER)}".encode() in result.stderr
    assert journal.read_bytes() == bytes(damaged)
