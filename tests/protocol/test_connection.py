"""protocol/connection.py: the sans-IO connection's handshake, direction rules and ids.

The state table below is written from the module's rules (its header, rules 1-4) and the spec
(§2.5: what the client accepts; §3.1: CONNECT, then CONNECTED and nothing else), independently
of the module's own tables, and every (role, state, direction, command) is checked against it.
"""

from __future__ import annotations

import enum
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import commands as c
from protocol.connection import (
    CLOSED,
    PROTOCOL_VERSION,
    Connection,
    Role,
    State,
    negotiated_version,
)
from protocol.errors import LocalProtocolError, RemoteProtocolError, ServerError
from protocol.framing import (
    Frame,
    Payload,
    build_entry,
    checksum,
    encode_frame,
    encode_payload_frame,
)
from tests.support.bytestreams import ConnectionPair, drain_connection
from tests.support.strategies import commands, conforms, frames, records, sample

ENTRY = build_entry(b"\x0a\x01p\x10\x00\x18\x00", b"payload")

# spec §2.5: after the handshake the C++ client handles exactly these (TOPIC_MIGRATED is not
# modelled); anything else makes it drop the connection.
CLIENT_ACCEPTS: frozenset[type[c.Record]] = frozenset(
    {
        c.Message,
        c.SendReceipt,
        c.SendError,
        c.Success,
        c.Error,
        c.ProducerSuccess,
        c.PartitionedTopicMetadataResponse,
        c.LookupTopicResponse,
        c.ConsumerStatsResponse,
        c.CloseProducer,
        c.CloseConsumer,
        c.Ping,
        c.Pong,
        c.AuthChallenge,
        c.ActiveConsumerChange,
        c.GetLastMessageIdResponse,
        c.GetTopicsOfNamespaceResponse,
        c.GetSchemaResponse,
        c.GetOrCreateSchemaResponse,
        c.ReachedEndOfTopic,
        c.AckResponse,
    }
)
# What a client sends once connected: the requests of spec §4.2, §5-§7 and keep-alive (§3.2).
BROKER_ACCEPTS: frozenset[type[c.Record]] = frozenset(
    {
        c.Ping,
        c.Pong,
        c.AuthResponse,
        c.PartitionedTopicMetadata,
        c.LookupTopic,
        c.GetTopicsOfNamespace,
        c.Producer,
        c.Send,
        c.CloseProducer,
        c.Subscribe,
        c.Flow,
        c.Ack,
        c.Unsubscribe,
        c.Seek,
        c.CloseConsumer,
        c.RedeliverUnacknowledgedMessages,
        c.GetLastMessageId,
        c.ConsumerStats,
        c.GetSchema,
        c.GetOrCreateSchema,
        c.TcClientConnectRequest,
        c.NewTxn,
        c.AddPartitionToTxn,
        c.AddSubscriptionToTxn,
        c.EndTxn,
    }
)
ACCEPTS = {Role.CLIENT: CLIENT_ACCEPTS, Role.BROKER: BROKER_ACCEPTS}
PEER = {Role.CLIENT: Role.BROKER, Role.BROKER: Role.CLIENT}


class Setup(enum.Enum):
    """Ways to reach each state the rules distinguish."""

    FRESH = "fresh"  # HANDSHAKE, nothing exchanged
    CONNECT_DONE = "connect-done"  # HANDSHAKE, CONNECT sent (client) or received (broker)
    OPEN = "open"
    CLOSED_BY_ERROR = "closed-by-error"
    CLOSED_BY_CLOSE = "closed-by-close"
    CLOSED_BY_EOF = "closed-by-eof"


def _wire(command: Any) -> bytes:
    if isinstance(command, (c.Send, c.Message)):
        return encode_payload_frame(command, ENTRY, checksum(ENTRY))
    return encode_frame(command)


def _receive(conn: Connection, command: Any) -> Any:
    conn.receive_data(_wire(command))
    return conn.next_frame()


def _send(conn: Connection, command: Any) -> bytes:
    if isinstance(command, (c.Send, c.Message)):
        return conn.send_payload(command, ENTRY, checksum(ENTRY))
    return conn.send(command)


