"""A managed ledger's table of ledgers: which ledger holds which index, and the table as stored.

Segment ``k`` covers the indexes ``_starts[k] .. _starts[k+1]-1`` and lives in ledger
``_ledger_ids[k]``; the segments before ``_first_live`` were trimmed. Every position question
(``position``, ``index_of``, ``last_message_id`` ...) is answered here, and the table is written to
the metadata store (``ml_meta``), version-checked, by ``_persist``: the ledger list a new owner
recovers from. :class:`LedgerSegments` holds the state of a managed ledger; the reads
(``ledger_reads.py``), the trimming (``ledger_trimming.py``), and the opening and appending
(``managed_ledger.py``) build on it.
"""

from __future__ import annotations

import bisect
import logging
import sys
from typing import TYPE_CHECKING

import anyio
import msgspec

from emubroker.metadata.store import BadVersionError
from emubroker.topics.entry import EntryInfo
from emubroker.topics.entry_cache import CacheBudget, EntryCache
from emubroker.topics.ml_meta import LedgerRecord, ManagedLedgerInfo, encode_info
from storage_stub.client import StorageError

if TYPE_CHECKING:
    from emubroker.metadata.store import MetadataStore
    from emubroker.storage import LedgerBackend
    from protocol.clock import Clock

__all__ = ["LedgerPolicy", "LedgerSegments", "ManagedLedgerFencedError"]

logger = logging.getLogger(__name__)

_PLACEHOLDER = EntryInfo(1, False, 0, None, None, "", -1, 0)  # trimmed entries: never read


class ManagedLedgerFencedError(StorageError):
    """Another broker opened this managed ledger: nothing more may be written through this one."""

    code = "ManagedLedgerFenced"


class LedgerPolicy(msgspec.Struct, frozen=True):
    """Rollover and caching rules (Pulsar's ``managedLedger*`` keys, in base units).

    Attributes:
        max_entries: ``managedLedgerMaxEntriesPerLedger``.
        max_size: ``managedLedgerMaxSizePerLedgerMbytes`` in bytes.
        min_rollover: ``managedLedgerMinLedgerRolloverTimeMinutes`` in seconds.
        max_rollover: ``managedLedgerMaxLedgerRolloverTimeMinutes`` in seconds.
    """

    max_entries: int = 50_000
    max_size: int = 2048 * 1024 * 1024
    min_rollover: float = 0.0
    max_rollover: float = 240 * 60.0


