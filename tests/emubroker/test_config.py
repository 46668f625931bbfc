"""BrokerConfig: Pulsar's names and defaults, properties and TOML files, overrides, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from emubroker.config import BrokerConfig, ConfigError, load_config, parse_properties


def test_defaults_are_pulsars() -> None:
    config = load_config()
    assert config == BrokerConfig()
    assert config.brokerServicePort == 6650
    assert config.webServicePort == 8080
    assert config.maxMessageSize == 5_242_880
    assert config.defaultNumberOfNamespaceBundles == 4
    assert config.allowAutoTopicCreationType == "non-partitioned"
    assert config.keepAliveIntervalSeconds == 30
    assert config.clusterName == "standalone"


def test_properties_file_values_are_converted(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "# comment\n"
        "! also a comment\n"
        "\n"
        "brokerServicePort = 7000\n"
        "allowAutoTopicCreation=false\n"
        "advertisedAddress=\n"  # empty: keep the default
        "clusterName: test-cluster\n"
    )
    config = load_config(conf)
    assert config.brokerServicePort == 7000
    assert config.allowAutoTopicCreation is False
    assert config.advertisedAddress is None
    assert config.clusterName == "test-cluster"


def test_toml_file_and_overrides_win(tmp_path: Path) -> None:
    conf = tmp_path / "broker.toml"
    conf.write_text('brokerServicePort = 7000\nbindAddress = "0.0.0.0"\n')
    config = load_config(conf, overrides={"brokerServicePort": 0, "bindAddress": None})
    assert config.brokerServicePort == 0
    assert config.bindAddress == "0.0.0.0"  # None overrides are ignored


def test_unknown_key_is_named(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerServicePortt=1\n")
    with pytest.raises(ConfigError, match="brokerServicePortt"):
        load_config(conf)
    with pytest.raises(ConfigError, match="'nope'"):
        load_config(overrides={"nope": 1})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("brokerServicePort", "70000"),
        ("brokerServicePort", "abc"),
        ("maxMessageSize", "0"),
        ("allowAutoTopicCreationType", "sometimes"),
    ],
)
def test_invalid_values_are_rejected_with_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        load_config(overrides={key: value})


def test_every_bad_value_is_named_with_its_source_value_and_type(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "loadBalancerSheddingIntervalMinutes=often\n"
        "brokerServicePort=6650\n"
        "maxMessageSize=0\n"
        "allowAutoTopicCreationType=sometimes\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(conf, overrides={"webServicePort": 70000}, environ={})
    lines = str(caught.value).splitlines()
    assert lines[0] == "invalid configuration, 4 bad values:"
    assert sorted(line.strip() for line in lines[1:]) == sorted(
        [
            f"{conf}: loadBalancerSheddingIntervalMinutes = 'often': expected float",
            f"{conf}: maxMessageSize = '0': expected int >= 1",
            f"{conf}: allowAutoTopicCreationType = 'sometimes': expected one of "
            "non-partitioned, partitioned",
            "command line: webServicePort = 70000: expected int <= 65535",
        ]
    )


def test_one_bad_value_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(overrides={"brokerServicePort": "abc"}, environ={})
    assert str(caught.value) == (
        "invalid configuration: command line: brokerServicePort = 'abc': expected int"
    )


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.conf")
    bad = tmp_path / "bad.toml"
    bad.write_text("= 1\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="line 1"):
        parse_properties("just-a-word\n")


def test_advertised_host_and_listeners() -> None:
    assert BrokerConfig().advertised_host() == "127.0.0.1"
    assert BrokerConfig(bindAddress="0.0.0.0").advertised_host() == "127.0.0.1"
    assert BrokerConfig(bindAddress="10.0.0.5").advertised_host() == "10.0.0.5"
    assert BrokerConfig(advertisedAddress="broker.example").advertised_host() == "broker.example"
    config = BrokerConfig(
        advertisedListeners="internal:pulsar://10.0.0.1:6650, external:pulsar+ssl://x:6651"
    )
    assert config.listeners() == {"internal": "pulsar://10.0.0.1:6650"}
    with pytest.raises(ConfigError, match="name:url"):
        BrokerConfig(advertisedListeners="nourl").listeners()