def connection_in(role: Role, setup: Setup) -> Connection:
    conn = Connection(role)
    connect = c.Connect(client_version="t", protocol_version=PROTOCOL_VERSION)
    connected = c.Connected(server_version="t", protocol_version=PROTOCOL_VERSION)
    if setup is Setup.FRESH:
        return conn
    if role is Role.CLIENT:
        conn.send(connect)
    else:
        _receive(conn, connect)
    if setup is Setup.CONNECT_DONE:
        return conn
    if role is Role.CLIENT:
        _receive(conn, connected)
    else:
        conn.send(connected)
    if setup is Setup.CLOSED_BY_ERROR:
        with pytest.raises(RemoteProtocolError):
            _receive(conn, connected if role is Role.BROKER else connect)
    elif setup is Setup.CLOSED_BY_CLOSE:
        conn.close()
    elif setup is Setup.CLOSED_BY_EOF:
        conn.receive_data(b"")
        assert conn.next_frame() is CLOSED
    return conn


def expected(role: Role, setup: Setup, direction: str, kind: type[c.Record]) -> State | None:
    """The state after the input, or None when it must raise (and leave the connection CLOSED)."""
    if setup is Setup.FRESH:
        # Rule 1: the client's first frame is CONNECT.
        legal = kind is c.Connect and direction == ("send" if role is Role.CLIENT else "receive")
        return State.HANDSHAKE if legal else None
    if setup is Setup.CONNECT_DONE:
        # Rule 1: ... the broker answers CONNECTED and nothing else; then both are OPEN. Or it
        # refuses the CONNECT with ERROR and the connection is CLOSED (on both sides).
        legal = kind is c.Connected and direction == ("receive" if role is Role.CLIENT else "send")
        if kind is c.Error and direction == ("receive" if role is Role.CLIENT else "send"):
            return State.CLOSED
        return State.OPEN if legal else None
    if setup is Setup.OPEN:
        # Rule 2: each side takes only what its peer may send, and sends only what its peer takes.
        accepts = ACCEPTS[role] if direction == "receive" else ACCEPTS[PEER[role]]
        return State.OPEN if kind in accepts else None
    return None  # Rule 3: from CLOSED every call raises.


CASES = [
    pytest.param(
        role, setup, direction, kind, id=f"{role.value}-{setup.value}-{direction}-{kind.__name__}"
    )
    for role in Role
    for setup in Setup
    for direction in ("send", "receive")
    for kind in c.COMMAND_TYPES
]


@pytest.mark.parametrize(("role", "setup", "direction", "kind"), CASES)
def test_state_table(role: Role, setup: Setup, direction: str, kind: type[c.Record]) -> None:
    conn = connection_in(role, setup)
    command = sample(kind)
    want = expected(role, setup, direction, kind)
    closed_quietly = setup in (Setup.CLOSED_BY_CLOSE, Setup.CLOSED_BY_EOF)
    if want is not None:
        if direction == "send":
            assert _send(conn, command)
        else:
            assert _receive(conn, command) == Frame(command, _payload_of(command))
        assert conn.state is want
    elif direction == "receive" and closed_quietly:
        # Rule 4: after the end of the stream (or our close) the connection yields CLOSED.
        try:
            event = _receive(conn, command)
        except LocalProtocolError:
            pass
        else:
            assert event is CLOSED
        assert conn.state is State.CLOSED
    else:
        error = (
            LocalProtocolError
            if direction == "send" or setup.value.startswith("closed")
            else RemoteProtocolError
        )
        act = _send if direction == "send" else _receive
        with pytest.raises(error):
            act(conn, command)
        assert conn.state is State.CLOSED


def _payload_of(command: Any) -> Payload | None:
    if isinstance(command, (c.Send, c.Message)):
        return Payload(ENTRY, checksum(ENTRY))
    return None


def test_state_table_covers_every_command() -> None:
    assert {c.Connect, c.Connected} | CLIENT_ACCEPTS | BROKER_ACCEPTS <= set(c.COMMAND_TYPES)


# ---- handshake ------------------------------------------------------------------------------


