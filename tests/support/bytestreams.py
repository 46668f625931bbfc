"""Byte-level helpers: protobuf pieces for golden tables, chunked feeding, connection pairs.

The protobuf helpers are deliberately naive (no protobuf import) so that golden tables built
with them are an independent statement of the wire format (spec/wire-protocol.md §1, §2).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from protocol import commands as c
from protocol.connection import CLOSED, Connection, Role
from protocol.framing import Frame, FrameDecoder

# ---- protobuf wire pieces -----------------------------------------------------------------

VARINT = 0
LEN = 2


def varint(value: int) -> bytes:
    """Base-128 varint; negative values as 64-bit two's complement (ten bytes), as protobuf."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def key(field: int, wire_type: int) -> bytes:
    """A field key: ``(number << 3) | wire type``, as a varint."""
    return varint(field << 3 | wire_type)


def vfield(field: int, value: int) -> bytes:
    """A varint-typed field (ints, bools, enums)."""
    return key(field, VARINT) + varint(value)


def lfield(field: int, body: bytes | str) -> bytes:
    """A length-delimited field (strings, bytes, sub-messages)."""
    raw = body.encode() if isinstance(body, str) else body
    return key(field, LEN) + varint(len(raw)) + raw


def base_command(type_number: int, body: bytes) -> bytes:
    """``BaseCommand{type = n; <field n> = body}`` (spec §2.4: field number == type number)."""
    return vfield(1, type_number) + lfield(type_number, body)


def simple_frame(command: bytes) -> bytes:
    """``total_size | command_size | command`` (spec §2.1)."""
    return struct.pack(">II", 4 + len(command), len(command)) + command


# ---- feeding ------------------------------------------------------------------------------


def split(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    """Cut ``data`` at the given sorted offsets (empty chunks included)."""
    out: list[bytes] = []
    start = 0
    for cut in cuts:
        out.append(data[start:cut])
        start = cut
    out.append(data[start:])
    return out


def drain(decoder: FrameDecoder) -> list[Frame]:
    """Every complete frame the decoder holds.

    Raises:
        AssertionError: the decoder produced more frames than its bytes could hold (a hang).
    """
    out: list[Frame] = []
    bound = decoder.buffered // 8 + 1  # a frame is at least 8 bytes
    while (frame := decoder.next_frame()) is not None:
        out.append(frame)
        assert len(out) <= bound, "decoder keeps producing frames from nothing"
    return out


def feed_chunks(decoder: FrameDecoder, chunks: Sequence[bytes]) -> list[Frame]:
    """Feed chunk by chunk, draining after each, as a network pump would."""
    out: list[Frame] = []
    for chunk in chunks:
        decoder.feed(chunk)
        out.extend(drain(decoder))
    return out


def drain_connection(conn: Connection) -> list[Frame]:
    """Every frame ``conn`` can hand out now; stops at ``None`` or ``CLOSED``."""
    out: list[Frame] = []
    for _ in range(100_000):  # never hang: a runaway loop fails instead
        event = conn.next_frame()
        if event is None or event is CLOSED:
            return out
        assert isinstance(event, Frame)
        out.append(event)
    raise AssertionError("connection keeps producing frames")


# ---- a client/broker pair -----------------------------------------------------------------


class ConnectionPair:
    """A client and a broker ``Connection`` wired back to back in memory (h11's helper shape).

    ``send(role, command)`` has ``role`` send and returns the frames the other side receives.
    """

    def __init__(self) -> None:
        self.client = Connection(Role.CLIENT)
        self.broker = Connection(Role.BROKER)

    def side(self, role: Role) -> Connection:
        return self.client if role is Role.CLIENT else self.broker

    def peer(self, role: Role) -> Connection:
        return self.broker if role is Role.CLIENT else self.client

    def deliver(self, role: Role, data: bytes) -> list[Frame]:
        peer = self.peer(role)
        peer.receive_data(data)
        return drain_connection(peer)

    def send(self, role: Role, command: c.Command) -> list[Frame]:
        return self.deliver(role, self.side(role).send(command))

    def send_payload(
        self,
        role: Role,
        command: c.Send | c.Message,
        entry: bytes,
        crc: int | None,
        bem: bytes | None = None,
    ) -> list[Frame]:
        return self.deliver(role, self.side(role).send_payload(command, entry, crc, bem))

    def handshake(self, protocol_version: int = 20) -> None:
        """CONNECT then CONNECTED; both sides end OPEN."""
        self.send(Role.CLIENT, c.Connect(client_version="test", protocol_version=protocol_version))
        self.send(
            Role.BROKER, c.Connected(server_version="test", protocol_version=protocol_version)
        )
