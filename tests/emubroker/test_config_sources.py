"""Config sources and key policy: PULSAR_PREFIX_ environment, known-but-unemulated keys."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from emubroker.config import BrokerConfig, ConfigError, env_overrides, load_config, resolve_keys
from emubroker.config.keys import PULSAR_BROKER_KEYS


def test_every_emulated_key_is_a_pulsar_key() -> None:
    # Keys of our own (not Pulsar's) carry the ``emubroker`` prefix, e.g. the dispatch trace's.
    ours = {key for key in BrokerConfig.__struct_fields__ if key.startswith("emubroker")}
    assert set(BrokerConfig.__struct_fields__) - ours <= PULSAR_BROKER_KEYS
    # The families later issues turn into features are known already.
    for key in (
        "dispatchThrottlingRatePerTopicInMsg",
        "dispatchThrottlingRatePerSubscriptionInByte",
        "loadBalancerBrokerThresholdShedderPercentage",
        "loadBalancerLoadSheddingStrategy",
        "brokerDeduplicationEntriesInterval",
    ):
        assert key in PULSAR_BROKER_KEYS


def test_env_overrides_apply_over_the_file_and_under_explicit_overrides(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerServicePort=7000\nclusterName=from-file\nwebServicePort=9000\n")
    env = {
        "PULSAR_PREFIX_clusterName": "from-env",
        "PULSAR_PREFIX_webServicePort": "9100",
        "PULSAR_PREFIX_": "ignored",  # no key
        "clusterName": "not-prefixed",  # only the prefix counts
    }
    config = load_config(conf, overrides={"webServicePort": 9200}, environ=env)
    assert config.brokerServicePort == 7000  # file
    assert config.clusterName == "from-env"  # env over file
    assert config.webServicePort == 9200  # explicit over env


def test_env_overrides_are_read_from_the_process_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PULSAR_PREFIX_brokerDeduplicationEnabled", "true")
    assert load_config().brokerDeduplicationEnabled is True
    assert load_config(environ={}).brokerDeduplicationEnabled is False


def test_env_overrides_are_checked_like_any_key() -> None:
    with pytest.raises(ConfigError, match=r"environment.*'brokerServicePortt'"):
        load_config(environ={"PULSAR_PREFIX_brokerServicePortt": "1"})
    with pytest.raises(ConfigError, match="brokerServicePort"):
        load_config(environ={"PULSAR_PREFIX_brokerServicePort": "not-a-port"})
    assert env_overrides({"PULSAR_PREFIX_a": "1", "OTHER": "2"}) == {"a": "1"}


def test_known_pulsar_keys_we_do_not_emulate_warn_by_name(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "zookeeperServers=zk:2181\n"
        "loadBalancerServiceUnitStateMaxConcurrentOverrides=10\n"
        "loadBalancerBrokerThresholdShedderPercentage=20\n"
        "brokerServicePort=7001\n"
    )
    with caplog.at_level(logging.WARNING, logger="emubroker.config"):
        config = load_config(conf, environ={"PULSAR_PREFIX_managedLedgerDefaultEnsembleSize": "3"})
    assert config.brokerServicePort == 7001
    assert config.loadBalancerBrokerThresholdShedderPercentage == 20  # emulated: applied
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "loadBalancerBrokerThresholdShedderPercentage" not in warned
    for key in (
        "zookeeperServers",
        "loadBalancerServiceUnitStateMaxConcurrentOverrides",
        "managedLedgerDefaultEnsembleSize",
    ):
        assert repr(key) in warned
    assert "does not emulate" in warned
    assert str(conf) in warned  # says which source


def test_resolve_keys_names_the_source_of_unknown_keys() -> None:
    with pytest.raises(ConfigError, match=r"^my\.conf: unknown configuration key 'typo'"):
        resolve_keys({"typo": 1}, source="my.conf")
    assert resolve_keys({"clusterName": "", "brokerServicePort": 1}) == {"brokerServicePort": 1}


def test_max_connections_per_ip_is_read_as_pulsars_key(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = load_config(overrides={"maxConnectionsPerIp": 3}, environ={})
    assert config.brokerMaxConnectionsPerIp == 3
    assert "'brokerMaxConnectionsPerIp'" in caplog.text
    both = {"maxConnectionsPerIp": 3, "brokerMaxConnectionsPerIp": 5}
    assert load_config(overrides=both, environ={}).brokerMaxConnectionsPerIp == 5
    env = {"PULSAR_PREFIX_maxConnectionsPerIp": "2"}
    assert load_config(environ=env).brokerMaxConnectionsPerIp == 2


def test_new_behaviour_keys_and_their_defaults() -> None:
    config = BrokerConfig()
    assert config.schemaCompatibilityStrategy == "FULL"  # Pulsar's default
    assert config.isAllowAutoUpdateSchemaEnabled is True
    assert config.isSchemaValidationEnforced is False
    assert config.topicCompactionRetainNullKey is False
    assert (
        load_config(
            overrides={"schemaCompatibilityStrategy": "BACKWARD_TRANSITIVE"}, environ={}
        ).schemaCompatibilityStrategy
        == "BACKWARD_TRANSITIVE"
    )
    with pytest.raises(ConfigError, match="schemaCompatibilityStrategy"):
        load_config(overrides={"schemaCompatibilityStrategy": "Backward"}, environ={})


def test_toml_files_go_through_the_same_key_policy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    conf = tmp_path / "broker.toml"
    conf.write_text('clusterName = "t"\nbookkeeperNumberOfChannelsPerBookie = 16\n')
    with caplog.at_level(logging.WARNING, logger="emubroker.config"):
        assert load_config(conf, environ={}).clusterName == "t"
    assert "'bookkeeperNumberOfChannelsPerBookie'" in caplog.text
    conf.write_text("nonsenseKey = 1\n")
    with pytest.raises(ConfigError, match="nonsenseKey"):
        load_config(conf, environ={})