def test_handshake_opens_both_sides_and_records_the_peer() -> None:
    pair = ConnectionPair()
    connect = c.Connect(client_version="Pulsar-CPP-v4.2.0", protocol_version=20)
    assert pair.send(Role.CLIENT, connect) == [Frame(connect)]
    assert pair.broker.peer_connect == connect
    assert pair.broker.peer_protocol_version == 20
    assert (pair.client.state, pair.broker.state) == (State.HANDSHAKE, State.HANDSHAKE)
    connected = c.Connected(server_version="emubroker", protocol_version=negotiated_version(20))
    assert pair.send(Role.BROKER, connected) == [Frame(connected)]
    assert pair.client.peer_connected == connected
    assert pair.client.peer_protocol_version == 20
    assert (pair.client.state, pair.broker.state) == (State.OPEN, State.OPEN)


@pytest.mark.parametrize(
    ("client_version", "announced"), [(20, 20), (21, 20), (12, 12), (6, 6), (0, 0), (-1, 0)]
)
def test_negotiated_version_is_min_of_client_and_ours(client_version: int, announced: int) -> None:
    # spec §3.1 / §12: announce min(client's protocol_version, 20).
    assert negotiated_version(client_version) == announced


def test_connected_before_connect_is_refused_on_both_sides() -> None:
    broker = Connection(Role.BROKER)
    with pytest.raises(LocalProtocolError, match="not allowed during the handshake"):
        broker.send(c.Connected(server_version="s"))
    assert broker.state is State.CLOSED
    client = Connection(Role.CLIENT)
    with pytest.raises(RemoteProtocolError, match="not allowed during the handshake"):
        _receive(client, c.Connected(server_version="s"))
    assert client.state is State.CLOSED


def test_a_refused_connect_reaches_the_client_as_its_error() -> None:
    # ServerCnx.authenticationFailed: ERROR (request id -1) instead of CONNECTED, then close.
    client = Connection(Role.CLIENT)
    client.send(c.Connect(client_version="v", protocol_version=20))
    refusal = c.Error(
        request_id=(1 << 64) - 1,
        error=ServerError.AuthenticationError,
        message="Failed to authenticate",
    )
    frame = _receive(client, refusal)
    assert frame.command == refusal
    assert client.state is State.CLOSED


def test_a_refused_connect_ends_the_connection_without_a_protocol_error() -> None:
    # The client reads on after the refusal: CLOSED, as after close(), not LocalProtocolError
    # (which means "closed by a protocol error"); bytes behind the ERROR are not read.
    client = connection_in(Role.CLIENT, Setup.CONNECT_DONE)
    refusal = c.Error(request_id=0, error=ServerError.UnknownError, message="")
    client.receive_data(encode_frame(refusal) + encode_frame(c.Ping()))
    assert client.next_frame() == Frame(refusal)
    assert client.next_frame() is CLOSED
    client.receive_data(encode_frame(c.Ping()))
    assert client.next_frame() is CLOSED
    broker = connection_in(Role.BROKER, Setup.CONNECT_DONE)
    broker.send(refusal)
    broker.receive_data(encode_frame(c.Ping()))
    assert broker.next_frame() is CLOSED


def test_second_connected_kills_the_client_connection() -> None:
    # spec §2.5: a second CONNECTED is among the frames that make the client drop the connection.
    pair = ConnectionPair()
    pair.handshake()
    with pytest.raises(LocalProtocolError, match="client cannot receive Connected"):
        pair.broker.send(c.Connected(server_version="again"))
    with pytest.raises(RemoteProtocolError, match="client cannot receive Connected"):
        _receive(pair.client, c.Connected(server_version="again"))


# ---- sending --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [c.Send, c.Message])
def test_send_refuses_payload_commands(kind: type[c.Record]) -> None:
    # spec §2.2: SEND and MESSAGE always carry a payload section; without one the peer fails.
    conn = connection_in(Role.CLIENT if kind is c.Send else Role.BROKER, Setup.OPEN)
    with pytest.raises(LocalProtocolError, match="send_payload"):
        conn.send(sample(kind))
    assert conn.state is State.CLOSED


def test_receipts_in_bulk_are_the_frames_send_writes_one_by_one() -> None:
    # spec §6.2: the broker's publish hot path writes many SEND_RECEIPTs with one check.
    pair = ConnectionPair()
    pair.handshake()
    receipts = [(5, 3, 0), (6, 3, 1), (300, 3, 20_000)]
    sequence_ids = [sequence_id for sequence_id, _, _ in receipts]
    positions = [(ledger_id, entry_id) for _, ledger_id, entry_id in receipts]
    data = pair.broker.send_receipts(2, sequence_ids, positions)
    expected = [
        Frame(
            c.SendReceipt(
                producer_id=2,
                sequence_id=sequence_id,
                message_id=c.MessageIdData(ledger_id=ledger_id, entry_id=entry_id),
            )
        )
        for sequence_id, ledger_id, entry_id in receipts
    ]
    assert pair.deliver(Role.BROKER, data) == expected