class LedgerSegments:
    """A managed ledger's state and its table of ledgers (see the module docstring)."""

    __slots__ = (
        "_bookie",
        "_cache",
        "_clock",
        "_created",
        "_fenced",
        "_first_live",
        "_ledger_ids",
        "_lock",
        "_metadata",
        "_nowait",
        "_path",
        "_policy",
        "_properties",
        "_sizes",
        "_starts",
        "_tainted",
        "_terminated",
        "_version",
        "base",
        "infos",
    )

    def __init__(
        self,
        backend: LedgerBackend,
        *,
        policy: LedgerPolicy,
        clock: Clock | None,
        metadata: MetadataStore | None,
        path: str | None,
        budget: CacheBudget | None,
    ) -> None:
        self._bookie = backend.client
        # Memory mode: the store answers at once and no ledger list waits to be written (a
        # rollover of a persisted ledger list must be awaited).
        self._nowait = backend if backend.sync and metadata is None else None
        self._policy = policy
        self._clock = clock
        self._metadata = metadata
        self._path = path
        # Segment k covers indexes _starts[k] .. _starts[k+1]-1 and lives in ledger _ledger_ids[k].
        self._starts: list[int] = []
        self._ledger_ids: list[int] = []
        self._sizes: list[int] = []
        self._created: list[float] = []
        self._first_live = 0  # segments before it were trimmed (deleted from the bookie)
        self._tainted = False
        self._terminated = False  # ``terminate``: no entry is ever added again
        self._properties: dict[str, str] = {}  # the topic's, stored with the ledger list
        self._version = -1  # of the stored ledger list (-1: not stored yet)
        self._fenced = False
        # Fast: an append that finds it free takes it without yielding first (anyio's default
        # yields), so an append costs its caller (a producer's publisher task) no task step
        # besides the bookie's reply.
        self._lock = anyio.Lock(fast_acquire=True)
        self._cache = EntryCache(budget if budget is not None else CacheBudget(256 * 1024 * 1024))
        # ``infos[i]`` is the info of index ``base + i``: entries before ``base`` were trimmed.
        # A trim rebinds ``infos`` (never cuts it in place), so a reader holding the list and
        # the ``base`` it read with it keeps a consistent pair.
        self.base = 0
        self.infos: list[EntryInfo] = []

    # ---- positions ----------------------------------------------------------------------------

    @property
    def count(self) -> int:
        """Number of entries appended so far (the next entry's index)."""
        return self.base + len(self.infos)

    @property
    def first_index(self) -> int:
        """The first entry still stored (entries before it were trimmed)."""
        return self._starts[self._first_live]

    @property
    def current_ledger_id(self) -> int:
        """The ledger new entries go to."""
        return self._ledger_ids[-1]

    @property
    def ledger_ids(self) -> tuple[int, ...]:
        """Every live ledger of the topic, oldest first."""
        return tuple(self._ledger_ids[self._first_live :])

    @property
    def nowait(self) -> bool:
        """Whether adds and reads answer at once (memory mode)."""
        return self._nowait is not None

    def position(self, index: int) -> tuple[int, int]:
        """The ``(ledger_id, entry_id)`` of an index; ``-1`` gives (first ledger, -1)."""
        if index < 0:
            return self._ledger_ids[0], -1
        k = bisect.bisect_right(self._starts, index) - 1
        return self._ledger_ids[k], index - self._starts[k]

    def last_position(self) -> tuple[int, int]:
        """Position of the last entry; an empty topic gives (current ledger, -1) (§7.6)."""
        if not self.count:
            return self._ledger_ids[-1], -1
        return self.position(self.count - 1)

    def last_message_id(self) -> tuple[int, int, int]:
        """``(ledger, entry, batch_index)`` of the last entry for GET_LAST_MESSAGE_ID (§7.6).

        ``batch_index`` is ``num_messages - 1`` for a batched last entry, else -1; an empty topic
        gives ``(current ledger, -1, -1)``; so does a last entry whose ledger was trimmed (its
        info is gone, as a reopened topic's is).
        """
        ledger_id, entry_id = self.last_position()
        if self.infos and self.infos[-1].batched:
            return ledger_id, entry_id, self.infos[-1].num_messages - 1
        return ledger_id, entry_id, -1

    def index_of(self, ledger_id: int, entry_id: int) -> int | None:
        """The index of an existing entry, or None for ids that name no entry of this topic."""
        if entry_id < 0:
            return None
        if ledger_id == self._ledger_ids[-1]:  # the current ledger: what acks name most
            index = self._starts[-1] + entry_id
            return index if index < self.count else None
        k = bisect.bisect_left(self._ledger_ids, ledger_id)
        if k == len(self._ledger_ids) or self._ledger_ids[k] != ledger_id or k < self._first_live:
            return None  # not ours, or trimmed (deleted from the bookie)
        index = self._starts[k] + entry_id
        end = self._starts[k + 1] if k + 1 < len(self._starts) else self.count
        return index if index < end else None

    def index_at_or_after(self, ledger_id: int, entry_id: int) -> int:
        """The index of the first entry at or after ``(ledger_id, entry_id)``, up to ``count``."""
        k = bisect.bisect_left(self._ledger_ids, ledger_id)
        if k == len(self._ledger_ids):
            return self.count
        if self._ledger_ids[k] != ledger_id:
            return self._starts[k]  # a ledger between ours: the next ledger's first entry
        end = self._starts[k + 1] if k + 1 < len(self._starts) else self.count
        return min(self._starts[k] + max(entry_id, 0), end)

    def _add_segment(self, ledger_id: int, start: int) -> None:
        self._ledger_ids.append(ledger_id)
        self._starts.append(start)
        self._sizes.append(0)
        self._created.append(0.0 if self._clock is None else self._clock.now())

    def _drop_last_segment(self) -> None:
        for column in (self._ledger_ids, self._starts, self._sizes, self._created):
            column.pop()

    @property
    def terminated(self) -> bool:
        """Whether the managed ledger was terminated: it takes no entry any more."""
        return self._terminated

    def _check_fenced(self) -> None:
        if self._fenced:
            raise ManagedLedgerFencedError(
                f"managed ledger {self._path} was opened by another broker",
                ledger_id=self._ledger_ids[-1],
            )

    async def _persist(self) -> None:
        if self._metadata is None or self._path is None:
            return
        records = []
        for k in range(self._first_live, len(self._ledger_ids)):
            last = k == len(self._ledger_ids) - 1
            end = self.count if last else self._starts[k + 1]
            records.append(
                LedgerRecord(
                    ledger_id=self._ledger_ids[k],
                    first_index=self._starts[k],
                    # A terminated managed ledger's last ledger is complete: nothing to recover.
                    entries=-1 if last and not self._terminated else end - self._starts[k],
                    size=self._sizes[k],
                )
            )
        try:
            put = await self._metadata.put(
                self._path,
                encode_info(
                    ManagedLedgerInfo(
                        records, terminated=self._terminated, properties=self._properties
                    )
                ),
                self._version,
            )
        except BadVersionError:
            self._fenced = True
            logger.warning("managed ledger %s was opened by another broker: fenced", self._path)
            self._check_fenced()
            raise
        self._version = put.version

    def info(self, index: int) -> EntryInfo:
        """The info of an entry; a placeholder for one whose ledger was trimmed (never read)."""
        return self.infos[index - self.base] if index >= self.base else _PLACEHOLDER

    def bytes_from(self, index: int) -> int:
        """The stored bytes from ``index`` on, estimated as Pulsar estimates a backlog's size.

        ``ManagedLedgerImpl.getEstimatedBacklogSize``: the ledgers after the one holding
        ``index`` count whole; of that one, its size less its entries before ``index`` at its
        average entry size. No walk through the entries.
        """
        index = max(index, self.first_index)
        if index >= self.count:
            return 0
        k = bisect.bisect_right(self._starts, index) - 1
        end = self._starts[k + 1] if k + 1 < len(self._starts) else self.count
        size, entries, consumed = self._sizes[k], end - self._starts[k], index - self._starts[k]
        return size - consumed * (size // entries) + sum(self._sizes[k + 1 :])

    @property
    def oldest_closed_last(self) -> int:
        """The last index of the oldest live ledger if it is closed, else ``sys.maxsize``.

        Once the slowest cursor's mark-delete reaches it, that whole ledger is consumed: the
        moment Pulsar looks for ledgers to trim. The current ledger is never trimmed, hence the
        sentinel while it is the only one.
        """
        k = self._first_live + 1
        return self._starts[k] - 1 if k < len(self._starts) else sys.maxsize
