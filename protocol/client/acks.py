"""Consumer-side acknowledgement bookkeeping, pure (no I/O, no clock calls; time is passed in).

* `AckGrouper` collects acknowledgements and turns them into as few ACK commands as possible:
  the C++ client groups them for up to 100 ms or 1000 ids (spec §7.3), so do we.
* `BatchTracker` remembers which messages of each received batch are still unacknowledged, so a
  batched entry is acknowledged once all its delivered messages are (or, with batch-index ack,
  with the bitmap of those still outstanding).
* `NackTracker` holds negatively acknowledged entries until their redelivery delay has passed.
"""

from __future__ import annotations

from protocol import commands as c
from protocol.batch import ack_set_of
from protocol.ids import MessageId

__all__ = ["AckGrouper", "BatchTracker", "NackTracker"]


class AckGrouper:
    """Pending acknowledgements of one consumer.

    Args:
        consumer_id: the consumer the ACK commands are for.
        max_ids: flush as soon as this many individual ids are pending.
    """

    def __init__(self, consumer_id: int, max_ids: int = 1000) -> None:
        self.consumer_id = consumer_id
        self.max_ids = max_ids
        self._individual: dict[tuple[int, int], c.MessageIdData] = {}
        self._cumulative: MessageId | None = None
        self._cumulative_data: c.MessageIdData | None = None

    def __len__(self) -> int:
        return len(self._individual) + (self._cumulative is not None)

    def add_individual(self, data: c.MessageIdData) -> bool:
        """Queue an individual ack; True when the group is full and should be flushed."""
        key = (data.ledger_id, data.entry_id)
        previous = self._individual.get(key)
        if previous is not None and previous.ack_set and data.ack_set:
            # Two partial acks of one batch: what is still outstanding is the intersection.
            merged = tuple(a & b for a, b in zip(previous.ack_set, data.ack_set, strict=False))
            data = c.MessageIdData(
                ledger_id=data.ledger_id,
                entry_id=data.entry_id,
                ack_set=merged,
                batch_size=data.batch_size,
            )
        elif previous is not None and not previous.ack_set:
            return False  # the whole entry is already queued
        self._individual[key] = data
        return len(self._individual) >= self.max_ids

    def add_entry(self, key: tuple[int, int]) -> bool:
        """`add_individual(entry_data(*key))`, the ack of a whole entry, from its key."""
        individual = self._individual
        previous = individual.get(key)
        if previous is not None and not previous.ack_set:
            return False  # the whole entry is already queued
        individual[key] = entry_data(*key)  # replaces a partial ack: the entry is done
        return len(individual) >= self.max_ids

    def add_cumulative(self, position: MessageId, data: c.MessageIdData) -> None:
        """Queue a cumulative ack; only the furthest position matters."""
        if self._cumulative is None or self._cumulative < position:
            self._cumulative = position
            self._cumulative_data = data

    def is_duplicate(self, ledger_id: int, entry_id: int) -> bool:
        """True when the whole entry is already covered by a pending ack."""
        pending = self._individual.get((ledger_id, entry_id))
        if pending is not None and not pending.ack_set:
            return True
        cumulative = self._cumulative
        return cumulative is not None and (ledger_id, entry_id) <= (
            cumulative.ledger_id,
            cumulative.entry_id,
        )

    def take(self) -> list[c.Ack]:
        """The ACK commands for everything pending (at most one of each type), emptying it.

        Protocol v12+ carries many ids per ACK (spec §7.3), so one command holds them all.
        """
        commands: list[c.Ack] = []
        if self._cumulative_data is not None:
            commands.append(
                c.Ack(
                    consumer_id=self.consumer_id,
                    ack_type=c.AckType.CUMULATIVE,
                    message_id=(self._cumulative_data,),
                )
            )
        if self._individual:
            commands.append(
                c.Ack(
                    consumer_id=self.consumer_id,
                    ack_type=c.AckType.INDIVIDUAL,
                    message_id=tuple(self._individual.values()),
                )
            )
        self.clear()
        return commands

    def clear(self) -> None:
        """Drop every ack waiting to be sent (the consumer reconnects or closes)."""
        self._individual = {}
        self._cumulative = None
        self._cumulative_data = None


