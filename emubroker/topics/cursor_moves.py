"""Where a subscription's cursor goes without an ACK, and the positions it reports.

A SEEK and the admin's reset and skip (rule 5 of ``subscription``: a reset closes every
consumer), message expiry's mark-delete (``expiry``), what compaction removed (``compacted``),
and the last message id a consumer asks for. :class:`CursorMoves` is the base class of
``subscription.Subscription``, which owns the state declared here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emubroker.topics.expiry import expiry_issued, find_expired
from emubroker.topics.sinks import consumer_closed
from protocol.errors import NotAllowedError
from protocol.ids import is_latest

if TYPE_CHECKING:
    from emubroker.topics.acks import Acknowledgements
    from emubroker.topics.compacted import CompactedView
    from emubroker.topics.consumer import Consumer
    from emubroker.topics.dispatcher import Dispatcher
    from emubroker.topics.expiry import ExpiryCounters
    from emubroker.topics.managed_ledger import ManagedLedger
    from emubroker.topics.selection import ConsumerSet
    from emubroker.topics.sinks import Notify
    from protocol.commands import MessageIdData

__all__ = ["CursorMoves"]


class CursorMoves:
    """A subscription's cursor moves and position queries (``subscription.Subscription``)."""

    # The subscription's state these read and write (set by `Subscription.__init__`).
    acks: Acknowledgements
    members: ConsumerSet[Consumer]
    dispatcher: Dispatcher
    compacted: CompactedView | None
    expiry: ExpiryCounters
    last_mark_delete_advanced: int
    _ledger: ManagedLedger

    @property
    def consumers(self) -> list[Consumer]:
        """Attached consumers, in join order."""
        return self.members.consumers

    def _disconnect_all(self, *, notify: Notify = True) -> None:
        dispatcher = self.dispatcher
        for consumer in list(self.consumers):
            consumer.closed = True
            dispatcher.remove_consumer(consumer, redeliver=False)
            consumer_closed(notify, consumer.sink, consumer.consumer_id)

    # ---- SEEK and position queries ------------------------------------------------------------

    async def seek(
        self,
        consumer: Consumer,
        *,
        message_id: MessageIdData | None = None,
        publish_time: int | None = None,
    ) -> None:
        """Reset the cursor and close every consumer (rule 5).

        Raises:
            NotAllowedError: The consumer is closed, or neither target was given.
        """
        if consumer.closed:
            raise NotAllowedError(f"consumer {consumer.consumer_id} is closed")
        self.reset_cursor(message_id=message_id, publish_time=publish_time)

    def last_message_id(self) -> tuple[tuple[int, int, int], tuple[int, int]]:
        """The topic's last entry with batch index, and this subscription's mark-delete."""
        ledger = self._ledger
        last = ledger.last_message_id()
        if self.compacted is not None:
            # Compacted reads end at the last compacted message while nothing follows the
            # horizon (``compacted`` rule 3).
            last = self.compacted.last_message_id(ledger) or last
        return last, ledger.position(self.acks.cursor.mark_delete)

    # ---- decisions made elsewhere: expiry, compaction ------------------------------------------

    def expire_to(self, index: int, now_ms: int) -> int:
        """Mark-delete up to ``index``, the entry message expiry found (``expiry`` rule 4).

        Returns:
            Entries expired (0 when the position is not after the mark-delete position).
        """
        change = self.acks.expire_to(index)
        if not change.moved:
            return 0
        self.dispatcher.acks_changed(change.unblocked)
        self.dispatcher.wake()
        self.last_mark_delete_advanced = now_ms
        self.expiry.total += change.entries
        return change.entries

    def expire_by_time(self, seconds: int, now_ms: int) -> bool:
        """Expire entries older than ``seconds`` (``expiry`` rule 6, the REST call).

        Returns:
            False when the expiry was not issued (Pulsar answers 409), else True.
        """
        ledger = self._ledger
        oldest = max(self.acks.cursor.mark_delete + 1, ledger.first_index)
        oldest_time = ledger.info(oldest).publish_time if oldest < ledger.count else None
        consumers = bool(self.consumers)
        if not expiry_issued(self.acks.backlog(), consumers, oldest_time, seconds, now_ms):
            return False
        self.expiry.last_expire = now_ms
        index = find_expired(ledger, seconds, now_ms)
        if index is not None:
            self.expire_to(index, now_ms)
        return True

    def read_compacted(self, view: CompactedView | None) -> None:
        """Show ``view`` to its consumers: acknowledge what compaction removed (``compacted``)."""
        self.compacted = view
        if view is not None:
            change = self.acks.apply_compaction(view.dropped, view.partial)
            self.dispatcher.acks_changed(change.unblocked)

    # ---- admin operations (REST API) ----------------------------------------------------------

    def skip(self, count: int | None = None) -> int:
        """Acknowledge the next ``count`` unacknowledged entries; all of them for None.

        Returns:
            How many entries were skipped.
        """
        change = self.acks.skip(count)
        self.dispatcher.acks_changed(change.unblocked)
        self.dispatcher.wake()
        return change.entries

    def reset_cursor(
        self, *, message_id: MessageIdData | None = None, publish_time: int | None = None
    ) -> None:
        """Move the cursor as SEEK does (rule 5), without a consumer asking.

        Raises:
            NotAllowedError: Neither target was given.
        """
        index = self._seek_index(message_id, publish_time)
        self.acks.reset(index)
        self.dispatcher.reset(index)
        self._disconnect_all()

    def _seek_index(self, message_id: MessageIdData | None, publish_time: int | None) -> int:
        ledger = self._ledger
        if message_id is not None:
            if message_id.ledger_id < 0:
                return 0  # the earliest sentinel (-1, -1)
            if is_latest(message_id):
                return ledger.count
            return ledger.index_at_or_after(message_id.ledger_id, message_id.entry_id)
        if publish_time is not None:
            # Publish times of several producers interleave, so scan rather than bisect.
            for index, info in enumerate(ledger.infos, ledger.base):
                if info.publish_time >= publish_time:
                    return index
            return ledger.count
        raise NotAllowedError("SEEK needs a message id or a publish time")
