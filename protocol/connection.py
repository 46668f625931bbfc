"""The sans-IO Pulsar connection: handshake, direction rules and request ids.

Rules (spec/wire-protocol.md §2.5, §3, §4):

1. A connection starts in HANDSHAKE. The client's first frame is CONNECT; the broker answers
   CONNECTED and nothing else, and only then is the connection OPEN on both sides. The one
   exception is a broker refusing the CONNECT (authentication failed): it sends ERROR and the
   connection is CLOSED on both sides (Pulsar's ``ServerCnx.authenticationFailed``); the client
   hands that ERROR out, so its owner can tell a refusal from a broken connection.
2. In OPEN, each side accepts only the commands its peer may send: a broker never receives
   CONNECTED or SEND_RECEIPT, a client never receives SUBSCRIBE. The client's acceptance list is
   exactly what the C++ client handles; anything else would make it drop the connection.
3. A frame that breaks rules 1-2 raises ``RemoteProtocolError`` (received) or
   ``LocalProtocolError`` (sent) and moves the connection to CLOSED, from which every call raises.
4. Receiving ``b""`` (end of stream) moves to CLOSED; ``next_frame`` then returns ``CLOSED``.

The object owns no socket: ``receive_data`` takes bytes, ``next_frame`` hands out frames and
``send`` returns the bytes to write.
"""

from __future__ import annotations

import enum
import itertools
from typing import TYPE_CHECKING, Final

from protocol import commands as c
from protocol.errors import LocalProtocolError, ProtocolError, RemoteProtocolError
from protocol.framing import (
    DEFAULT_MAX_MESSAGE_SIZE,
    FRAME_PADDING,
    Frame,
    FrameDecoder,
    encode_frame,
    encode_payload_frame,
    encode_send_receipt_frames,
)
from protocol.wire import parse_message, parse_send

if TYPE_CHECKING:
    from collections.abc import Sequence

    from protocol.runs import SendRun

PROTOCOL_VERSION: Final = 20
"""The highest protocol version we speak (v20, what the C++ 4.x client sends)."""


class Role(enum.Enum):
    """Which end of the connection this object plays."""

    CLIENT = "client"
    BROKER = "broker"


class State(enum.Enum):
    """The connection's state (see the transition table)."""

    HANDSHAKE = "handshake"
    OPEN = "open"
    CLOSED = "closed"


# Enum members read as class attributes cost about 100 ns each (Python 3.11): the per-frame
# checks of `next_frame` compare with these instead.
_OPEN: Final = State.OPEN
_STATE_CLOSED: Final = State.CLOSED


class _Closed(enum.Enum):
    CLOSED = "closed"


CLOSED: Final = _Closed.CLOSED
"""Returned by ``next_frame`` once the peer has ended the stream."""

# What each side may receive once OPEN.
_BROKER_RECEIVES: frozenset[type[c.Record]] = frozenset(
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
_CLIENT_RECEIVES: frozenset[type[c.Record]] = frozenset(
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
        c.ReachedEndOfTopic,
        c.GetLastMessageIdResponse,
        c.GetTopicsOfNamespaceResponse,
        c.GetSchemaResponse,
        c.GetOrCreateSchemaResponse,
        c.AckResponse,
    }
)

# SEND and MESSAGE are the only frames with a payload section (spec §2.2).
_PAYLOAD_COMMANDS: frozenset[type[c.Record]] = frozenset({c.Send, c.Message})

# (role, state, command type) -> next state, for the handshake frames; OPEN traffic is checked
# against the per-role acceptance sets above.
_HANDSHAKE: dict[tuple[Role, State, str, type[c.Record]], State] = {
    (Role.BROKER, State.HANDSHAKE, "receive", c.Connect): State.HANDSHAKE,
    (Role.BROKER, State.HANDSHAKE, "send", c.Connected): State.OPEN,
    (Role.BROKER, State.HANDSHAKE, "send", c.Error): State.CLOSED,
    (Role.CLIENT, State.HANDSHAKE, "send", c.Connect): State.HANDSHAKE,
    (Role.CLIENT, State.HANDSHAKE, "receive", c.Connected): State.OPEN,
    (Role.CLIENT, State.HANDSHAKE, "receive", c.Error): State.CLOSED,
}