def entry_data(ledger_id: int, entry_id: int) -> c.MessageIdData:
    """The wire id of a whole entry (ACK and REDELIVER carry ledger and entry only)."""
    return c.MessageIdData(ledger_id=ledger_id, entry_id=entry_id)


class BatchTracker:
    """Unacknowledged message indexes of received batches, per (ledger, entry)."""

    def __init__(self) -> None:
        self._outstanding: dict[tuple[int, int], tuple[set[int], int]] = {}

    def received(self, ledger_id: int, entry_id: int, indexes: set[int], size: int) -> None:
        """A batch was (re)delivered with these message indexes handed to the application."""
        self._outstanding[(ledger_id, entry_id)] = (indexes, size)

    def ack(self, key: tuple[int, int], batch_index: int) -> bool:
        """Acknowledge message `batch_index` of entry `key = (ledger_id, entry_id)`.

        Returns:
            True when the whole entry may now be acknowledged.
        """
        found = self._outstanding.get(key)
        if found is None:
            return True  # unknown (e.g. delivered before a reconnect): ack the entry
        indexes = found[0]
        indexes.discard(batch_index)
        if not indexes:
            del self._outstanding[key]
            return True
        return False

    def outstanding(self, key: tuple[int, int]) -> tuple[int, ...]:
        """The bitmap of the entry's indexes not yet acknowledged (for batch-index acks)."""
        found = self._outstanding.get(key)
        return () if found is None else ack_set_of(found[0], found[1])

    def cumulative(self, message_id: MessageId) -> c.MessageIdData | None:
        """The wire position of a cumulative ack up to `message_id`, forgetting what it covers.

        Without batch-index ack, a position in the middle of a batch acks the entry before it
        (spec §7.3); None when nothing is acknowledged yet.
        """
        ledger_id, entry_id = message_id.ledger_id, message_id.entry_id
        for key in [k for k in self._outstanding if k < (ledger_id, entry_id)]:
            del self._outstanding[key]
        if message_id.batch_index < 0:
            self._outstanding.pop((ledger_id, entry_id), None)
            return entry_data(ledger_id, entry_id)
        found = self._outstanding.get((ledger_id, entry_id))
        size = found[1] if found is not None else message_id.batch_size
        if found is None or message_id.batch_index >= size - 1:
            self._outstanding.pop((ledger_id, entry_id), None)
            return entry_data(ledger_id, entry_id)
        if entry_id == 0:
            return None
        return entry_data(ledger_id, entry_id - 1)

    def clear(self) -> None:
        """Forget every delivered entry (the consumer reconnects or closes)."""
        self._outstanding.clear()


class NackTracker:
    """Negatively acknowledged entries waiting for their redelivery time."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.due: dict[tuple[int, int], float] = {}  # (ledger_id, entry_id) -> redelivery time

    def __len__(self) -> int:
        return len(self.due)

    def add(self, message_id: MessageId, now: float) -> None:
        """Nack the entry of `message_id`: a batch is redelivered whole (spec §7.4)."""
        self.due[(message_id.ledger_id, message_id.entry_id)] = now + self.delay

    def discard(self, key: tuple[int, int]) -> None:
        """Forget the nack of entry `key = (ledger_id, entry_id)`, if any."""
        self.due.pop(key, None)

    def next_deadline(self) -> float | None:
        """The earliest redelivery time of a nacked entry, or None when there is none."""
        return min(self.due.values()) if self.due else None

    def pop_due(self, now: float) -> list[c.MessageIdData]:
        """The entries whose delay has passed, in id order, removed from the tracker."""
        due = sorted(key for key, deadline in self.due.items() if deadline <= now)
        for key in due:
            del self.due[key]
        return [entry_data(ledger, entry) for ledger, entry in due]

    def clear(self) -> None:
        """Forget every nacked entry."""
        self.due.clear()
