"""Durable cursors in the metadata store: loading at topic open, coalesced persisting, trimming.

Acknowledgements only move a cursor's ``version`` (a slot write on the ACK hot path) and mark its
topic; a flusher task of the topic service runs a round at most once every ``interval`` seconds
(Pulsar rate-limits mark-delete persistence the same way:
``managedLedgerDefaultMarkDeleteRateLimit``, 1 per second, and as its rate limiter lets the first
write after a quiet spell through at once, a mark made ``interval`` or more after the last round
began is flushed at once, the others when ``interval`` has passed since it began) and, for each
marked topic, writes each cursor whose version it has not written yet once, deletes the nodes of
deleted subscriptions, evicts from the entry cache what every durable cursor has passed
(``ManagedLedger.evict_consumed``) and trims ledgers they all passed (``ManagedLedger.trim``). The
flusher only reads cursors: what it wrote is its own record. A graceful stop flushes once more, so
only a crash can lose the last interval's acknowledgements, which then come back as redeliveries:
at-least-once, never a lost message (DESIGN.md decision 8).
Layout: ``ml_meta``.

Marks (``watch``): a topic is marked when one of its cursors changes (``Cursor.on_change``), is
added or removed, or its ledger closes (``Topic.trim_consumed``: a ledger its cursors had all
passed before it closed can go now), and when its flush failed (retried next round). An unmarked
topic has nothing to write, evict or trim, so a broker's round costs what changed, not its topic
count (a broker of 200 idle partitions visited all of them every second). The flusher sleeps on an
``Alarm`` (``protocol.clock``) that the first mark after a round arms: it wakes only for a round
with something to flush, never to look at an empty set of marks (in a simulation, a round of the
event loop per broker and second). What a mark does not catch: a namespace whose retention policy
is lifted trims its consumed ledgers at the next change of its cursors or ledger, and entries read
back for a reader behind every cursor leave the cache at the next mark (or under the cache's
budget).
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING
from urllib.parse import unquote

from emubroker.metadata.paths import cursor_path
from emubroker.metadata.store import MetadataStoreError
from emubroker.topics.cursor import Cursor
from emubroker.topics.ml_meta import CursorInfo, decode_cursor_info, encode_info
from emubroker.topics.topic_state import may_trim
from storage_stub.client import StorageError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from emubroker.metadata.store import MetadataStore
    from emubroker.naming import TopicName
    from emubroker.topics.topic_state import TopicState
    from protocol.clock import Clock

__all__ = ["CursorFlusher"]

logger = logging.getLogger(__name__)


class CursorFlusher:
    """Persists the durable cursors of stored topics (see the module docstring).

    Args:
        metadata: Where cursors live.
        clock: Time for the flush period.
        interval: Seconds between flushes.
        retains: Whether a topic's namespace sets a retention policy (``topic_state.may_trim``).
    """

    def __init__(
        self,
        metadata: MetadataStore,
        *,
        clock: Clock,
        interval: float = 1.0,
        retains: Callable[[TopicName], bool] | None = None,
    ) -> None:
        self._metadata = metadata
        self._retains = retains
        self._clock = clock
        self._interval = interval
        # Per topic, per subscription: the cursor object and version last written.
        self._persisted: dict[TopicName, dict[str, tuple[Cursor, int]]] = {}
        # The topics marked since the last round, in the order they were marked (a dict, not a
        # set: a set's order would depend on the hash seed, and a simulation's trace with it).
        self._marked: dict[TopicName, None] = {}
        # Armed by the first mark after a round (``_mark``), for when the next round may run.
        self._alarm = clock.alarm()
        self._next_round = clock.now() + interval  # a round runs at most once per interval

    async def load(self, topic: TopicName, ml_path: str) -> dict[str, Cursor]:
        """The persisted durable cursors of a topic, by subscription name.

        Raises:
            MetadataStoreError: The store failed.
        """
        cursors: dict[str, Cursor] = {}
        for child in await self._metadata.children(ml_path):
            value = await self._metadata.get(f"{ml_path}/{child}")
            if value is None:
                continue
            info = decode_cursor_info(value.value)
            cursors[unquote(child)] = Cursor.restore(info.mark_delete, info.ranges, info.batch_acks)
        self._persisted[topic] = {name: (c, c.version) for name, c in cursors.items()}
        return cursors

    def watch(self, topic: TopicName, state: TopicState) -> None:
        """Mark ``topic`` for the next round whenever its state says it changed.

        Its cursors' changes, cursors added and removed, its ledgers closing
        (``TopicState.on_change``). Call it once the loaded cursors are in ``state``.
        """

        def mark() -> None:
            self._mark(topic)

        state.on_change = mark
        for cursor in state.cursors.values():
            cursor.on_change = mark

    def _mark(self, topic: TopicName) -> None:
        """Mark ``topic`` for the next round, and arm the round if nothing else did."""
        self._marked[topic] = None
        alarm = self._alarm
        if alarm.deadline == math.inf:
            alarm.set(max(self._next_round, self._clock.now()))

    def forget(self, topic: TopicName) -> None:
        """Stop tracking a deleted topic."""
        self._persisted.pop(topic, None)
        self._marked.pop(topic, None)

    async def flush(self, topic: TopicName, state: TopicState) -> None:
        """Write a topic's changed cursors, delete removed ones, trim consumed ledgers.

        A cursor is written when its version moved since it was last written, and when it is
        another cursor than the one last written under its name (a subscription deleted and
        created again).

        Raises:
            MetadataStoreError: The store failed (the cursors are written next round).
        """
        persisted = self._persisted.setdefault(topic, {})
        ledger = state.ledger
        for name, cursor in list(state.cursors.items()):
            version = cursor.version
            written = persisted.get(name)
            if written is not None and written[0] is cursor and written[1] == version:
                continue
            info = CursorInfo(
                mark_delete=cursor.mark_delete,
                ranges=cursor.ranges(),
                batch_acks=cursor.partial_acks(),
                mark_delete_position=ledger.position(cursor.mark_delete),
            )
            await self._metadata.put(cursor_path(topic, name), encode_info(info))
            persisted[name] = (cursor, version)
        for name in persisted.keys() - state.cursors.keys():
            path = cursor_path(topic, name)
            if await self._metadata.exists(path):
                await self._metadata.delete(path)
            del persisted[name]
        if not state.cursors:
            return
        floor = min(cursor.mark_delete for cursor in state.cursors.values())
        ledger.evict_consumed(floor)  # retained or not, what every cursor passed leaves the cache
        if may_trim(topic, state, self._retains):
            try:
                await ledger.trim(floor)
            except StorageError:
                logger.warning("trimming %s failed; retrying later", topic)

    async def flush_all(self, states: Iterable[tuple[TopicName, TopicState]]) -> None:
        """``flush`` every topic; failures are logged, marked and retried next round."""
        for topic, state in list(states):
            try:
                await self.flush(topic, state)
            except (MetadataStoreError, StorageError) as exc:
                logger.warning("persisting cursors of %s failed: %s", topic, exc)
                self._mark(topic)

    async def run(self, states: Mapping[TopicName, TopicState]) -> None:
        """Flush the marked topics of ``states`` when the alarm says, until cancelled.

        The first mark after a round arms the alarm for ``interval`` after that round began
        (or for now, if that has passed); with nothing marked the task sleeps.
        """
        alarm = self._alarm
        while True:
            await alarm.wait()
            alarm.set(math.inf)
            self._next_round = self._clock.now() + self._interval
            # Taken whole: a topic marked while this round awaits is flushed again next round.
            marked, self._marked = self._marked, {}
            await self.flush_all(
                (topic, state) for topic in marked if (state := states.get(topic)) is not None
            )
