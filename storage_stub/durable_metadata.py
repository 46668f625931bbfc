"""The metadata tree with a journal: durable nodes, sessions that end on restart.

:class:`DurableMetadataTree` wraps the pure :class:`~storage_stub.metadata.MetadataTree` like
``DurableLedgerStore`` wraps the ledger model: every successful mutating call is applied, then
journaled as the call itself (the tree is deterministic, so replaying the calls in order rebuilds
it exactly), and the server acknowledges after ``wait_durable``.

Rules:

1. Journaled: session open and end (close or expiry), put, delete. Not journaled: heartbeats
   and watches, which do not change the tree.
2. Sessions do not survive a restart (their clients' connections did not either): recovery ends
   every session still open and journals those ends, so that a later replay sees the same
   ephemeral nodes vanish at the same point.
3. Compaction rewrites the journal as a dump (header + one record per node) once the journal
   holds :data:`COMPACT_MIN_RECORDS` records and four times as many as there are nodes;
   a load report per broker every few seconds would otherwise grow it forever.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec

from storage_stub.journal import Journal, JournalCorruptedError
from storage_stub.journaled import JournaledStore
from storage_stub.metadata import MetadataError, MetadataTree, NodeStat

if TYPE_CHECKING:
    from collections.abc import Iterator

    from storage_stub.journal import ScanResult

__all__ = ["COMPACT_MIN_RECORDS", "DurableMetadataTree"]

COMPACT_MIN_RECORDS: Final = 10_000


class _Record(msgspec.Struct, frozen=True, array_like=True, gc=False):
    pass


class _SessionOpen(_Record, frozen=True, tag=1):
    session_id: int
    timeout: float


class _SessionEnd(_Record, frozen=True, tag=2):
    session_id: int


class _Put(_Record, frozen=True, tag=3):
    session_id: int
    path: str
    value: bytes
    expected_version: int | None
    ephemeral: bool
    sequential: bool


class _Delete(_Record, frozen=True, tag=4):
    path: str
    expected_version: int | None


class _DumpHeader(_Record, frozen=True, tag=5):
    next_session: int
    sessions: list[int]
    sequence: dict[str, int]


class _DumpNode(_Record, frozen=True, tag=6):
    path: str
    value: bytes
    version: int
    owner: int


_MetaRecord = _SessionOpen | _SessionEnd | _Put | _Delete | _DumpHeader | _DumpNode
_ENCODE: Final = msgspec.msgpack.Encoder().encode
_DECODER: Final = msgspec.msgpack.Decoder(_MetaRecord)


class DurableMetadataTree(JournaledStore):
    """A :class:`MetadataTree` whose mutations are journaled; ``tree`` reads it directly.

    Args:
        tree: The tree (its watch buffer size is the caller's choice).
        journal: The journal, or ``None`` for in-memory mode.
        compact_min_records: See :data:`COMPACT_MIN_RECORDS`.
    """

    def __init__(
        self,
        tree: MetadataTree | None = None,
        journal: Journal | None = None,
        *,
        compact_min_records: int = COMPACT_MIN_RECORDS,
    ) -> None:
        self.tree = tree if tree is not None else MetadataTree()
        super().__init__(journal)
        self._records = 0
        self._compact_min = compact_min_records

    @classmethod
    def recover(
        cls,
        journal: Journal,
        scanned: ScanResult,
        *,
        tree: MetadataTree | None = None,
        compact_min_records: int = COMPACT_MIN_RECORDS,
    ) -> DurableMetadataTree:
        """Rebuild the tree from a journal's records, then end the old sessions (rule 2).

        Raises:
            JournalCorruptedError: A record does not decode or does not apply.
        """
        store = cls(tree, None, compact_min_records=compact_min_records)
        tree = store.tree
        for body, offset in zip(scanned.records, scanned.offsets, strict=True):
            try:
                store._replay(_DECODER.decode(body))
            except (msgspec.DecodeError, MetadataError) as exc:
                raise JournalCorruptedError(
                    f"metadata record does not apply: {exc}", offset=offset, path=str(journal.path)
                ) from exc
        store._records = len(scanned.records)
        store._journal = journal
        for session in tree.session_ids():
            store.close_session(session)
        tree.drain()  # nobody watches yet
        return store

    def _replay(self, record: _MetaRecord) -> None:
        tree = self.tree
        match record:
            case _Put(session, path, value, expected, ephemeral, sequential):
                tree.put(session, path, value, expected, ephemeral=ephemeral, sequential=sequential)
            case _Delete(path, expected):
                tree.delete(path, expected)
            case _SessionOpen(session, timeout):
                if tree.create_session(0.0, timeout) != session:
                    raise MetadataError(f"session {session} replayed under another id")
            case _SessionEnd(session):
                tree.close_session(session)
            case _DumpHeader(next_session, sessions, sequence):
                tree.load_header(next_session, sessions, sequence)
            case _DumpNode(path, value, version, owner):
                tree.load_node(path, value, version, owner)

    # ---- mutators: apply, then journal (rule 1) -----------------------------------------------

    def _log(self, record: _MetaRecord) -> None:
        if self._journal is not None:
            self._journal.append(_ENCODE(record))
            self._records += 1

    def create_session(self, now: float, timeout: float) -> int:
        self._check_writable()
        session = self.tree.create_session(now, timeout)
        self._log(_SessionOpen(session, timeout))
        return session

    def heartbeat(self, session: int, now: float) -> None:
        self.tree.heartbeat(session, now)

    def close_session(self, session: int) -> bool:
        self._check_writable()
        ended = self.tree.close_session(session)
        if ended:
            self._log(_SessionEnd(session))
        return ended

    def expire_sessions(self, now: float) -> list[int]:
        self._check_writable()
        expired = self.tree.expire_sessions(now)
        for session in expired:
            self._log(_SessionEnd(session))
        return expired

    def put(
        self,
        session: int,
        path: str,
        value: bytes,
        expected_version: int | None = None,
        *,
        ephemeral: bool = False,
        sequential: bool = False,
    ) -> tuple[str, int]:
        self._check_writable()
        result = self.tree.put(
            session, path, value, expected_version, ephemeral=ephemeral, sequential=sequential
        )
        self._log(_Put(session, path, value, expected_version, ephemeral, sequential))
        return result

    def delete(self, path: str, expected_version: int | None = None) -> None:
        self._check_writable()
        self.tree.delete(path, expected_version)
        self._log(_Delete(path, expected_version))

    def get(self, path: str, session: int) -> NodeStat | None:
        return self.tree.get(path, session)

    # ---- durability and compaction (rule 3) ---------------------------------------------------

    def should_compact(self) -> bool:
        nodes = self.tree.statistics().nodes
        return self._journal is not None and self._records >= max(self._compact_min, 4 * nodes)

    def _snapshot_records(self) -> Iterator[bytes]:
        # Compaction: the journal rewritten as a dump of the tree.
        next_session, sessions, sequence, nodes = self.tree.dump()
        self._records = 1 + len(nodes)
        yield _ENCODE(_DumpHeader(next_session, sessions, sequence))
        for path, value, version, owner in nodes:
            yield _ENCODE(_DumpNode(path, value, version, owner))
