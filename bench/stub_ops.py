"""Bookie-stub add/read rates and latencies: direct calls, in-process RPC, loopback TCP.

Usage: python bench/stub_ops.py [--ops N] [--size BYTES] [--window W] [--only MODE]
                                [--data-dir DIR --fsync always|batch|never]

Modes, each against a fresh stub:

- ``direct``: the ledger store's methods called in a loop (no RPC, never journaled): the ceiling.
- ``local``: ``StubClient`` on ``StubServer.open_local_client()``: the stub's semantics
  (faults, durability waits) without RPC.
- ``memory``: ``StubClient`` -> in-process stub over memory streams (the embedded deployment).
- ``loopback``: ``StubClient`` -> ``storage-stub serve`` subprocess over 127.0.0.1 TCP.

For each mode it reports, for adds then reads of ``--size``-byte entries: sequential latency
(one request in flight; p50 / p99 in microseconds) and pipelined throughput (``--window``
requests in flight; ops/s). With ``--data-dir`` the stubs run in durable mode with the given
fsync policy. Prints numbers only; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from storage_stub.client import StubClient, open_stub_client  # noqa: E402
from storage_stub.durable import DurableLedgerStore  # noqa: E402
from storage_stub.journal import FsyncPolicy  # noqa: E402
from storage_stub.server import open_stub_server  # noqa: E402


@contextmanager
def stub_process(data_dir: str | None, fsync: str) -> Iterator[str]:
    args = [sys.executable, "-m", "storage_stub", "serve", "--port", "0", "--log-level", "WARNING"]
    if data_dir:
        args += ["--data-dir", data_dir, "--fsync", fsync]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"(stub://\S+)", line)
        if "ready" not in line or match is None:
            raise RuntimeError(f"storage-stub did not start: {line!r}")
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        yield match.group(1)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def summarize(name: str, latencies: list[float], rate: float) -> None:
    cuts = statistics.quantiles(latencies, n=100)
    print(
        f"  {name:5} sequential p50 {cuts[49] * 1e6:8.1f} us  p99 {cuts[98] * 1e6:8.1f} us"
        f"   pipelined {rate:10.0f} ops/s"
    )


async def measure(
    call: Callable[[int], Awaitable[Any]], ops: int, window: int
) -> tuple[list[float], float]:
    latencies = []
    for i in range(min(ops, 2000)):
        start = time.perf_counter()
        await call(i)
        latencies.append(time.perf_counter() - start)
    next_op = 0

    async def worker() -> None:
        nonlocal next_op
        while next_op < ops:
            i, next_op = next_op, next_op + 1
            await call(i)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(window):
            tg.start_soon(worker)
    return latencies, ops / (time.perf_counter() - start)


async def bench_client(client: StubClient, ops: int, size: int, window: int) -> None:
    payload = os.urandom(size)
    lid = await client.create_ledger()
    added = 0

    async def add(_: int) -> None:
        nonlocal added
        await client.add_entry(lid, payload)
        added += 1

    summarize("add", *await measure(add, ops, window))

    async def read(i: int) -> None:
        await client.read(lid, i % added, i % added)

    summarize("read", *await measure(read, ops, window))


async def bench_direct(ops: int, size: int) -> None:
    store = DurableLedgerStore()
    payload = os.urandom(size)
    lid = store.create_ledger()

    async def add(_: int) -> None:
        store.add_entry(lid, payload)

    summarize("add", *await measure(add, ops, 1))

    async def read(i: int) -> None:
        store.read(lid, i, i)

    summarize("read", *await measure(read, ops, 1))


@asynccontextmanager
async def scratch(data_dir: str | None) -> Any:
    if data_dir is None:
        yield None
    else:
        with tempfile.TemporaryDirectory(dir=data_dir) as path:
            yield path


async def main(args: argparse.Namespace) -> None:
    modes = [args.only] if args.only else ["direct", "local", "memory", "loopback"]
    fsync = FsyncPolicy(args.fsync)
    durable = f"durable ({args.data_dir}, fsync {args.fsync})" if args.data_dir else "in memory"
    print(f"stub ops: {args.ops} ops of {args.size} B, window {args.window}, {durable}")
    for mode in modes:
        print(mode)
        if mode == "direct":
            await bench_direct(args.ops, args.size)
        elif mode == "local":
            async with (
                scratch(args.data_dir) as data_dir,
                open_stub_server(data_dir=data_dir, fsync=fsync) as server,
                server.open_local_client() as client,
            ):
                await bench_client(client, args.ops, args.size, args.window)
        elif mode == "memory":
            async with (
                scratch(args.data_dir) as data_dir,
                open_stub_server(data_dir=data_dir, fsync=fsync) as server,
            ):

                async def connect() -> Any:
                    return server.connect()

                async with open_stub_client(connect=connect) as client:
                    await bench_client(client, args.ops, args.size, args.window)
        else:
            async with scratch(args.data_dir) as data_dir:
                with stub_process(data_dir, args.fsync) as url:
                    async with open_stub_client(url) as client:
                        await bench_client(client, args.ops, args.size, args.window)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--window", type=int, default=128, help="requests in flight")
    parser.add_argument("--only", choices=["direct", "local", "memory", "loopback"])
    parser.add_argument("--data-dir", help="run durable stubs with journals under this dir")
    parser.add_argument("--fsync", default="batch", choices=[p.value for p in FsyncPolicy])
    anyio.run(main, parser.parse_args())
