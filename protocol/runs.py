"""Runs of SEND frames read as one record: the broker's unbatched publish hot path, sans-IO.

An unbatched producer writes one SEND frame per message, and a busy one fills a read with
hundreds of them back to back (spec/wire-protocol.md §6.2). Decoding each into a ``Frame``, a
``Send`` and a ``Payload``, and handing each to the handler, is most of the broker's work per
message; :func:`read_send_run` instead walks the frames of one producer that have the shape the
official client writes and gives them as one :class:`SendRun` of parallel lists::

    | total | cmd_size | 08 06 32 len 08 producer_id 10 sequence_id | 0e 01 | crc | entry |

with a one-byte producer id, a canonical sequence id of one to three bytes (below 2^21), and a
checksummed payload section whose metadata size fits the frame. The first frame of another
shape, of another producer, incomplete, or over the frame size limit ends the run; the frame
decoder then decodes it the generic way (``framing.FrameDecoder.next_frame``), which judges it.
So a run holds exactly the SENDs the generic path would decode, with the same values
(tests/protocol/test_runs.py compares both on generated, mutated and random input).
"""

from __future__ import annotations

import struct
from typing import Final

__all__ = ["SendRun", "read_send_run"]

_HEAD: Final = struct.Struct(">IIQ")  # total_size, command size, the command's first 8 bytes
_SECTION: Final = struct.Struct(">HII")  # checksum magic, crc32c, metadata size
_MAGIC_CHECKSUM_U16: Final = 0x0E01
_SHORTEST: Final = 4 + 4 + 8 + 10  # a frame with a one-byte sequence id and empty metadata

# ``08 06 32 len 08``: BaseCommand.type = SEND, field 6 (send) of ``len`` bytes, producer_id;
# by command size (8 to 10 bytes: sequence ids of one to three bytes).
_SEND_HEADS: Final = tuple(b"\x08\x06\x32" + bytes((size - 4,)) + b"\x08" for size in (8, 9, 10))


class SendRun:
    """Consecutive SENDs of one producer, on the fast lane (see the module docstring).

    Attributes:
        producer_id: The producer all of them name.
        sequence_ids: Each SEND's ``sequence_id``.
        sequence_varints: The same as written on the wire (canonical varints): a receipt or a
            metadata check can use them as they are.
        entries: Each payload's ``metadata_size | MessageMetadata | payload`` (the part the
            checksum covers).
        checksums: The CRC-32C each SEND carried.
    """

    __slots__ = ("checksums", "entries", "producer_id", "sequence_ids", "sequence_varints")

    def __init__(self, producer_id: int) -> None:
        self.producer_id = producer_id
        self.sequence_ids: list[int] = []
        self.sequence_varints: list[bytes] = []
        self.entries: list[bytes] = []
        self.checksums: list[int] = []

    def __len__(self) -> int:
        return len(self.entries)


def read_send_run(buf: bytes, pos: int, max_frame_size: int) -> tuple[SendRun, int] | None:
    """The run of fast-lane SEND frames of one producer at ``buf[pos:]``, and where it ends.

    ``pos`` is the start of a frame (its ``total_size``). Returns None when the first frame is
    not such a SEND (or is incomplete): decode it the generic way.
    """
    size = len(buf)
    if size - pos < _SHORTEST or buf[pos + 8 : pos + 11] != b"\x08\x06\x32":
        return None
    producer = buf[pos + 13]
    if producer >= 0x80 or not 8 <= buf[pos + 7] <= 10 or buf[pos + 4 : pos + 7] != b"\0\0\0":
        # Not a one-byte producer id, or a command of another size than 8 to 10 bytes (a
        # batched producer's SEND carries num_messages too): no run, before building one.
        return None
    # The command's first seven bytes, by the sequence id's length (1-3): ``08 06 32 len 08
    # producer_id 10``, as the top of the u64 read at the command's start (its low byte is the
    # sequence id's first byte).
    prefixes = (-1, *(int.from_bytes(head + bytes((producer, 0x10))) for head in _SEND_HEADS))
    run = SendRun(producer)
    sequence_ids = run.sequence_ids
    varints = run.sequence_varints
    entries = run.entries
    checksums = run.checksums
    head = _HEAD.unpack_from
    section = _SECTION.unpack_from
    while size - pos >= _SHORTEST:
        total, cmd_size, command = head(buf, pos)
        length = cmd_size - 7  # of the sequence id
        if not 0 < length < 4 or command >> 8 != prefixes[length]:
            break
        end = pos + 4 + total
        ce = pos + 8 + cmd_size
        if end > size or total > max_frame_size or end - ce < 10:
            break  # incomplete, too large, or no room for the checksum and the metadata size
        b0 = command & 0xFF
        if length == 1:
            if b0 >= 0x80:
                break
            sequence_id = b0
        elif length == 2:
            b1 = buf[ce - 1]
            if b0 < 0x80 or not 0 < b1 < 0x80:
                break  # not a two-byte varint, or a non-canonical one
            sequence_id = (b0 & 0x7F) | b1 << 7
        else:
            b1 = buf[ce - 2]
            b2 = buf[ce - 1]
            if b0 < 0x80 or b1 < 0x80 or not 0 < b2 < 0x80:
                break
            sequence_id = (b0 & 0x7F) | (b1 & 0x7F) << 7 | b2 << 14
        magic, crc, metadata_size = section(buf, ce)
        if magic != _MAGIC_CHECKSUM_U16 or metadata_size > end - ce - 10:
            break
        sequence_ids.append(sequence_id)
        varints.append(buf[ce - length : ce])
        entries.append(buf[ce + 6 : end])
        checksums.append(crc)
        pos = end
    if not entries:
        return None
    return run, pos
