"""What a subscription's type means to the broker: one row of rules per ``SubType``.

Every rule the topic layer applies by subscription type is read from :data:`RULES`; no other
module asks which type a subscription has. Which consumer gets an entry, and who may join, is the
type's picker (``pickers``), named in its row. A new type is one row here and one picker class.

The columns, with the Pulsar code each one follows:

* ``single_active``: everything goes to one active consumer at a time
  (``AbstractDispatcherSingleActiveConsumer``), so the dispatcher sends to it without asking
  the picker per entry, and names it in the dispatch trace.
* ``tracks_unacked``: acks are individual, and each consumer's unacked messages are counted,
  reported (stats) and limited by ``maxUnackedMessagesPerConsumer`` (the multiple-consumers
  dispatchers' pending acks; Exclusive and Failover report 0).
* ``counts_redeliveries``: redeliveries are counted, in the MESSAGE's ``redelivery_count`` and
  the consumer's ``msgRateRedeliver`` (the single-active dispatcher's redelivery tracker is
  disabled: always 0).
* ``delayed_delivery``: ``deliver_at_time`` is honoured (``delayedDeliveryEnabled``: Shared and
  Key_Shared only); the other types deliver delayed messages at once.
* ``read_compacted``: consumers may read the compacted view (``PersistentTopic.subscribe``
  refuses it on shared subscriptions).
* ``limits_consumers``: ``maxConsumersPerSubscription`` applies (Exclusive has one anyway).
* ``routes_by_key``: an entry may go only to its key's consumer, so entries of a consumer without
  room are parked for later and other keys keep flowing (Key_Shared's replay set).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, NamedTuple

from emubroker.topics.pickers import ExclusivePicker, FailoverPicker, KeySharedPicker, SharedPicker
from protocol.commands import SubType

if TYPE_CHECKING:
    from emubroker.topics.pickers import ConsumerPicker

__all__ = ["RULES", "SubTypeRules"]


class SubTypeRules(NamedTuple):
    """One subscription type's rules (see the module docstring for each column)."""

    name: str
    """Pulsar's name of the type (stats, error messages)."""
    picker: type[ConsumerPicker[Any]]
    single_active: bool
    tracks_unacked: bool
    counts_redeliveries: bool
    delayed_delivery: bool
    read_compacted: bool
    limits_consumers: bool
    routes_by_key: bool


_, Y, N = SubTypeRules, True, False  # only to keep the table's rows on one line each

# fmt: off
RULES: Final[dict[SubType, SubTypeRules]] = {
    # After the name and the picker, one column per rule, in SubTypeRules' order:
    # sa single_active, tu tracks_unacked, cr counts_redeliveries, dd delayed_delivery,
    # rc read_compacted, lc limits_consumers, rk routes_by_key.
    #                                                     sa tu cr dd rc lc rk
    SubType.EXCLUSIVE:  _("Exclusive",  ExclusivePicker, Y, N, N, N, Y, N, N),
    SubType.FAILOVER:   _("Failover",   FailoverPicker,  Y, N, N, N, Y, Y, N),
    SubType.SHARED:     _("Shared",     SharedPicker,    N, Y, Y, Y, N, Y, N),
    SubType.KEY_SHARED: _("Key_Shared", KeySharedPicker, N, Y, Y, Y, N, Y, Y),
}
# fmt: on
"""The rules of every subscription type."""

del _, Y, N
