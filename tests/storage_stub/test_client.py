"""Component tests of ``StubClient``'s connection handling: loss, reconnection, restart, close."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from storage_stub.channel import StubChannel
from storage_stub.client import open_stub_client, parse_stub_url
from storage_stub.errors import StubClosedError, StubConnectionError, StubTimeoutError
from storage_stub.metadata import WatchOverflowError
from storage_stub.server import open_stub_server

from .conftest import REQUEST_TIMEOUT, Switchboard, client_of

if TYPE_CHECKING:
    from protocol.clock import FakeClock
    from storage_stub.client import StubClient

pytestmark = pytest.mark.anyio


async def test_connection_loss_fails_requests_in_flight_then_reconnects(
    board: Switchboard, client: StubClient
) -> None:
    lid = await client.create_ledger()
    await client.stall(100.0)
    failures: list[StubConnectionError] = []

    async def add() -> None:
        try:
            await client.add_entry(lid, b"unknown outcome")
        except StubConnectionError as exc:
            failures.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(add)
        await anyio.wait_all_tasks_blocked()
        await board.cut()
    assert len(failures) == 1
    assert failures[0].retriable
    await client.clear_faults()  # goes out on the new connection
    assert client.reconnects == 1
    assert client.connected
    assert await client.add_entry(lid, b"after") == 1  # the lost add had been applied


async def test_requests_made_while_disconnected_wait_for_the_next_connection(
    board: Switchboard, client: StubClient, fake_clock: FakeClock
) -> None:
    board.refuse = True
    await board.cut()
    await anyio.wait_all_tasks_blocked()
    assert not client.connected
    created: list[int] = []

    async def create() -> None:
        created.append(await client.create_ledger())

    async with anyio.create_task_group() as tg:
        tg.start_soon(create)
        await fake_clock.advance(1.0)
        assert created == []
        board.refuse = False
        await fake_clock.advance(1.0)
    assert created == [1]
    assert fake_clock.now() < REQUEST_TIMEOUT


async def test_request_times_out_if_the_stub_never_comes_back(
    board: Switchboard, client: StubClient, fake_clock: FakeClock
) -> None:
    board.refuse = True
    await board.cut()
    timed_out: list[float] = []

    async def ping() -> None:
        with pytest.raises(StubTimeoutError):
            await client.ping()
        timed_out.append(fake_clock.now())

    async with anyio.create_task_group() as tg:
        tg.start_soon(ping)
        await fake_clock.advance(REQUEST_TIMEOUT + 1)
    assert timed_out == [REQUEST_TIMEOUT]


async def test_reconnection_backs_off_exponentially_on_the_clock(
    board: Switchboard, client: StubClient, fake_clock: FakeClock
) -> None:
    board.refuse = True
    board.attempts.clear()
    await board.cut()
    await fake_clock.advance(3.5)
    # Backoff(initial=0.1, maximum=1.0): retry after 0.1, 0.2, 0.4, 0.8, then 1.0 each time.
    assert board.attempts == pytest.approx([0.0, 0.1, 0.3, 0.7, 1.5, 2.5, 3.5])


async def test_watches_end_as_overflowed_when_the_connection_breaks(
    board: Switchboard, client: StubClient
) -> None:
    watch = await client.watch("/")
    await client.put(0, "/a", b"")
    await board.cut()
    assert await watch.receive() is not None  # what was buffered is still delivered
    with pytest.raises(WatchOverflowError, match="re-read"):
        await watch.receive()
    await watch.aclose()


async def test_sessions_survive_a_reconnect_but_not_a_stub_restart(
    fake_clock: FakeClock,
) -> None:
    board = Switchboard(fake_clock)
    async with (
        open_stub_server(clock=fake_clock) as first,
        open_stub_server(clock=fake_clock) as second,
    ):
        board.server = first
        async with client_of(board, fake_clock) as client:
            session = await client.session_create(10.0)
            await client.put(session, "/lock", b"", ephemeral=True)
            await board.cut()
            assert await client.exists("/lock")  # same stub: the session lives on
            assert client.session_alive(session)

            board.server = second  # the stub "restarted" with no state
            await board.cut()
            await client.ping()
            assert not client.session_alive(session)
            assert not await client.exists("/lock")


async def test_closing_the_client_fails_requests_in_flight(
    board: Switchboard, fake_clock: FakeClock
) -> None:
    failures: list[StubClosedError] = []
    async with anyio.create_task_group() as tg, client_of(board, fake_clock) as client:
        await client.stall(100.0)

        async def ping() -> None:
            try:
                await client.ping()
                await client.create_ledger()
            except StubClosedError as exc:
                failures.append(exc)

        tg.start_soon(ping)
        await anyio.wait_all_tasks_blocked()
    assert len(failures) == 1
    assert not failures[0].retriable
    with pytest.raises(StubClosedError):
        await client.ping()


async def test_cancelled_request_leaves_the_client_usable(
    board: Switchboard, client: StubClient, fake_clock: FakeClock
) -> None:
    lid = await client.create_ledger()
    await client.stall(1.0)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.add_entry, lid, b"abandoned")
            await anyio.wait_all_tasks_blocked()
            scope.cancel()
    await fake_clock.advance(1.0)  # the abandoned reply arrives and is dropped
    assert await client.last_add_confirmed(lid) == 0
    channel = client._channel
    assert isinstance(channel, StubChannel)
    assert channel.in_flight == 0


async def test_first_connection_failure_raises(board: Switchboard, fake_clock: FakeClock) -> None:
    board.refuse = True
    with pytest.raises(StubConnectionError, match="cannot connect"):
        async with client_of(board, fake_clock):
            pass


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("stub://127.0.0.1:3181", ("127.0.0.1", 3181)),
        ("localhost:4000", ("localhost", 4000)),
        ("tcp://[::1]:5", ("::1", 5)),
    ],
)
def test_parse_stub_url(url: str, expected: tuple[str, int]) -> None:
    assert parse_stub_url(url) == expected


@pytest.mark.parametrize("url", ["http://h:1", "stub://host", "stub://:80"])
def test_parse_stub_url_rejects_malformed_urls(url: str) -> None:
    with pytest.raises(ValueError, match="not a stub URL"):
        parse_stub_url(url)


async def test_open_needs_a_url_or_a_connector() -> None:
    with pytest.raises(ValueError, match="URL or a connect"):
        async with open_stub_client():
            pass


async def test_a_session_is_lost_once_the_stub_answers_no_heartbeat_for_its_timeout(
    board: Switchboard, client: StubClient, fake_clock: FakeClock
) -> None:
    session = await client.session_create(3.0)
    board.refuse = True
    await board.cut()
    lost: list[tuple[float, str]] = []

    async def wait() -> None:
        reason = await client.wait_unreachable()
        lost.append((fake_clock.now(), reason))

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait)
        await fake_clock.advance(2.9)
        assert lost == []  # one heartbeat unanswered: the timeout has not passed
        assert client.session_alive(session)
        await fake_clock.advance(1.1)
    # Confirmed at 0 s; heartbeats at 1 and 2 s, each waiting 1 s: the second is unanswered
    # at 3 s, the session's whole timeout after its last confirmation.
    assert [at for at, _ in lost] == [pytest.approx(3.0)]
    assert "no heartbeat of metadata session" in lost[0][1]
    assert not client.session_alive(session)


async def test_heartbeats_answered_late_do_not_lose_the_session(
    board: Switchboard, client: StubClient, fake_clock: FakeClock
) -> None:
    session = await client.session_create(3.0)
    await client.stall(2.5)  # the first heartbeat times out, the next ones are answered
    async with anyio.create_task_group() as tg:
        tg.start_soon(client.wait_unreachable)
        await fake_clock.advance(10.0)
        assert client.session_alive(session)
        tg.cancel_scope.cancel()


def test_every_name_of_the_client_module_is_there_the_client_at_its_first_use() -> None:
    # storage_stub.client loads the client and its connection at the first use of their names.
    from storage_stub import channel, client, stub_client

    assert all(hasattr(client, name) for name in client.__all__)
    assert client.StubClient is stub_client.StubClient
    assert client.open_stub_client is stub_client.open_stub_client
    assert client.Backoff is channel.Backoff
    with pytest.raises(AttributeError, match="no_such_name"):
        client.no_such_name  # noqa: B018