@pytest.mark.parametrize(
    ("role", "setup"),
    [(Role.BROKER, Setup.FRESH), (Role.BROKER, Setup.CLOSED_BY_CLOSE), (Role.CLIENT, Setup.OPEN)],
)
def test_receipts_in_bulk_follow_the_state_rules(role: Role, setup: Setup) -> None:
    # Rules 1-3: only an open broker sends receipts; anything else is our caller's mistake.
    conn = connection_in(role, setup)
    with pytest.raises(LocalProtocolError):
        conn.send_receipts(1, [1], [(1, 1)])
    assert conn.state is State.CLOSED


def test_send_payload_refuses_simple_commands() -> None:
    conn = connection_in(Role.BROKER, Setup.OPEN)
    with pytest.raises(LocalProtocolError, match="no payload"):
        conn.send_payload(c.Ping(), ENTRY, None)  # type: ignore[arg-type]
    assert conn.state is State.CLOSED


@given(st.lists(st.sampled_from(Role), max_size=8), st.data())
def test_pair_delivers_every_legal_command_intact(senders: list[Role], data: st.DataObject) -> None:
    pair = ConnectionPair()
    pair.handshake()
    for role in senders:
        allowed = tuple(sorted(ACCEPTS[PEER[role]], key=lambda t: t.__name__))
        command = data.draw(commands(allowed))
        if isinstance(command, (c.Send, c.Message)):
            crc = data.draw(st.one_of(st.none(), st.just(checksum(ENTRY))))
            received = pair.send_payload(role, command, ENTRY, crc)
            assert received == [Frame(command, Payload(ENTRY, crc))]
        else:
            assert pair.send(role, command) == [Frame(command)]
    assert (pair.client.state, pair.broker.state) == (State.OPEN, State.OPEN)


def test_broker_entry_metadata_reaches_the_client() -> None:
    pair = ConnectionPair()
    pair.handshake()
    message = c.Message(consumer_id=1, message_id=c.MessageIdData(ledger_id=3, entry_id=4))
    bem = b"\x08\x01\x10\x02"
    received = pair.send_payload(Role.BROKER, message, ENTRY, checksum(ENTRY), bem)
    assert received == [Frame(message, Payload(ENTRY, checksum(ENTRY), bem))]


# ---- request ids ----------------------------------------------------------------------------


def test_request_ids_count_from_zero_per_connection() -> None:
    # spec §4.1: the client's counter starts at 0; each connection has its own.
    first, second = Connection(Role.CLIENT), Connection(Role.CLIENT)
    assert [first.next_request_id() for _ in range(3)] == [0, 1, 2]
    assert second.next_request_id() == 0
    assert first.next_request_id() == 3


# ---- end of stream and closing --------------------------------------------------------------


def test_frames_before_eof_are_delivered_then_closed() -> None:
    conn = connection_in(Role.BROKER, Setup.OPEN)
    conn.receive_data(encode_frame(c.Ping()) + encode_frame(c.Pong()))
    conn.receive_data(b"")
    assert drain_connection(conn) == [Frame(c.Ping()), Frame(c.Pong())]
    assert conn.next_frame() is CLOSED
    assert conn.next_frame() is CLOSED
    assert conn.state is State.CLOSED


def test_eof_mid_frame_closes() -> None:
    conn = connection_in(Role.BROKER, Setup.OPEN)
    conn.receive_data(encode_frame(c.Ping())[:-1])
    assert conn.next_frame() is None
    conn.receive_data(b"")
    assert conn.next_frame() is CLOSED


def test_eof_during_handshake_closes() -> None:
    conn = Connection(Role.BROKER)
    conn.receive_data(b"")
    assert conn.next_frame() is CLOSED
    assert conn.state is State.CLOSED


