"""Chunked messages (spec §8.4): the producer's SEND frames, and reassembly on the consumer side.

Chunks of one message share a `uuid` and arrive in `chunk_id` order as ordinary entries; the
message is complete with chunk `num_chunks_from_msg - 1`. Its id is the last chunk's id, and
acknowledging it acknowledges every chunk's entry.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import msgspec

from protocol import commands as c
from protocol.codec import encode_record
from protocol.errors import MessageTooBigError
from protocol.framing import encode_send_frame
from protocol.ids import MessageId

__all__ = ["ChunkAssembler", "build_chunks"]

logger = logging.getLogger(__name__)

MAX_REMEMBERED_MESSAGES = 10_000
"""Completed chunked messages whose chunk ids are kept for acks by id; the oldest are forgotten
beyond this, so a consumer that never acks cannot grow the table without bound."""


@dataclass
class _Partial:
    total: int
    parts: list[bytes] = field(default_factory=list)
    ids: list[MessageId] = field(default_factory=list)


class ChunkAssembler:
    """Incomplete chunked messages of one consumer.

    Args:
        max_pending: incomplete messages kept at most; the oldest is dropped beyond it (its
            chunks stay unacknowledged, so the broker delivers them again after a reconnect).
    """

    def __init__(self, max_pending: int = 10) -> None:
        self.max_pending = max_pending
        self._partial: dict[str, _Partial] = {}
        self._completed: dict[MessageId, tuple[MessageId, ...]] = {}

    def add(
        self, metadata: c.MessageMetadata, body: bytes, message_id: MessageId
    ) -> tuple[bytes, tuple[MessageId, ...]] | None:
        """Take one chunk; the whole payload and every chunk id once the message is complete."""
        uuid = metadata.uuid or ""
        chunk_id = metadata.chunk_id or 0
        partial = self._partial.get(uuid)
        if chunk_id == 0:
            if partial is None and len(self._partial) >= self.max_pending:
                oldest = next(iter(self._partial))
                logger.warning("dropping incomplete chunked message %s", oldest)
                del self._partial[oldest]
            partial = self._partial[uuid] = _Partial(metadata.num_chunks_from_msg or 1)
        elif partial is None or chunk_id != len(partial.parts):
            # A gap (or a duplicate after a redelivery): what we hold cannot be completed.
            if partial is not None and chunk_id > len(partial.parts):
                del self._partial[uuid]
            return None
        partial.parts.append(body)
        partial.ids.append(message_id)
        if len(partial.parts) < partial.total:
            return None
        del self._partial[uuid]
        ids = tuple(partial.ids)
        if len(self._completed) >= MAX_REMEMBERED_MESSAGES:
            del self._completed[next(iter(self._completed))]
        self._completed[ids[-1]] = ids
        return b"".join(partial.parts), ids

    def pop_ids(self, message_id: MessageId) -> tuple[MessageId, ...]:
        """The chunk ids of a completed message given its id (empty if unknown)."""
        return self._completed.pop(message_id, ())

    def clear(self) -> None:
        """Forget incomplete messages (after a reconnect the broker sends them again)."""
        self._partial.clear()


def build_chunks(
    send: c.Send,
    metadata: c.MessageMetadata,
    payload: bytes,
    max_message_size: int,
    with_checksum: bool = True,
) -> list[bytes]:
    """The SEND frames of a chunked message (spec §8.4).

    Every chunk carries the message's sequence id and `uuid = "<producer>-<sequence id>"` (as
    the C++ client does), `num_chunks_from_msg`, `total_chunk_msg_size` and its `chunk_id`;
    chunk payloads are `max_message_size - metadata size` bytes, so each frame stays within what
    the broker accepts.

    Raises:
        MessageTooBigError: the metadata alone does not fit.
    """
    total = len(payload)
    uuid = f"{metadata.producer_name}-{metadata.sequence_id}"
    # Measure with every chunk field at a value at least as wide as any real one.
    probe = msgspec.structs.replace(
        metadata, uuid=uuid, num_chunks_from_msg=total, total_chunk_msg_size=total, chunk_id=total
    )
    chunk_size = max_message_size - len(encode_record(probe))
    if chunk_size <= 0:
        raise MessageTooBigError("message metadata alone exceeds the max message size")
    count = max(1, -(-total // chunk_size))
    chunk_send = msgspec.structs.replace(send, is_chunk=True)
    view = memoryview(payload)
    frames = []
    for chunk_id in range(count):
        chunk_meta = msgspec.structs.replace(
            metadata,
            uuid=uuid,
            num_chunks_from_msg=count,
            total_chunk_msg_size=total,
            chunk_id=chunk_id,
        )
        piece = view[chunk_id * chunk_size : (chunk_id + 1) * chunk_size]
        frames.append(
            encode_send_frame(chunk_send, encode_record(chunk_meta), piece, with_checksum)
        )
    return frames
