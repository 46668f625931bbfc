"""The consumers of one subscription, its type and who may join: shared by both topic kinds.

Rules (spec/wire-protocol.md §7.1):

1. A subscription with consumers keeps its type: a consumer asking for another type fails with
   ``ConsumerBusyError``; one of the same type may still be refused by the type's picker (a
   second Exclusive consumer, another Key_Shared mode). Without consumers the newcomer sets the
   type, and the type's rules (``subtypes.RULES``) and picker (``pickers``) with it. Pulsar
   behaves the same.
2. Which consumer takes an entry is the picker's answer; the set hands it the consumers list.
3. Where unacked messages are tracked (``SubTypeRules.tracks_unacked``) a consumer blocks once
   it holds ``maxUnackedMessagesPerConsumer`` (0: no limit) or more, and unblocks only when it is
   down to half of that, or asks for redelivery (Pulsar's ``blockedConsumerOnUnackedMsgs``):
   :attr:`ConsumerSet.block_at` and :attr:`ConsumerSet.unblock_at` give the two marks, and the
   acknowledgement state keeps the flag (``acks``), as it keeps the count.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Generic

from emubroker.topics.pickers import ConsumerPicker, M, PickerContext
from emubroker.topics.subtypes import RULES, SubTypeRules
from protocol.commands import SubType
from protocol.errors import ConsumerBusyError

if TYPE_CHECKING:
    from collections.abc import Callable

    from emubroker.topics.entry import EntryInfo
    from emubroker.topics.keyshared import KeySelector
    from protocol.commands import KeySharedMeta

__all__ = ["ConsumerSet"]


class ConsumerSet(Generic[M]):
    """The consumers of one subscription and the rules of its type.

    Args:
        topic: The full topic name (a non-partitioned Failover topic picks its active by it).
        partition: The topic's partition index, -1 when not a partition.
        max_unacked: ``maxUnackedMessagesPerConsumer`` where unacked messages are tracked;
            0 disables.
        auto_split: Makes the selector of a Key_Shared AUTO_SPLIT subscription.
        writable_only: Pick only consumers whose connection is writable.
    """

    def __init__(
        self,
        *,
        topic: str,
        partition: int,
        max_unacked: int,
        auto_split: Callable[[], KeySelector[Any]],
        writable_only: bool = False,
    ) -> None:
        self._context = PickerContext(topic, partition, auto_split, writable_only)
        self._max_unacked = max_unacked
        self.consumers: list[M] = []
        self.sub_type = SubType.EXCLUSIVE
        self.rules: SubTypeRules = RULES[SubType.EXCLUSIVE]
        # Whether a consumer ever set the type: Pulsar makes a subscription's dispatcher (which
        # holds its type) at the first consumer, and reports "None" before.
        self.configured = False
        self.picker: ConsumerPicker[M] = self.rules.picker(self.consumers, self._context, None)

    def configure(self, sub_type: SubType, key_shared_meta: KeySharedMeta | None) -> None:
        """Set the type; only while no consumer is attached."""
        assert not self.consumers, "the type of a subscription with consumers cannot change"
        self.sub_type = sub_type
        self.rules = RULES[sub_type]
        self.configured = True
        self.picker = self.rules.picker(self.consumers, self._context, key_shared_meta)

    def check_join(
        self, subscription: str, sub_type: SubType, key_shared_meta: KeySharedMeta | None
    ) -> None:
        """Refuse a consumer the subscription's current consumers exclude; else set the type.

        Raises:
            ConsumerBusyError: Another type, or one the type's picker refuses (rule 1).
        """
        if not self.consumers:
            self.configure(sub_type, key_shared_meta)
            return
        if sub_type != self.sub_type:
            raise ConsumerBusyError(
                f"Subscription '{subscription}' is of type {self.rules.name}, "
                f"not {RULES[sub_type].name}"
            )
        self.picker.check_join(subscription, key_shared_meta)

    def add(self, consumer: M, key_shared_meta: KeySharedMeta | None) -> M | None:
        """Attach a consumer.

        Returns:
            The previous active consumer when it lost that role but stays attached.

        Raises:
            ConsumerAssignError: Its Key_Shared STICKY ranges overlap taken ones.
        """
        return self.picker.add(consumer, key_shared_meta)

    def remove(self, consumer: M) -> M | None:
        """Detach a consumer (unknown ones are ignored).

        Returns:
            The previous active consumer when it lost that role but stays attached.
        """
        if consumer not in self.consumers:
            return None
        return self.picker.remove(consumer)

    @property
    def active(self) -> M | None:
        """The one consumer a single-active-consumer type delivers to, else None."""
        return self.picker.active

    @property
    def block_at(self) -> int:
        """Unacked messages at which a consumer blocks (rule 3).

        ``sys.maxsize`` (never) without a limit and where unacked messages are not tracked.
        """
        limit = self._max_unacked
        return limit if limit > 0 and self.rules.tracks_unacked else sys.maxsize

    @property
    def unblock_at(self) -> int:
        """Unacked messages a blocked consumer must be down to, to unblock (half the limit)."""
        return self._max_unacked // 2

    def select(self, info: EntryInfo) -> M | None:
        """The consumer that takes this entry now, or None if the one it must go to cannot."""
        return self.picker.select(info)
