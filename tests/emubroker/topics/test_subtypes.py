"""The subscription-type table: every type has its row, and the rows say what Pulsar does."""

from __future__ import annotations

import pytest

from emubroker.topics.pickers import ConsumerPicker, PickerContext
from emubroker.topics.settings import TopicSettings
from emubroker.topics.subtypes import RULES
from protocol.commands import SubType


def test_every_subscription_type_has_rules_and_a_picker() -> None:
    assert set(RULES) == set(SubType)
    for rules in RULES.values():
        picker = rules.picker(
            [], PickerContext("persistent://t/n/x", -1, TopicSettings().key_shared_auto_split), None
        )
        assert isinstance(picker, ConsumerPicker)


@pytest.mark.parametrize(
    ("sub_type", "name", "single_active", "individual_acks"),
    [
        (SubType.EXCLUSIVE, "Exclusive", True, False),
        (SubType.FAILOVER, "Failover", True, False),
        (SubType.SHARED, "Shared", False, True),
        (SubType.KEY_SHARED, "Key_Shared", False, True),
    ],
)
def test_rules_follow_pulsars_dispatchers(
    sub_type: SubType, name: str, single_active: bool, individual_acks: bool
) -> None:
    rules = RULES[sub_type]
    assert rules.name == name
    assert rules.single_active is single_active
    # The single-active-consumer dispatcher tracks no pending acks: no unacked counts, no
    # redelivery counts, no delayed delivery; compacted reads are for it alone.
    assert rules.tracks_unacked is individual_acks
    assert rules.counts_redeliveries is individual_acks
    assert rules.delayed_delivery is individual_acks
    assert rules.read_compacted is single_active
    assert rules.limits_consumers is (sub_type is not SubType.EXCLUSIVE)
    assert rules.routes_by_key is (sub_type is SubType.KEY_SHARED)
