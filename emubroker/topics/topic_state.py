"""What a persistent topic keeps across loads (:class:`TopicState`), and when it may be trimmed.

The topic object (``topic.Topic``) is what a loaded topic looks like; its durable state belongs
to the service (``catalog``) and outlives unloads, so a reloaded topic resumes exactly where the
old one stopped (§9). The cursor flusher (``cursor_flush``) reads it too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emubroker.topics.stats import TopicCounters

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from emubroker.naming import TopicName
    from emubroker.topics.compacted import CompactedView
    from emubroker.topics.cursor import Cursor
    from emubroker.topics.dedup import DedupState
    from emubroker.topics.managed_ledger import ManagedLedger

__all__ = ["TopicState", "may_trim"]


class TopicState:
    """What a persistent topic keeps across loads.

    Attributes:
        ledger: Its entries.
        cursors: Durable subscriptions by name.
        counters: Running totals.
        topic_epoch: The exclusive-producer epoch (-1: never taken).
        dedup: Sequence ids per producer name while deduplication is on (``dedup``).
        compacted: The last compaction's view, for ``read_compacted`` consumers (``compacted``).
    """

    __slots__ = (
        "compacted",
        "counters",
        "cursors",
        "dedup",
        "ledger",
        "on_change",
        "persist_cursors",
        "topic_epoch",
    )

    def __init__(self, ledger: ManagedLedger) -> None:
        self.ledger = ledger
        self.cursors: dict[str, Cursor] = {}
        self.counters = TopicCounters()
        self.topic_epoch = -1
        self.dedup: DedupState | None = None
        self.compacted: CompactedView | None = None
        # Set by the service when cursors are persisted (``cursor_flush``): a new durable
        # subscription is written at once, as Pulsar creates the cursor before answering.
        self.persist_cursors: Callable[[], Awaitable[None]] | None = None
        # Set by the flusher (``CursorFlusher.watch``): called when a cursor is added, changes
        # or goes, or a ledger closes, so that its periodic flush visits only such topics.
        self.on_change: Callable[[], None] | None = None

    def add_cursor(self, name: str, cursor: Cursor) -> None:
        """Keep a durable subscription's cursor, its changes told to ``on_change``."""
        self.cursors[name] = cursor
        cursor.on_change = self.on_change
        self.changed()

    def remove_cursor(self, name: str) -> None:
        """Forget a deleted subscription's cursor."""
        del self.cursors[name]
        self.changed()

    def changed(self) -> None:
        """Tell ``on_change`` (if set) that the cursors or the ledger changed."""
        if self.on_change is not None:
            self.on_change()


def may_trim(
    name: TopicName, state: TopicState, retains: Callable[[TopicName], bool] | None
) -> bool:
    """Whether a topic's consumed ledgers may be deleted, in either storage mode.

    Not while its namespace sets a retention policy (``retains``; the policy's limits are not
    enforced, so everything is kept), nor once the topic was compacted: the compacted view reads
    the stored entries, where Pulsar keeps a compacted ledger apart.
    """
    return state.compacted is None and (retains is None or not retains(name))
