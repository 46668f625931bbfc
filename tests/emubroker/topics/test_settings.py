from __future__ import annotations

import msgspec
import pytest

from emubroker.app import topic_settings
from emubroker.config import BrokerConfig
from emubroker.topics.settings import TopicSettings, _Key


def _attributes() -> dict[str, _Key[object]]:
    return {n: v for n, v in vars(TopicSettings).items() if isinstance(v, _Key)}


def test_every_setting_reads_a_broker_config_key() -> None:
    keys = {f.name for f in msgspec.structs.fields(BrokerConfig)}
    assert {key.key for key in _attributes().values()} <= keys
    assert len(_attributes()) == 32  # and broker_id, which is no config key


def test_defaults_are_pulsars_but_ledgers_roll_over_at_any_age() -> None:
    s = TopicSettings()
    assert s.cluster_name == "standalone"
    assert s.broker_id == 0
    assert (s.allow_auto_topic_creation, s.allow_auto_topic_creation_type) == (
        True,
        "non-partitioned",
    )
    assert s.dispatcher_max_read_batch_size == 100
    assert s.max_unacked_messages_per_consumer == 50_000
    assert s.managed_ledger_max_entries_per_ledger == 50_000
    assert s.managed_ledger_min_ledger_rollover_time_minutes == 0.0
    assert s.managed_ledger_max_ledger_rollover_time_minutes == 240.0
    assert s.cursor_flush_interval == 1.0
    assert s.stats_update_frequency == 60.0
    assert s.key_shared_hash_points == 100
    assert s.message_expiry_check_interval_in_minutes == 5


def test_the_broker_config_is_read_through_with_its_conversions() -> None:
    config = BrokerConfig(
        clusterName="c1",
        managedLedgerDefaultMarkDeleteRateLimit=4.0,
        statsUpdateFrequencyInSecs=10,
        maxProducersPerTopic=3,
    )
    s = topic_settings(config)
    assert s.config is config
    assert s.cluster_name == "c1"
    assert s.cursor_flush_interval == 0.25
    assert s.stats_update_frequency == 10.0
    assert isinstance(s.stats_update_frequency, float)
    assert s.max_producers_per_topic == 3
    assert s.managed_ledger_min_ledger_rollover_time_minutes == 10.0  # the config's, Pulsar's


def test_overrides_by_attribute_name_including_converted_ones() -> None:
    s = TopicSettings(max_consumers_per_topic=9, cursor_flush_interval=0.5, broker_id=2)
    assert s.max_consumers_per_topic == 9
    assert s.cursor_flush_interval == 0.5
    assert s.config.managedLedgerDefaultMarkDeleteRateLimit == 2.0
    assert s.broker_id == 2
    with pytest.raises(TypeError, match="no setting 'max_widgets'"):
        TopicSettings(max_widgets=1)
