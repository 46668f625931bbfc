"""Message deduplication for one topic: the highest sequence id seen per producer name (pure).

Pulsar's ``MessageDeduplication``, for topics whose namespace (or the broker) enables it:

1. The broker remembers, per *producer name*, the highest sequence id *pushed* (accepted for
   storage) and the highest *persisted* (stored). A SEND whose sequence id is not above the
   pushed one is a duplicate: if it is not above the persisted one either it is answered at once
   with a receipt for message id ``(-1, -1)`` and not stored again; if it is in between (its first
   copy is still being written) the verdict is *unknown* and the SEND fails with a retriable
   error, so the client resends it later.
2. A SEND's highest id is ``CommandSend.highest_sequence_id`` when a client sends it; the C++
   client does not (spec §6.2), and its batches number their messages consecutively, so a batch of
   N messages starting at sequence id S covers ``S .. S + N - 1`` here.
3. Chunks of one message share its sequence id: only the last chunk is checked and recorded, the
   others are always stored.
4. PRODUCER_SUCCESS carries ``last_sequence_id`` = the producer name's highest pushed id, -1 for a
   name never seen (§6.1); a client that has no sequence state of its own continues from there.
5. The state is rebuilt from the stored entries when deduplication is turned on for a loaded
   topic (Pulsar replays its ledger from the last snapshot; every entry's producer name and
   sequence id are kept in memory here, so the replay needs no storage reads). Turning it off
   drops the state.

Appends to our ledgers are synchronous, so in practice pushed and persisted move together; the
two maps keep the rules right for storage that completes later.
"""

from __future__ import annotations

import enum
import struct
from typing import TYPE_CHECKING, Final, NamedTuple

from protocol.codec import decode_record
from protocol.commands import MessageMetadata
from protocol.errors import PersistenceError, RemoteProtocolError

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from emubroker.topics.entry import EntryInfo

__all__ = [
    "DUPLICATE_POSITION",
    "Admission",
    "DedupState",
    "Verdict",
    "highest_sequence_id",
    "is_last_chunk",
]

# What Topic.publish_many takes per SEND: (entry, entry checksum, info).
Pending = tuple[bytes, int | None, "EntryInfo"]

DUPLICATE_POSITION: Final = (-1, -1)
"""The ``(ledger, entry)`` of a duplicate's receipt, as Pulsar sends it."""

_U32 = struct.Struct(">I")


class Verdict(enum.Enum):
    """What to do with a SEND (Pulsar's ``MessageDupStatus``)."""

    NEW = "NotDup"
    DUPLICATE = "Dup"
    UNKNOWN = "Unknown"


def highest_sequence_id(info: EntryInfo) -> int:
    """The highest sequence id an entry covers (rule 2)."""
    if info.batched:
        return info.sequence_id + info.num_messages - 1
    return info.sequence_id


def is_last_chunk(entry: bytes) -> bool:
    """Whether an unbatched entry is a whole message or the last chunk of one (rule 3).

    Args:
        entry: ``metadata_size | MessageMetadata | payload`` as stored.
    """
    size = _U32.unpack_from(entry, 0)[0]
    try:
        meta = decode_record(MessageMetadata, memoryview(entry)[4 : 4 + size])
    except RemoteProtocolError:
        return True  # the handler validated the metadata already; treat it as a whole message
    if meta.chunk_id is None or meta.num_chunks_from_msg is None:
        return True
    return meta.chunk_id >= meta.num_chunks_from_msg - 1


class Admission(NamedTuple):
    """The SENDs of one ``publish_many`` call, sorted by :meth:`DedupState.admit_all`.

    Attributes:
        fresh: The entries to store, in order.
        highest: The sequence id to record for each fresh entry once stored.
        plan: For each admitted SEND, in order: its position in ``fresh``, or None for a
            duplicate. Shorter than the SENDs given when one had an unknown verdict: it and the
            ones after it are left for the caller to publish again.
    """

    fresh: list[Pending]
    highest: list[int]
    plan: list[int | None]


