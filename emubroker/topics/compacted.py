"""The compacted view of a topic: what ``read_compacted`` consumers see (pure).

Pulsar's two-phase compactor (``AbstractTwoPhaseCompactor`` with ``PublishingOrderCompactor``)
reads a topic up to its last entry and, up to the *horizon* (rule 4), keeps only the latest
message of each key:

1. The key is the message's ``partition_key`` (the batch's per-message key inside batches).
   A message whose payload is empty is a *tombstone*: it removes its key, and is itself dropped.
   Messages without a key are dropped unless ``topicCompactionRetainNullKey`` is set.
2. Phase one finds the latest ``(entry, batch index)`` of every key; phase two keeps exactly those
   messages. In a batch only some messages may survive; a batch that cannot be read (compressed
   with a codec we cannot decompress, or encrypted) is kept whole and sets no key.
3. A ``read_compacted`` consumer of an Exclusive or Failover subscription reads the compacted
   messages up to the horizon, then every message after it. Its GET_LAST_MESSAGE_ID answers the
   last compacted message while nothing was appended after the horizon
   (``ServerCnx.getLargestBatchIndexWhenPossible``), so readers, ``has_message_available`` and the
   client's TableView stop where the compacted data ends.
4. The horizon is the last entry phase one did not find wholly made of deletions (tombstones,
   messages without a key it drops): deletions after it are not covered and reach compacted
   readers from the topic, as Pulsar 4.0.7's readers receive a tombstone that was the topic's
   last message (its phase one ends the compaction at the last message it did not delete). A
   topic of deletions only is covered whole.

Pulsar writes the survivors into a separate compacted ledger. Here the stored entries stay as they
are and the view records which of them are compacted out: whole entries (``dropped``) and, for
partly surviving batches, the bitmask of the messages that survive (``partial``). That is the
decision; a subscription applies it (``Subscription.read_compacted``): its acknowledgement state
acknowledges what is compacted out (``Acknowledgements.apply_compaction``), so the dispatcher
skips it and sends a surviving batch with ``CommandMessage.ack_set`` = its survivors (spec §7.2,
§8.2: the client drops the other indexes), exactly as for batch-index acknowledgement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.batch import parse_batch
from protocol.codec import decode_record
from protocol.commands import CompressionType, MessageMetadata
from protocol.errors import RemoteProtocolError
from protocol.framing import decode_payload_section
from protocol.inflate import inflate_zlib

if TYPE_CHECKING:
    from collections.abc import Iterable

    from emubroker.topics.managed_ledger import ManagedLedger

__all__ = ["CompactedView", "Compactor"]

# A message of the topic: (entry index, batch index or -1 for an unbatched entry).
Slot = tuple[int, int]


class CompactedView:
    """The result of one compaction (see the module docstring).

    Attributes:
        horizon: The last entry index compaction covered (-1: none).
        dropped: Indexes up to the horizon whose every message is compacted out.
        partial: Index -> bitmask of surviving messages, for batches that partly survive.
        last: The last surviving message up to the horizon, or None when nothing survives.
    """

    __slots__ = ("dropped", "horizon", "last", "partial")

    def __init__(
        self, horizon: int, dropped: frozenset[int], partial: dict[int, int], last: Slot | None
    ) -> None:
        self.horizon = horizon
        self.dropped = dropped
        self.partial = partial
        self.last = last

    def last_message_id(self, ledger: ManagedLedger) -> tuple[int, int, int] | None:
        """GET_LAST_MESSAGE_ID for a compacted read, or None when entries follow the horizon.

        Returns:
            ``(ledger, entry, batch_index)`` of the last surviving message; entry -1 when none
            survives (the client then reports no message).
        """
        if ledger.count - 1 > self.horizon:
            return None
        if self.last is None:
            ledger_id, _ = ledger.position(self.horizon)
            return ledger_id, -1, -1
        index, batch_index = self.last
        ledger_id, entry_id = ledger.position(index)
        return ledger_id, entry_id, batch_index


def _batch_keys(meta: MessageMetadata, payload: memoryview) -> list[tuple[str | None, int]] | None:
    """``(key, payload size)`` per message of a readable batch, else None (rule 2)."""
    if meta.encryption_keys:
        return None
    data: bytes | memoryview = payload
    if meta.compression == CompressionType.ZLIB:
        inflated = inflate_zlib(payload, meta.uncompressed_size)
        if inflated is None:
            return None  # corrupt, or larger than it claims: kept as it is
        data = inflated
    elif meta.compression not in (None, CompressionType.NONE):
        return None  # LZ4, ZSTD, SNAPPY: no decoder here; Pulsar keeps undecodable batches
    count = meta.num_messages_in_batch or 0
    try:
        messages = parse_batch(data, count)
    except RemoteProtocolError:
        return None
    out: list[tuple[str | None, int]] = []
    for single, body in messages:
        if single.compacted_out:
            out.append((None, -1))  # already removed by an earlier compaction
        else:
            out.append((single.partition_key, len(body)))
    return out


class Compactor:
    """One compaction run, fed the topic's entries in order (both phases in one pass).

    Args:
        retain_null_key: Keep messages without a key (``topicCompactionRetainNullKey``).
    """

    def __init__(self, *, retain_null_key: bool = False) -> None:
        self._retain_null = retain_null_key
        self._latest: dict[str, Slot] = {}
        self._kept_null: list[Slot] = []
        self._whole: set[int] = set()  # unreadable batches, kept whole
        self._sizes: dict[int, int] = {}  # batched entry index -> its number of messages
        self._horizon = -1  # the last entry that is not wholly deletions (rule 4)
        # Pulsar's compaction "removed events": a value replaced, a tombstone, a keyless
        # message dropped (lastCompactionRemovedEventCount of topic stats).
        self.removed_events = 0

    def feed(self, entries: Iterable[tuple[int, bytes]]) -> None:
        """Phase one over ``(index, section)`` pairs, in index order.

        Raises:
            RemoteProtocolError: A stored section is not a valid payload section.
        """
        for index, section in entries:
            stored = decode_payload_section(section)
            meta = decode_record(MessageMetadata, stored.metadata)
            payload = stored.body
            if meta.num_messages_in_batch is None or meta.encryption_keys:
                size = meta.uncompressed_size if meta.uncompressed_size is not None else None
                size = len(payload) if size is None else size
                if not self._message(meta.partition_key, size, index, -1):
                    self._horizon = index
                continue
            keys = _batch_keys(meta, payload)
            self._sizes[index] = meta.num_messages_in_batch if keys is None else len(keys)
            if keys is None:
                self._whole.add(index)
                self._horizon = index
                continue
            deleted = 0
            for batch_index, (key, length) in enumerate(keys):
                if length >= 0:
                    deleted += self._message(key, length, index, batch_index)
            if deleted < len(keys):
                self._horizon = index

    def _message(self, key: str | None, size: int, index: int, batch_index: int) -> bool:
        """Fold in one message; whether it is a deletion (a dropped null key, a tombstone)."""
        if key is None:
            if self._retain_null:
                self._kept_null.append((index, batch_index))
                return False
            self.removed_events += 1
            return True
        if size > 0:
            self.removed_events += key in self._latest
            self._latest[key] = (index, batch_index)
            return False
        self._latest.pop(key, None)  # a tombstone deletes its key
        self.removed_events += 1
        return True

    def result(self, count: int) -> CompactedView:
        """Phase two: the view over the first ``count`` entries fed.

        Args:
            count: Entries fed.
        """
        # Rule 4: only deletions after the last other entry: they stay after the horizon.
        horizon = self._horizon if self._horizon >= 0 else count - 1
        survivors: dict[int, int] = {}  # index -> bitmask of surviving messages; -1: unbatched
        for index, batch_index in (*self._latest.values(), *self._kept_null):
            if batch_index < 0:
                survivors[index] = -1
            else:
                survivors[index] = survivors.get(index, 0) | (1 << batch_index)
        for index in self._whole:
            survivors[index] = -1
        partial = {
            index: mask
            for index, mask in survivors.items()
            if mask != -1 and mask != (1 << self._sizes[index]) - 1
        }
        dropped = frozenset(i for i in range(horizon + 1) if i not in survivors)
        last: Slot | None = None
        if survivors:
            index = max(survivors)
            mask = survivors[index]
            if mask == -1:
                last = (index, self._sizes[index] - 1 if index in self._sizes else -1)
            else:
                last = (index, mask.bit_length() - 1)
        return CompactedView(horizon, dropped, partial, last)
