"""etcd client latency: our anyio gateway client against aiohttp (same gateway) and aetcd (gRPC).

Usage: python bench/etcd_clients.py [--ops N] [--watch-ops N] [--in-flight K] [--rounds R]

Starts a one-member etcd (Debian's ``etcd-server``, as the tests do: loopback, data in tmpfs)
and, for each client, times the same etcd operations one at a time:

- ``put``: an unconditional put of a 100-byte value to a fresh key;
- ``get``: a range read of one key;
- ``cas``: a transaction ``if version(key) == n then put`` (what a versioned metadata write is);
- ``watch``: from the start of a put to the arrival of its event on an open watch stream;
- ``put x K``: puts with K in flight at once, as operations per second.

Clients: ``gateway/anyio`` is ours (``emubroker.metadata.etcd_gateway``: h11 over anyio
streams, JSON to etcd's gateway), run on asyncio and on trio; ``gateway/aiohttp`` sends the same
JSON with aiohttp; ``aetcd`` is the maintained asyncio gRPC client, measured when it is
installed (``pip install --no-deps aetcd``; it needs grpcio and protobuf, which the dev
dependencies have). Prints p50/p99 in microseconds and each client's p50 relative to ours.
Clients take turns, ``--rounds`` times, so that load from elsewhere on the machine falls on all
of them alike; samples of all rounds are pooled. Numbers only; asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import anyio
import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from emubroker.metadata.deadlines import DeadlineWatchdog  # noqa: E402
from emubroker.metadata.etcd_gateway import EtcdGateway  # noqa: E402
from emubroker.metadata.etcd_messages import (  # noqa: E402
    EQUAL,
    VERSION,
    Compare,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    RequestOp,
    TxnRequest,
    TxnResponse,
    WatchCreateRequest,
    WatchRequest,
    WatchResponse,
)
from protocol.clock import AnyioClock  # noqa: E402
from tests.support.etcd import run_etcd  # noqa: E402

VALUE = b"v" * 100


class Client(Protocol):
    async def put(self, key: bytes) -> None: ...
    async def get(self, key: bytes) -> None: ...
    async def cas(self, key: bytes, version: int) -> None: ...
    def watch(self, prefix: bytes) -> Any: ...  # async context manager -> async iterator


def _prefix_end(prefix: bytes) -> bytes:
    return prefix[:-1] + bytes([prefix[-1] + 1])


# ---- ours ---------------------------------------------------------------------------------


class OurGateway:
    def __init__(self, gateway: EtcdGateway) -> None:
        self.gateway = gateway

    async def put(self, key: bytes) -> None:
        await self.gateway.call("/v3/kv/put", PutRequest(key, VALUE), PutResponse)

    async def get(self, key: bytes) -> None:
        await self.gateway.call("/v3/kv/range", RangeRequest(key), RangeResponse)

    async def cas(self, key: bytes, version: int) -> None:
        txn = TxnRequest(
            [Compare(key, VERSION, EQUAL, version=version)],
            [RequestOp(request_put=PutRequest(key, VALUE))],
        )
        reply = await self.gateway.call("/v3/kv/txn", txn, TxnResponse)
        assert reply.succeeded

    @asynccontextmanager
    async def watch(self, prefix: bytes) -> AsyncIterator[AsyncIterator[int]]:
        request = WatchRequest(WatchCreateRequest(prefix, _prefix_end(prefix)))
        async with self.gateway.open_stream("/v3/watch", request, WatchResponse) as replies:

            async def events() -> AsyncIterator[int]:
                async for reply in replies:
                    for _ in reply.events:
                        yield 1

            stream = events()
            await _first_created(replies)
            yield stream


async def _first_created(replies: AsyncIterator[WatchResponse]) -> None:
    reply = await replies.__anext__()
    assert reply.created


@asynccontextmanager
async def open_ours(host: str, port: int) -> AsyncIterator[Client]:
    clock = AnyioClock()
    watchdog = DeadlineWatchdog(clock)
    gateway = EtcdGateway(
        [(host, port)], watchdog=watchdog, request_timeout=30.0, connect_timeout=5.0
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(watchdog.run)
        yield OurGateway(gateway)
        await gateway.aclose()
        tg.cancel_scope.cancel()


# ---- aiohttp to the same gateway ----------------------------------------------------------


class AiohttpGateway:
    def __init__(self, session: Any, base: str) -> None:
        self.session = session
        self.base = base
        self.encoder = msgspec.json.Encoder()

    async def _call(self, path: str, request: msgspec.Struct, reply: type[Any]) -> Any:
        async with self.session.post(self.base + path, data=self.encoder.encode(request)) as r:
            return msgspec.json.decode(await r.read(), type=reply, strict=False)

    async def put(self, key: bytes) -> None:
        await self._call("/v3/kv/put", PutRequest(key, VALUE), PutResponse)

    async def get(self, key: bytes) -> None:
        await self._call("/v3/kv/range", RangeRequest(key), RangeResponse)

    async def cas(self, key: bytes, version: int) -> None:
        txn = TxnRequest(
            [Compare(key, VERSION, EQUAL, version=version)],
            [RequestOp(request_put=PutRequest(key, VALUE))],
        )
        reply = await self._call("/v3/kv/txn", txn, TxnResponse)
        assert reply.succeeded

    @asynccontextmanager
    async def watch(self, prefix: bytes) -> AsyncIterator[AsyncIterator[int]]:
        from emubroker.metadata.etcd_messages import StreamMessage

        request = WatchRequest(WatchCreateRequest(prefix, _prefix_end(prefix)))
        decoder = msgspec.json.Decoder(StreamMessage[WatchResponse], strict=False)
        async with self.session.post(
            self.base + "/v3/watch", data=self.encoder.encode(request), timeout=None
        ) as response:
            first = decoder.decode(await response.content.readline())
            assert first.result is not None
            assert first.result.created

            async def events() -> AsyncIterator[int]:
                while True:
                    line = await response.content.readline()
                    message = decoder.decode(line)
                    for _ in message.result.events:
                        yield 1

            yield events()


@asynccontextmanager
async def open_aiohttp(host: str, port: int) -> AsyncIterator[Client]:
    import aiohttp

    async with aiohttp.ClientSession() as session:
        yield AiohttpGateway(session, f"http://{host}:{port}")


# ---- aetcd (gRPC) -------------------------------------------------------------------------


class Aetcd:
    def __init__(self, client: Any) -> None:
        self.client = client

    async def put(self, key: bytes) -> None:
        await self.client.put(key, VALUE)

    async def get(self, key: bytes) -> None:
        await self.client.get(key)

    async def cas(self, key: bytes, version: int) -> None:
        t = self.client.transactions
        ok, _ = await self.client.transaction(
            compare=[t.version(key) == version], success=[t.put(key, VALUE)], failure=[]
        )
        assert ok

    @asynccontextmanager
    async def watch(self, prefix: bytes) -> AsyncIterator[AsyncIterator[int]]:
        watch = await self.client.watch_prefix(prefix)

        async def events() -> AsyncIterator[int]:
            async for _ in watch:
                yield 1

        try:
            yield events()
        finally:
            await watch.cancel()


@asynccontextmanager
async def open_aetcd(host: str, port: int) -> AsyncIterator[Client]:
    import aetcd

    async with aetcd.Client(host=host, port=port) as client:
        yield Aetcd(client)


# ---- measurement --------------------------------------------------------------------------


async def timed(n: int, op: Callable[[int], Awaitable[None]]) -> list[float]:
    for i in range(min(100, n)):  # warm up connections and code paths
        await op(-1 - i)
    samples = []
    for i in range(n):
        t0 = time.perf_counter()
        await op(i)
        samples.append(time.perf_counter() - t0)
    return samples


async def measure(client: Client, tag: bytes, ops: int, watch_ops: int, in_flight: int) -> dict:
    results: dict[str, Any] = {}
    results["put"] = await timed(ops, lambda i: client.put(b"bench/%s/put/%d" % (tag, i)))
    await client.put(b"bench/%s/get" % tag)
    results["get"] = await timed(ops, lambda i: client.get(b"bench/%s/get" % tag))
    cas_key = b"bench/%s/cas" % tag
    await client.put(cas_key)
    version = [1]

    async def cas(_: int) -> None:
        await client.cas(cas_key, version[0])
        version[0] += 1

    results["cas"] = await timed(ops, cas)
    prefix = b"bench/%s/watch/" % tag
    async with client.watch(prefix) as events:

        async def put_and_see(i: int) -> None:
            await client.put(prefix + b"%d" % i)
            await events.__anext__()

        results["watch"] = await timed(watch_ops, put_and_see)
    count = [0]

    async def worker() -> None:
        while count[0] < ops:
            count[0] += 1
            await client.put(b"bench/%s/par/%d" % (tag, count[0]))

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(in_flight):
            tg.start_soon(worker)
    results["parallel"] = ops / (time.perf_counter() - t0)
    return results


def us(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100)[int(q) - 1] * 1e6


async def run_client(opener: Any, host: str, port: int, tag: bytes, args: Any) -> dict:
    async with opener(host, port) as client:
        return await measure(client, tag, args.ops, args.watch_ops, args.in_flight)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--watch-ops", type=int, default=500)
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    runs = [("gateway/anyio (ours, asyncio)", open_ours, "asyncio")]
    if importlib.util.find_spec("trio"):
        runs.append(("gateway/anyio (ours, trio)", open_ours, "trio"))
    runs.append(("gateway/aiohttp", open_aiohttp, "asyncio"))
    if importlib.util.find_spec("aetcd"):
        runs.append(("aetcd (gRPC)", open_aetcd, "asyncio"))
    else:
        print("aetcd not installed: pip install --no-deps aetcd to measure it")
    pooled: dict[str, dict[str, Any]] = {name: {} for name, _, _ in runs}
    with run_etcd() as server:
        for round_ in range(args.rounds):
            for index, (name, opener, backend) in enumerate(runs):
                tag = b"%d-%d" % (round_, index)
                result = anyio.run(
                    run_client, opener, server.host, server.port, tag, args, backend=backend
                )
                for op, value in result.items():
                    if op == "parallel":
                        pooled[name].setdefault(op, []).append(value)
                    else:
                        pooled[name].setdefault(op, []).extend(value)
    table = [
        (name, {**r, "parallel": statistics.median(r["parallel"])}) for name, r in pooled.items()
    ]
    base = table[0][1]
    print(
        f"{args.rounds} rounds of {args.ops} ops per client (watch: {args.watch_ops}), one at "
        f"a time; parallel: {args.in_flight} in flight, median of rounds"
    )
    header = (
        "| client | "
        + " | ".join(f"{op} p50 | {op} p99" for op in ("put", "get", "cas", "watch"))
        + f" | puts/s x{args.in_flight} | p50 vs ours (put/get/cas/watch) |"
    )
    print(header)
    print("|" + " --- |" * (header.count("|") - 1))
    for name, r in table:
        cells = []
        for op in ("put", "get", "cas", "watch"):
            cells.append(f"{us(r[op], 50):.0f} µs | {us(r[op], 99):.0f} µs")
        ratio = "/".join(
            f"{us(r[op], 50) / us(base[op], 50):.2f}" for op in ("put", "get", "cas", "watch")
        )
        print(f"| {name} | " + " | ".join(cells) + f" | {r['parallel']:.0f} | {ratio} |")


if __name__ == "__main__":
    main()