class DedupState:
    """Sequence ids per producer name (see the module docstring)."""

    __slots__ = ("persisted", "pushed")

    def __init__(self) -> None:
        self.pushed: dict[str, int] = {}
        self.persisted: dict[str, int] = {}

    @classmethod
    def replay(cls, infos: Iterable[EntryInfo]) -> DedupState:
        """Rebuild the state from a topic's stored entries, oldest first (rule 5)."""
        state = cls()
        highest = state.persisted
        for info in infos:
            top = highest_sequence_id(info)
            if top > highest.get(info.producer_name, -1):
                highest[info.producer_name] = top
        state.pushed = dict(highest)
        return state

    @classmethod
    def switch(
        cls, current: DedupState | None, enabled: bool, infos: Iterable[EntryInfo]
    ) -> DedupState | None:
        """The state after (re)reading the deduplication switch (rule 5)."""
        if not enabled:
            return None
        return current if current is not None else cls.replay(infos)

    def last_sequence_id(self, producer_name: str) -> int:
        """``PRODUCER_SUCCESS.last_sequence_id`` for a producer name (rule 4)."""
        return self.pushed.get(producer_name, -1)

    def check(self, producer_name: str, sequence_id: int, highest: int) -> Verdict:
        """Decide about a SEND and, if it is new, mark its ids pushed (rule 1).

        Args:
            producer_name: The producer's name.
            sequence_id: The SEND's (first) sequence id.
            highest: The highest sequence id it covers.
        """
        pushed = self.pushed.get(producer_name)
        if pushed is not None and sequence_id <= pushed:
            persisted = self.persisted.get(producer_name)
            if persisted is not None and sequence_id <= persisted:
                return Verdict.DUPLICATE
            return Verdict.UNKNOWN
        self.pushed[producer_name] = max(highest, sequence_id)
        return Verdict.NEW

    def stored(self, producer_name: str, highest: int) -> None:
        """An entry checked as new was stored: its ids are persisted."""
        if highest > self.persisted.get(producer_name, -1):
            self.persisted[producer_name] = highest

    def admit(self, producer_name: str, entry: bytes, info: EntryInfo) -> int | None:
        """Check a SEND before storing it (rules 1-3).

        Args:
            producer_name: The publishing producer's name.
            entry: The entry bytes (read only for unbatched entries, to spot chunks).
            info: What the handler decoded from its metadata.

        Returns:
            None for a duplicate (answer ``DUPLICATE_POSITION``, store nothing); otherwise the
            sequence id to pass to :meth:`stored` once the entry is stored (-1 for a chunk that
            is not the last one: stored, not recorded).

        Raises:
            PersistenceError: The verdict is unknown (Pulsar's ``MessageDupUnknownException``,
                answered with SEND_ERROR ``PersistenceError``: the client reconnects and resends).
        """
        if not info.batched and not is_last_chunk(entry):
            return -1
        highest = highest_sequence_id(info)
        verdict = self.check(producer_name, info.sequence_id, highest)
        if verdict is Verdict.DUPLICATE:
            return None
        if verdict is Verdict.UNKNOWN:
            raise PersistenceError(
                f"Cannot determine whether the message is a duplicate at this time "
                f"(producer {producer_name}, sequence id {info.sequence_id})"
            )
        return highest

    def admit_all(self, producer_name: str, entries: Sequence[Pending]) -> Admission:
        """:meth:`admit` for each SEND of a ``publish_many`` call, in order.

        Raises:
            PersistenceError: The first SEND's verdict is unknown (see :meth:`admit`).
        """
        admission = Admission([], [], [])
        for pending in entries:
            try:
                highest = self.admit(producer_name, pending[0], pending[2])
            except PersistenceError:
                if not admission.plan:
                    raise
                break  # publish what came before; the caller retries from here, and fails
            if highest is None:
                admission.plan.append(None)
            else:
                admission.plan.append(len(admission.fresh))
                admission.fresh.append(pending)
                admission.highest.append(highest)
        return admission

    def settle(
        self, producer_name: str, admission: Admission, stored: list[tuple[int, int]]
    ) -> list[tuple[int, int]]:
        """Record what was stored; the receipt positions of the admitted SENDs, in order.

        Args:
            producer_name: The publishing producer.
            admission: What :meth:`admit_all` decided.
            stored: The positions of the fresh entries actually stored (a prefix of them).

        Returns:
            One position per SEND up to the first one not stored: its entry's, or
            ``DUPLICATE_POSITION`` for a duplicate.
        """
        for highest in admission.highest[: len(stored)]:
            self.stored(producer_name, highest)
        if len(stored) < len(admission.fresh):
            self.failed()
        positions: list[tuple[int, int]] = []
        for slot in admission.plan:
            if slot is None:
                positions.append(DUPLICATE_POSITION)
            elif slot < len(stored):
                positions.append(stored[slot])
            else:
                break
        return positions

    def failed(self) -> None:
        """A write failed: forget what was pushed, not stored (``resetHighestSequenceIdPushed``)."""
        self.pushed = dict(self.persisted)
