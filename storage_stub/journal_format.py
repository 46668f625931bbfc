"""The journal's file format, pure: framing records and scanning an image for recovery.

File layout::

    header  : b"EBJRNL01"                                   (magic + format version)
    record* : [u32 length][u32 crc32c][body: length bytes]  (big-endian)

``crc32c`` covers the length field and the body, so a flipped length bit is caught as well as a
flipped body bit. Bodies are opaque here (the durable stores put msgpack in them).

Recovery rules (:func:`scan`):

1. A *torn tail* is dropped: a last record cut short (fewer than 8 header bytes, or a length that
   points past the end of the file), or a last record whose checksum fails (its blocks never
   reached the disk). Only that record goes; everything before it is kept.
2. A record that fails its checksum *with more records after it* is corruption, not a crash
   artefact: :class:`JournalCorruptedError` names its file offset and recovery stops, rather than
   silently dropping acknowledged data that follows it. So does a length beyond
   :data:`MAX_RECORD_SIZE`, which no torn write can produce.

No I/O here; ``storage_stub.journal`` owns the file.
"""

from __future__ import annotations

import struct
from typing import Final

import msgspec

from protocol.checksum import crc32c
from protocol.rpc import MAX_RPC_FRAME_SIZE

__all__ = [
    "HEADER",
    "MAX_RECORD_SIZE",
    "RECORD_HEADER_SIZE",
    "JournalCorruptedError",
    "JournalError",
    "ScanResult",
    "encode_record",
    "scan",
]

HEADER: Final = b"EBJRNL01"
_RECORD_HEADER: Final = struct.Struct(">II")
RECORD_HEADER_SIZE: Final = _RECORD_HEADER.size
# A record holds at most what one RPC frame carried (an entry, a metadata value) plus a few
# bytes of framing: a length above this cannot have been written by us, so it is corruption,
# not a torn tail (rule 2).
MAX_RECORD_SIZE: Final = MAX_RPC_FRAME_SIZE + 1024 * 1024


class JournalError(Exception):
    """Base class of the journal's errors."""


class JournalCorruptedError(JournalError):
    """A record in the middle of the journal is damaged.

    Attributes:
        path: The journal file, if known.
        offset: File offset of the damaged record's header.
    """

    def __init__(self, message: str, *, offset: int, path: str | None = None) -> None:
        where = f"{path} " if path else ""
        super().__init__(f"journal {where}corrupted at offset {offset}: {message}")
        self.offset = offset
        self.path = path


def encode_record(body: bytes) -> bytes:
    """Frame one record: length, checksum, body."""
    prefix = len(body).to_bytes(4, "big")
    return prefix + crc32c(body, crc32c(prefix)).to_bytes(4, "big") + body


class ScanResult(msgspec.Struct, frozen=True):
    """What :func:`scan` found.

    Attributes:
        records: The bodies of every intact record, in file order.
        offsets: The file offset of each record in ``records``.
        valid_end: Offset just after the last intact record (after the header if none).
        torn: Whether bytes after ``valid_end`` were dropped as a torn tail.
    """

    records: list[bytes]
    valid_end: int
    torn: bool
    offsets: list[int] = msgspec.field(default_factory=list)


def scan(data: bytes | memoryview, *, path: str | None = None) -> ScanResult:
    """Parse a journal image (rules 1 and 2 of the module docstring).

    Args:
        data: The file's bytes.
        path: The file name, for error messages.

    Returns:
        The intact records and where they end.

    Raises:
        JournalCorruptedError: A damaged record is followed by more data, a length is
            impossible, or the file does not start with :data:`HEADER`.
    """
    view = memoryview(data)
    size = len(view)
    if size < len(HEADER):
        if HEADER.startswith(bytes(view)):  # the header itself was torn: an empty journal
            return ScanResult([], 0, size > 0, [])
        raise JournalCorruptedError("not a journal (bad header)", offset=0, path=path)
    if bytes(view[: len(HEADER)]) != HEADER:
        raise JournalCorruptedError("not a journal (bad header)", offset=0, path=path)
    records: list[bytes] = []
    offsets: list[int] = []
    offset = len(HEADER)
    while offset < size:
        if size - offset < RECORD_HEADER_SIZE:
            return ScanResult(records, offset, True, offsets)
        length, crc = _RECORD_HEADER.unpack_from(view, offset)
        if length > MAX_RECORD_SIZE:
            raise JournalCorruptedError(
                f"record length {length} exceeds {MAX_RECORD_SIZE}", offset=offset, path=path
            )
        end = offset + RECORD_HEADER_SIZE + length
        if end > size:
            return ScanResult(records, offset, True, offsets)
        body = view[offset + RECORD_HEADER_SIZE : end]
        if crc32c(body, crc32c(view[offset : offset + 4])) != crc:
            if end == size:
                return ScanResult(records, offset, True, offsets)
            raise JournalCorruptedError("checksum mismatch", offset=offset, path=path)
        records.append(bytes(body))
        offsets.append(offset)
        offset = end
    return ScanResult(records, offset, False, offsets)