def test_every_call_raises_after_a_protocol_error() -> None:
    # Rule 3: from CLOSED (after a violation) every call raises, including next_frame.
    conn = connection_in(Role.BROKER, Setup.CLOSED_BY_ERROR)
    with pytest.raises(LocalProtocolError):
        conn.next_frame()
    with pytest.raises(LocalProtocolError):
        conn.receive_data(encode_frame(c.Ping()))
    with pytest.raises(LocalProtocolError):
        conn.send(c.Pong())
    with pytest.raises(LocalProtocolError):
        conn.send_payload(sample(c.Message), ENTRY, None)


def test_frames_after_a_bad_frame_are_not_handed_out() -> None:
    conn = connection_in(Role.BROKER, Setup.OPEN)
    conn.receive_data(encode_frame(c.Connected(server_version="x")) + encode_frame(c.Ping()))
    with pytest.raises(RemoteProtocolError, match="broker cannot receive Connected"):
        conn.next_frame()
    with pytest.raises(LocalProtocolError):
        conn.next_frame()


def test_send_after_close_raises() -> None:
    conn = connection_in(Role.CLIENT, Setup.CLOSED_BY_CLOSE)
    with pytest.raises(LocalProtocolError, match="connection closed"):
        conn.send(c.Ping())


# ---- frame size limit -----------------------------------------------------------------------


def test_oversized_frame_closes_the_connection() -> None:
    conn = Connection(Role.BROKER, max_frame_size=64)
    conn.receive_data(b"\x00\x00\x00\x41")  # total_size 65: refused before the body arrives
    with pytest.raises(RemoteProtocolError, match="exceeds the limit of 64"):
        conn.next_frame()
    assert conn.state is State.CLOSED


def test_max_frame_size_can_be_raised_after_connected() -> None:
    conn = connection_in(Role.CLIENT, Setup.OPEN)
    conn.max_frame_size = 100
    assert conn.max_frame_size == 100
    big = c.Error(request_id=1, error=ServerError.UnknownError, message="x" * 200)
    conn.receive_data(encode_frame(big)[:4])
    with pytest.raises(RemoteProtocolError, match="exceeds the limit of 100"):
        conn.next_frame()


# ---- garbage in -----------------------------------------------------------------------------

STARTS: list[tuple[Role, Setup]] = [
    (role, setup) for role in Role for setup in (Setup.FRESH, Setup.CONNECT_DONE, Setup.OPEN)
]


def _feed_garbage(conn: Connection, chunks: list[bytes]) -> None:
    try:
        for chunk in chunks:
            conn.receive_data(chunk)
            for frame in drain_connection(conn):
                assert conforms(frame.command)
    except RemoteProtocolError:
        assert conn.state is State.CLOSED


@given(st.sampled_from(STARTS), st.lists(st.binary(min_size=1, max_size=64), max_size=4))
def test_garbage_raises_only_remote_protocol_error(
    start: tuple[Role, Setup], chunks: list[bytes]
) -> None:
    _feed_garbage(connection_in(*start), chunks)


@given(
    st.sampled_from(STARTS),
    st.lists(frames(), min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=3),
)
def test_mutated_frames_raise_only_remote_protocol_error(
    start: tuple[Role, Setup], pairs: list[tuple[Frame, bytes]], edits: list[tuple[int, int]]
) -> None:
    stream = bytearray(b"".join(raw for _frame, raw in pairs))
    for where, byte in edits:
        stream[where % len(stream)] = byte
    _feed_garbage(connection_in(*start), [bytes(stream)])


# A broker may receive any frame of the client's vocabulary in any order after the handshake.
CLIENT_TRAFFIC = st.lists(
    commands(tuple(sorted(BROKER_ACCEPTS, key=lambda t: t.__name__))), max_size=5
)


@given(CLIENT_TRAFFIC)
def test_open_broker_takes_any_client_traffic(traffic: list[Any]) -> None:
    conn = connection_in(Role.BROKER, Setup.OPEN)
    for command in traffic:  # one receive_data per frame: b"" would mean end of stream
        conn.receive_data(_wire(command))
    assert [frame.command for frame in drain_connection(conn)] == traffic
    assert conn.state is State.OPEN


@given(records(c.Connect))
def test_broker_records_the_connect_it_received(connect: c.Connect) -> None:
    conn = Connection(Role.BROKER)
    assert _receive(conn, connect) == Frame(connect)
    assert conn.peer_connect == connect
    assert conn.peer_protocol_version == connect.protocol_version
