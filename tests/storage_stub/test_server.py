"""Component tests: ``StubClient`` against an in-process stub over memory streams, FakeClock time.

Everything here runs on asyncio and trio with no real waiting: time moves only through
``fake_clock.advance``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import anyio
import pytest

from protocol.rpc import encode
from storage_stub import messages as m
from storage_stub.errors import ReadTooLargeError, StubTimeoutError, StubUnavailableError
from storage_stub.faults import FaultConfig, Fixed, OpFaults, Uniform
from storage_stub.journal import FsyncPolicy
from storage_stub.ledger import (
    EntryOutOfRangeError,
    LedgerClosedError,
    LedgerFencedError,
    LedgerInfo,
    LedgerState,
    NoSuchLedgerError,
)
from storage_stub.metadata import (
    BadVersionError,
    InvalidPathError,
    NodeStat,
    Notification,
    SessionExpiredError,
)

from .conftest import REQUEST_TIMEOUT, client_of, running_stub

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from pathlib import Path

    from protocol.clock import FakeClock
    from storage_stub.client import StubClient

    from .conftest import Switchboard

pytestmark = pytest.mark.anyio
T = TypeVar("T")
GUARD = 5.0  # "don't hang" guard where a worker thread (fsync) is involved


@pytest.fixture(params=["rpc", "local"])
async def client(
    request: pytest.FixtureRequest, board: Switchboard, fake_clock: FakeClock
) -> AsyncIterator[StubClient]:
    """Every test here runs over RPC (memory streams) and in-process without RPC."""
    if request.param == "rpc":
        async with client_of(board, fake_clock) as opened:
            yield opened
    else:
        assert board.server is not None
        async with board.server.open_local_client(request_timeout=REQUEST_TIMEOUT) as opened:
            yield opened


# ---- ledger round trips ---------------------------------------------------------------------


async def test_ledger_operations_round_trip(client: StubClient) -> None:
    lid = await client.create_ledger()
    assert await client.last_add_confirmed(lid) == -1
    assert [await client.add_entry(lid, data) for data in (b"a", b"bb", b"")] == [0, 1, 2]
    assert await client.read(lid, 0, 2) == [b"a", b"bb", b""]
    assert await client.info(lid) == LedgerInfo(lid, LedgerState.OPEN, 2, 3)
    assert await client.close_ledger(lid) == 2
    other = await client.create_ledger()
    assert await client.ledger_ids() == [lid, other]
    assert await client.fence(other) == -1
    await client.delete_ledger(lid)
    assert await client.ledger_ids() == [other]


async def test_errors_map_to_the_storage_error_classes(client: StubClient) -> None:
    lid = await client.create_ledger()
    await client.add_entry(lid, b"x")
    with pytest.raises(EntryOutOfRangeError, match="last add confirmed is 0") as info:
        await client.read(lid, 0, 5)
    assert info.value.ledger_id == lid
    with pytest.raises(NoSuchLedgerError):
        await client.add_entry(999, b"x")
    await client.close_ledger(lid)
    with pytest.raises(LedgerClosedError):
        await client.add_entry(lid, b"x")
    await client.fence(lid)
    with pytest.raises(LedgerFencedError):
        await client.close_ledger(lid)


async def test_read_that_would_not_fit_in_one_reply_is_refused(
    client: StubClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("storage_stub.service.MAX_READ_BYTES", 100)
    lid = await client.create_ledger()
    for _ in range(3):
        await client.add_entry(lid, b"x" * 60)
    with pytest.raises(ReadTooLargeError, match="read fewer") as info:
        await client.read(lid, 0, 1)
    assert info.value.ledger_id == lid
    assert await client.read(lid, 1, 1) == [b"x" * 60]


async def test_pipelined_adds_get_distinct_ids_that_read_back_their_own_data(
    client: StubClient,
) -> None:
    lid = await client.create_ledger()
    results: dict[int, bytes] = {}

    async def add(i: int) -> None:
        data = b"entry-%d" % i
        results[await client.add_entry(lid, data)] = data

    async with anyio.create_task_group() as tg:
        for i in range(300):
            tg.start_soon(add, i)
    assert sorted(results) == list(range(300))
    entries = await client.read(lid, 0, 299)
    assert {eid: entries[eid] for eid in results} == results


async def test_mixed_requests_pipeline_on_one_connection(client: StubClient) -> None:
    lid = await client.create_ledger()
    session = await client.session_create(30.0)
    got: dict[str, object] = {}

    async def run(name: str, coro_fn: Callable[[], Awaitable[object]]) -> None:
        got[name] = await coro_fn()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "add", lambda: client.add_entry(lid, b"x"))
        tg.start_soon(run, "put", lambda: client.put(session, "/p", b"v"))
        tg.start_soon(run, "ping", client.ping)
        tg.start_soon(run, "lac", lambda: client.last_add_confirmed(lid))
    assert got["add"] == 0
    assert got["put"] == ("/p", 0)
    assert got["ping"] is None
    assert got["lac"] in (-1, 0)


# ---- latency and faults ---------------------------------------------------------------------


async def test_injected_latency_delays_replies_on_the_clock(
    client: StubClient, fake_clock: FakeClock
) -> None:
    lid = await client.create_ledger()
    await client.configure_faults(FaultConfig(ops={"add": OpFaults(latency=Fixed(ms=50))}))
    done: list[float] = []

    async def add() -> None:
        await client.add_entry(lid, b"slow")
        done.append(fake_clock.now())

    async with anyio.create_task_group() as tg:
        tg.start_soon(add)
        await anyio.wait_all_tasks_blocked()
        assert await client.read(lid, 0, 0) == [b"slow"]  # applied at once; reads not delayed
        await fake_clock.advance(0.049)
        assert done == []
        await fake_clock.advance(0.001)
    assert done == [pytest.approx(0.050)]


async def test_replies_to_adds_of_one_ledger_never_overtake_each_other(
    client: StubClient, fake_clock: FakeClock
) -> None:
    lid = await client.create_ledger()
    latency = OpFaults(latency=Uniform(low_ms=1, high_ms=100))
    await client.configure_faults(FaultConfig(seed=11, ops={"add": latency}))
    acked: dict[int, float] = {}

    async def add(i: int) -> None:
        entry_id = await client.add_entry(lid, b"%d" % i)
        acked[entry_id] = fake_clock.now()

    async with anyio.create_task_group() as tg:
        for i in range(40):
            tg.start_soon(add, i)
        await fake_clock.run_until_idle()
    times = [acked[eid] for eid in sorted(acked)]
    assert times == sorted(times)
    assert times[-1] > times[0]  # the latency really varied


async def test_fail_next_n_surfaces_as_errors_then_recovers(client: StubClient) -> None:
    lid = await client.create_ledger()
    await client.fail_next(2, ops=["add"])
    for _ in range(2):
        with pytest.raises(StubUnavailableError, match="injected") as info:
            await client.add_entry(lid, b"lost")
        assert info.value.retriable
    assert await client.last_add_confirmed(lid) == -1  # failed adds were not applied
    assert await client.add_entry(lid, b"kept") == 0
    assert (await client.statistics()).faults.failed == 2


async def test_error_rate_from_config_fails_some_requests(client: StubClient) -> None:
    lid = await client.create_ledger()
    await client.configure_faults(FaultConfig(seed=2, ops={"add": OpFaults(error_rate=0.5)}))
    outcomes = []
    for i in range(40):
        try:
            await client.add_entry(lid, b"%d" % i)
            outcomes.append(True)
        except StubUnavailableError:
            outcomes.append(False)
    assert 5 < outcomes.count(False) < 35
    assert await client.last_add_confirmed(lid) == outcomes.count(True) - 1
    await client.clear_faults()
    assert await client.add_entry(lid, b"ok") == outcomes.count(True)


async def test_stalled_stub_makes_calls_time_out_on_the_clock(
    client: StubClient, fake_clock: FakeClock
) -> None:
    lid = await client.create_ledger()
    await client.stall(60.0)
    errors: list[tuple[float, StubTimeoutError]] = []

    async def add() -> None:
        try:
            await client.add_entry(lid, b"x")
        except StubTimeoutError as exc:
            errors.append((fake_clock.now(), exc))

    async with anyio.create_task_group() as tg:
        tg.start_soon(add)
        await anyio.wait_all_tasks_blocked()
        await fake_clock.advance(REQUEST_TIMEOUT - 0.001)
        assert errors == []
        await fake_clock.advance(0.001)
    assert [t for t, _ in errors] == [REQUEST_TIMEOUT]
    assert errors[0][1].retriable
    # Control requests are never stalled, so the stall can be lifted at once.
    await client.clear_faults()
    # The timed-out add's outcome was unknown: in fact it was applied.
    assert await client.add_entry(lid, b"y") == 1


async def test_per_request_timeout_overrides_the_default(
    client: StubClient, fake_clock: FakeClock
) -> None:
    await client.stall(60.0)
    timed_out: list[float] = []

    async def create() -> None:
        with pytest.raises(StubTimeoutError):
            await client.create_ledger(request_timeout=0.5)
        timed_out.append(fake_clock.now())

    async with anyio.create_task_group() as tg:
        tg.start_soon(create)
        await anyio.wait_all_tasks_blocked()
        await fake_clock.advance(0.5)
    assert timed_out == [0.5]


# ---- metadata through the service -----------------------------------------------------------


async def test_metadata_operations_round_trip(client: StubClient) -> None:
    session = await client.session_create(30.0)
    assert await client.put(session, "/a/b", b"1") == ("/a/b", 0)
    assert await client.put(session, "/a/b", b"2", 0) == ("/a/b", 1)
    with pytest.raises(BadVersionError):
        await client.put(session, "/a/b", b"3", 0)
    assert await client.get(session, "/a/b") == NodeStat(b"2", 1, False, False)
    assert await client.get(session, "/a") is None
    assert await client.children("/a") == ["b"]
    assert await client.exists("/a/b")
    with pytest.raises(InvalidPathError):
        await client.get(session, "a/b")
    await client.delete("/a/b", 1)
    assert not await client.exists("/a/b")


async def test_unrefreshed_session_expires_on_the_stub_clock(
    client: StubClient, fake_clock: FakeClock
) -> None:
    session = await client.session_create(10.0, keepalive=False)
    await client.put(session, "/lock", b"me", ephemeral=True)
    watch = await client.watch("/lock")
    await fake_clock.advance(9.9)
    assert await client.exists("/lock")
    await fake_clock.advance(0.1)
    with anyio.fail_after(GUARD):
        assert await watch.receive() == Notification("/lock", "deleted")
    await watch.aclose()
    with pytest.raises(SessionExpiredError):
        await client.session_heartbeat(session)


async def test_kept_alive_session_outlives_its_timeout(
    client: StubClient, fake_clock: FakeClock
) -> None:
    session = await client.session_create(3.0)
    await client.put(session, "/lock", b"me", ephemeral=True)
    for _ in range(10):
        await fake_clock.advance(1.0)
    assert await client.exists("/lock")
    assert client.session_alive(session)
    await client.session_close(session)
    assert not client.session_alive(session)
    assert not await client.exists("/lock")


async def test_watch_event_arrives_before_the_reply_of_the_write(client: StubClient) -> None:
    watch = await client.watch("/w")
    await client.put(0, "/w/x", b"")
    # No waiting: the notification was routed before the put's reply was.
    assert watch._receive.receive_nowait() == Notification("/w/x", "created")
    await watch.aclose()
    await client.put(0, "/w/y", b"")
    assert (await client.statistics()).nodes == 2


# ---- durability through the server ----------------------------------------------------------


async def with_clock_running(
    fake_clock: FakeClock, fn: Callable[..., Awaitable[T]], *args: object
) -> T:
    """Await ``fn(*args)`` while moving the clock in 1 ms steps (journal windows need it)."""
    result: list[T] = []
    done = anyio.Event()

    async def run() -> None:
        result.append(await fn(*args))
        done.set()

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            while not done.is_set():
                await fake_clock.advance(0.001)
                await anyio.lowlevel.checkpoint()  # let a finished fsync thread report back
    return result[0]


async def test_durable_stub_acknowledges_after_the_batch_window_and_recovers(
    tmp_path: Path, fake_clock: FakeClock
) -> None:
    options = {"data_dir": tmp_path, "fsync": FsyncPolicy.BATCH, "batch_window": 0.010}
    async with running_stub(fake_clock, **options) as board, client_of(board, fake_clock) as c:
        created: list[int] = []

        async def create() -> None:
            created.append(await c.create_ledger())

        async with anyio.create_task_group() as tg:
            tg.start_soon(create)
            await anyio.wait_all_tasks_blocked()
            await fake_clock.advance(0.009)
            assert created == []  # the reply waits for the window's fsync
            with anyio.fail_after(GUARD):
                while not created:
                    await fake_clock.advance(0.001)
                    await anyio.lowlevel.checkpoint()
        assert fake_clock.now() >= 0.010
        lid = created[0]
        assert await with_clock_running(fake_clock, c.add_entry, lid, b"durable") == 0
        session = await with_clock_running(fake_clock, c.session_create, 30.0)
        await with_clock_running(fake_clock, c.put, session, "/kept", b"yes")
    async with running_stub(fake_clock, **options) as board, client_of(board, fake_clock) as c:
        assert await c.read(lid, 0, 0) == [b"durable"]
        assert await c.get(0, "/kept") == NodeStat(b"yes", 0, False, False)


async def test_second_stub_on_the_same_data_dir_is_refused(
    tmp_path: Path, fake_clock: FakeClock
) -> None:
    async with running_stub(fake_clock, data_dir=tmp_path):
        with pytest.raises(RuntimeError, match="in use"):
            async with running_stub(fake_clock, data_dir=tmp_path):
                pass


# ---- the connection itself ------------------------------------------------------------------


async def test_garbage_from_a_client_closes_its_connection(board: Switchboard) -> None:
    assert board.server is not None
    stream = board.server.connect()
    await stream.send(b"\xff\xff\xff\xff garbage")
    with anyio.fail_after(GUARD), pytest.raises(anyio.EndOfStream):
        await stream.receive()
    await stream.aclose()


async def test_raw_pipelined_requests_get_replies_by_request_id(board: Switchboard) -> None:
    assert board.server is not None
    stream = board.server.connect()
    await stream.send(encode(m.CreateLedger(7)) + encode(m.Ping(8)) + encode(m.ListLedgers(9)))
    data = b""
    with anyio.fail_after(GUARD):
        while data.count(b"\x00\x00\x00") < 3:
            data += await stream.receive()
    from protocol.rpc import RpcDecoder

    decoder = RpcDecoder[m.ServerMessage](m.ServerMessage)
    decoder.feed(data)
    replies = []
    while (reply := decoder.next_message()) is not None:
        replies.append(reply)
    assert replies == [m.IntReply(7, 1), m.Ok(8), m.IdsReply(9, [1])]
    await stream.aclose()
