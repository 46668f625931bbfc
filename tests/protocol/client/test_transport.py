"""The transport boundary: bytes through, foreign errors translated (STYLE.md §1.11, §1.13)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import anyio.lowlevel
import pytest

from protocol.client.transport import StreamTransport, connect_tcp, memory_transport_pair
from protocol.errors import ClientClosedError, ConnectionBrokenError

pytestmark = pytest.mark.anyio


Pair = tuple[StreamTransport, StreamTransport]


@pytest.fixture
async def pair() -> AsyncIterator[Pair]:
    a, b = memory_transport_pair()
    yield a, b
    await a.aclose()
    await b.aclose()


async def test_memory_pair_carries_bytes_both_ways(pair: Pair) -> None:
    a, b = pair
    await a.send(b"hello")
    await b.send(b"world")
    assert await b.receive() == b"hello"
    assert await a.receive() == b"world"


async def test_receive_honours_max_bytes_and_keeps_the_rest(pair: Pair) -> None:
    a, b = pair
    await a.send(b"abcdef")
    assert await b.receive(4) == b"abcd"
    assert await b.receive(4) == b"ef"


async def test_peer_close_reads_as_end_of_stream(pair: Pair) -> None:
    a, b = pair
    await a.aclose()
    assert await b.receive() == b""


async def test_send_to_a_closed_peer_is_a_broken_connection(pair: Pair) -> None:
    a, b = pair
    await b.aclose()
    with pytest.raises(ConnectionBrokenError, match="send failed"):
        await a.send(b"x")


async def test_using_a_transport_we_closed_is_client_closed(pair: Pair) -> None:
    a, _b = pair
    await a.aclose()
    with pytest.raises(ClientClosedError):
        await a.send(b"x")
    with pytest.raises(ClientClosedError):
        await a.receive()


async def test_send_nowait_over_memory_hands_the_bytes_over_at_once(pair: Pair) -> None:
    a, b = pair
    assert a.send_nowait(b"ping")
    assert a.send_nowait(b"")  # nothing to send is sent
    assert await b.receive() == b"ping"


async def test_send_nowait_to_a_full_pipe_writes_nothing() -> None:
    a, b = memory_transport_pair(max_buffer=1)
    assert a.send_nowait(b"first")
    assert not a.send_nowait(b"second")
    assert await b.receive() == b"first"
    assert a.send_nowait(b"third")
    assert await b.receive() == b"third"
    await a.aclose()
    await b.aclose()


async def test_send_nowait_errors_are_translated(pair: Pair) -> None:
    a, b = pair
    await b.aclose()
    with pytest.raises(ConnectionBrokenError, match="send failed"):
        a.send_nowait(b"x")
    await a.aclose()
    with pytest.raises(ClientClosedError):
        a.send_nowait(b"x")


@pytest.mark.integration
async def test_connect_tcp_refused_is_a_broken_connection() -> None:
    # Bind and close a listener to get a port nobody listens on.
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    await listener.aclose()
    with pytest.raises(ConnectionBrokenError, match="cannot connect"):
        await connect_tcp("127.0.0.1", port)


@pytest.mark.integration
async def test_connect_tcp_round_trip() -> None:
    async def echo(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            await stream.send(await stream.receive())

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, echo)
        transport = await connect_tcp("127.0.0.1", port)
        assert not transport.send_nowait(b"ping")  # a socket's send is always awaited
        await transport.send(b"ping")
        assert await transport.receive() == b"ping"
        assert await transport.receive() == b""
        await transport.aclose()
        tg.cancel_scope.cancel()


async def test_a_memory_hand_over_that_need_not_wait_lets_no_other_task_run(pair: Pair) -> None:
    # Each scheduling point is a round of the event loop; a simulation pays one per hand-over.
    a, b = pair
    rounds = 0

    async def count_rounds() -> None:
        nonlocal rounds
        while True:
            rounds += 1
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(count_rounds)
        await anyio.lowlevel.checkpoint()
        before = rounds
        await a.send(b"ping")
        assert await b.receive() == b"ping"
        assert rounds == before
        tg.cancel_scope.cancel()


async def test_a_cancelled_task_neither_sends_nor_receives_over_memory(pair: Pair) -> None:
    a, b = pair
    await a.send(b"first")
    with anyio.CancelScope() as scope:
        scope.cancel()
        await a.send(b"never")
    with anyio.CancelScope() as scope:
        scope.cancel()
        await b.receive()
    assert await b.receive() == b"first"
    with anyio.move_on_after(0.05):
        await b.receive()
        pytest.fail("a send of a cancelled task arrived")


async def test_a_receive_that_would_wait_in_a_cancelled_scope_ends_at_once(pair: Pair) -> None:
    a, b = pair
    with anyio.CancelScope() as scope:
        scope.cancel()
        await b.receive()  # nothing there: cancelled where it would wait
    assert scope.cancelled_caught
    await a.send(b"after")
    assert await b.receive() == b"after"


async def test_a_receive_takes_every_chunk_waiting_up_to_max_bytes(pair: Pair) -> None:
    a, b = pair
    for chunk in (b"ab", b"cd", b"efgh", b"ij"):
        assert a.send_nowait(chunk)
    assert await b.receive(7) == b"abcd"  # "efgh" would not fit: it waits for the next
    assert await b.receive(7) == b"efghij"


async def test_what_was_sent_before_a_close_is_read_before_the_end(pair: Pair) -> None:
    a, b = pair
    await a.send(b"last words")
    await a.aclose()
    assert await b.receive() == b"last words"
    assert await b.receive() == b""


async def test_closing_an_end_wakes_its_own_waiting_receive(pair: Pair) -> None:
    a, _b = pair
    with anyio.fail_after(5):  # guard only
        async with anyio.create_task_group() as tg:

            async def receive() -> None:
                with pytest.raises(ClientClosedError):
                    await a.receive()

            tg.start_soon(receive)
            await anyio.wait_all_tasks_blocked()
            await a.aclose()


async def test_a_send_to_a_full_pipe_waits_for_the_reader() -> None:
    a, b = memory_transport_pair(max_buffer=1)
    await a.send(b"first")
    async with anyio.create_task_group() as tg:
        tg.start_soon(a.send, b"second")
        await anyio.wait_all_tasks_blocked()
        assert await b.receive() == b"first"
    assert await b.receive() == b"second"
    await a.aclose()
    await b.aclose()


def test_a_waiting_reader_is_woken_once_per_send() -> None:
    # A step of a task is a round of the event loop, which a simulation pays per hand-over.
    import trio
    import trio.testing

    steps: list[str] = []

    class Steps(trio.abc.Instrument):
        def before_task_step(self, task: trio.lowlevel.Task) -> None:
            steps.append(task.name)

    async def main() -> None:
        a, b = memory_transport_pair()
        received: list[bytes] = []

        async def reader() -> None:
            for _ in range(10):
                received.append(await b.receive())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader, name="reader")
            for i in range(10):
                await trio.sleep(1.0)
                await a.send(b"%d" % i)
        assert received == [b"%d" % i for i in range(10)]

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0), instruments=[Steps()])
    assert steps.count("reader") == 1 + 10  # its start, then one per send


async def test_a_reader_that_waits_again_and_again_looks_the_backend_up_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = anyio.Event
    made: list[anyio.Event] = []

    def counting_event() -> anyio.Event:
        made.append(event := real())
        return event

    monkeypatch.setattr(anyio, "Event", counting_event)
    left, right = memory_transport_pair()  # its pipes take `anyio.Event` as made now
    got: list[bytes] = []

    async def read() -> None:
        for _ in range(5):
            got.append(await right.receive())

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        for index in range(5):
            await anyio.wait_all_tasks_blocked()  # the reader waits on an empty pipe
            await left.send(b"%d" % index)
    assert got == [b"0", b"1", b"2", b"3", b"4"]
    assert len(made) == 1  # the first wait's; the other four made by the backend's class