class Connection:
    """One side of a Pulsar connection.

    Args:
        role: which side we are.
        max_frame_size: the largest frame accepted from the peer.
    """

    def __init__(
        self, role: Role, *, max_frame_size: int = DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING
    ) -> None:
        self.role = role
        self.state = State.HANDSHAKE
        self.peer_protocol_version = 0
        """The protocol version the peer announced (CONNECT or CONNECTED)."""
        self.peer_connect: c.Connect | None = None
        self.peer_connected: c.Connected | None = None
        # The command read first is the one this side receives most: SEND or MESSAGE.
        first = parse_send if role is Role.BROKER else parse_message
        self._decoder = FrameDecoder(max_frame_size, first)
        self._accepts = _BROKER_RECEIVES if role is Role.BROKER else _CLIENT_RECEIVES
        self._peer_accepts = _CLIENT_RECEIVES if role is Role.BROKER else _BROKER_RECEIVES
        self._request_ids = itertools.count()
        self._eof = False
        self._connect_done = False  # CONNECT sent (client) or received (broker); rule 1

    @property
    def max_frame_size(self) -> int:
        """The largest frame the peer may send; a larger one is a protocol error."""
        return self._decoder.max_frame_size

    @max_frame_size.setter
    def max_frame_size(self, value: int) -> None:
        self._decoder.max_frame_size = value

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as frames (an incomplete frame, once drained)."""
        return self._decoder.buffered

    def next_request_id(self) -> int:
        """A fresh request id for a request this side sends."""
        return next(self._request_ids)

    # ---- receiving ---------------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Feed bytes read from the peer; ``b""`` means the peer closed the stream.

        Raises:
            LocalProtocolError: the connection is already closed.
        """
        if self.state is State.CLOSED and not self._eof:
            raise LocalProtocolError("receive_data on a closed connection")
        if not data:
            self._eof = True
            return
        self._decoder.feed(data)

    def next_frame(self) -> Frame | _Closed | None:
        """The next frame from the peer, ``None`` if more data is needed, or ``CLOSED``.

        Raises:
            RemoteProtocolError: the peer broke the protocol; the connection is now CLOSED.
            LocalProtocolError: the connection was already closed by a protocol error.
        """
        state = self.state
        if state is _STATE_CLOSED:
            if self._eof:
                return CLOSED
            # Fix (test_connection.py, rule 3): this returned None ("need more data") or the
            # frames behind the bad one; after a violation every call raises.
            raise LocalProtocolError("next_frame on a connection closed by a protocol error")
        try:
            frame = self._decoder.next_frame()
        except RemoteProtocolError:
            self.state = State.CLOSED
            raise
        if frame is None:
            if self._eof:
                self.state = State.CLOSED
                return CLOSED
            return None
        if state is _OPEN and type(frame.command) in self._accepts:
            return frame  # the common case of _check, without the call
        self._check("receive", frame.command)
        return frame

    def next_send_run(self) -> SendRun | None:
        """The next frames as one run of a producer's SENDs (``protocol.runs``), or None.

        The broker's publish hot path: the same SENDs, in the same order, that ``next_frame``
        would return one by one. None when the next frame is anything else (call
        ``next_frame``), and always on a client or a connection that is not open.
        """
        if self.state is not _OPEN or self.role is not Role.BROKER:
            return None
        return self._decoder.next_send_run()

    def _check(self, direction: str, command: c.Command) -> None:
        kind = type(command)
        if self.state is State.OPEN:
            if direction == "receive":
                if kind in self._accepts:
                    return
                self.state = State.CLOSED
                raise RemoteProtocolError(f"{self.role.value} cannot receive {kind.__name__}")
            # Fix (test_connection.py, rules 2-3): sends were not checked, so a broker could
            # write e.g. a second CONNECTED, which makes the client drop the connection (§2.5).
            if kind in self._peer_accepts:
                return
            self.state = State.CLOSED
            peer = Role.CLIENT if self.role is Role.BROKER else Role.BROKER
            raise LocalProtocolError(f"{peer.value} cannot receive {kind.__name__}")
        if self.state is State.CLOSED:
            raise LocalProtocolError(f"cannot {direction} {kind.__name__}: connection closed")
        next_state = _HANDSHAKE.get((self.role, self.state, direction, kind))
        if (kind is c.Connect and self._connect_done) or (
            kind in (c.Connected, c.Error) and not self._connect_done
        ):
            # Fix (test_connection.py, rule 1): CONNECT comes once and first, CONNECTED only
            # after it; the table alone let a broker answer a CONNECT it never received.
            next_state = None
        if next_state is None:
            self.state = State.CLOSED
            error: type[ProtocolError] = (
                RemoteProtocolError if direction == "receive" else LocalProtocolError
            )
            raise error(f"{kind.__name__} is not allowed during the handshake")
        if isinstance(command, c.Connect):
            self._connect_done = True
            self.peer_connect = command if direction == "receive" else self.peer_connect
            if direction == "receive":
                self.peer_protocol_version = command.protocol_version
        elif isinstance(command, c.Connected) and direction == "receive":
            self.peer_connected = command
            self.peer_protocol_version = command.protocol_version
        if next_state is State.CLOSED:
            # A refused CONNECT (ERROR instead of CONNECTED) ends the connection as ``close`` does,
            # not as a protocol error: the broker closes it next (ServerCnx), so whatever follows
            # is not read, and ``next_frame`` answers CLOSED rather than raising.
            self.close()
            return
        self.state = next_state

    # ---- sending -----------------------------------------------------------------------------

    def send(self, command: c.Command) -> bytes:
        """The bytes of ``command`` (no payload); validates direction and handshake order.

        Raises:
            LocalProtocolError: the command is not allowed now, needs a payload (SEND, MESSAGE:
                use ``send_payload``) or cannot be encoded.
        """
        if type(command) in _PAYLOAD_COMMANDS:
            # Fix (test_connection.py): without its payload section the peer refuses the frame
            # (spec §2.2), so this is our caller's mistake, reported here rather than remotely.
            self.state = State.CLOSED
            raise LocalProtocolError(f"{type(command).__name__} needs send_payload")
        self._check("send", command)
        return encode_frame(command)

    def send_payload(
        self,
        command: c.Send | c.Message,
        entry: bytes,
        entry_checksum: int | None,
        broker_entry_metadata: bytes | None = None,
    ) -> bytes:
        """The bytes of a SEND or MESSAGE with its entry (see ``framing.encode_payload_frame``).

        Raises:
            LocalProtocolError: the connection is not open, the command carries no payload or
                the peer may not receive it, or the command cannot be encoded.
        """
        if type(command) not in _PAYLOAD_COMMANDS:  # the annotation is not enforced at runtime
            self.state = State.CLOSED
            raise LocalProtocolError(f"{type(command).__name__} carries no payload; use send")
        # Fix (test_connection.py, rule 3): route through the same checks as send(), so that a
        # refused payload frame also closes the connection and direction is enforced.
        self._check("send", command)
        return encode_payload_frame(command, entry, entry_checksum, broker_entry_metadata)

    def send_receipts(
        self, producer_id: int, sequence_ids: Sequence[int], positions: Sequence[tuple[int, int]]
    ) -> bytes:
        """SEND_RECEIPT frames of one producer: each sequence id with its ``(ledger, entry)``.

        The broker's publish hot path: the same checks and bytes as one ``send(SendReceipt(...))``
        per receipt, with one check for all of them (``framing.encode_send_receipt_frames``).

        Raises:
            LocalProtocolError: the connection is not open, we are not the broker, or a value
                is out of its field's range.
        """
        if self.state is not State.OPEN or self.role is not Role.BROKER:
            self._check("send", c.SendReceipt(producer_id=producer_id, sequence_id=0))
        return encode_send_receipt_frames(producer_id, sequence_ids, positions)

    def close(self) -> None:
        """Mark the connection closed (we are done with it) and drop what it buffered."""
        self.state = State.CLOSED
        self._eof = True
        self._decoder.clear()


def negotiated_version(client_version: int) -> int:
    """What a broker announces in CONNECTED: ``min(client's version, ours)``."""
    return max(0, min(client_version, PROTOCOL_VERSION))
