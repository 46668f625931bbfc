"""Resource usage sources: the model, scripts, and the psutil source over a fake process."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from emubroker.config import ConfigError, load_config
from emubroker.loadbalance.model.usage import ResourceUsage
from emubroker.loadbalance.reporting import psutil_source
from emubroker.loadbalance.reporting.psutil_source import MIB, PsutilUsageSource
from emubroker.loadbalance.reporting.usage_sources import (
    BrokerActivity,
    ModelUsageSource,
    ResourceLimits,
    ScriptedUsageSource,
    UsageScriptError,
    load_usage_script,
)
from emubroker.loadbalance.reporting.wiring import resource_limits, usage_source

LIMITS = ResourceLimits(processors=4, memory_mb=2048, nic_kbps=1_000_000)


class FakeProcess:
    """CPU seconds and RSS the test sets."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self.rss = 0

    def cpu_times(self) -> SimpleNamespace:
        return SimpleNamespace(user=self.cpu * 0.75, system=self.cpu * 0.25)

    def memory_info(self) -> SimpleNamespace:
        return SimpleNamespace(rss=self.rss)


class TestPsutilSource:
    def test_first_sample_reports_memory_but_no_cpu_or_bandwidth(self) -> None:
        process = FakeProcess()
        process.cpu, process.rss = 10.0, 256 * MIB
        usage = PsutilUsageSource(LIMITS, process=process).sample(
            100.0, BrokerActivity(bytes_in=10**9, bytes_out=10**9, buffered=MIB)
        )
        assert usage.cpu == ResourceUsage(0.0, 400.0)
        assert usage.memory == ResourceUsage(256.0, 2048)
        assert usage.direct_memory == ResourceUsage(1.0, 2048)
        assert usage.bandwidth_in == ResourceUsage(0.0, 1_000_000)

    def test_cpu_and_bandwidth_are_the_process_own_over_the_interval(self) -> None:
        process = FakeProcess()
        source = PsutilUsageSource(LIMITS, process=process)
        source.sample(0.0, BrokerActivity())
        process.cpu = 1.5  # 1.5 CPU seconds in 2 s: 75 % of one core
        usage = source.sample(2.0, BrokerActivity(bytes_in=250_000, bytes_out=500_000))
        assert usage.cpu == ResourceUsage(75.0, 400.0)
        # 250 kB in 2 s = 125 kB/s = 1000 kbit/s (Pulsar's bytes * 8 / 1000).
        assert usage.bandwidth_in == ResourceUsage(1000.0, 1_000_000)
        assert usage.bandwidth_out == ResourceUsage(2000.0, 1_000_000)
        assert usage.cpu.percent_usage() == pytest.approx(18.75)

    def test_a_sample_without_elapsed_time_repeats_the_last(self) -> None:
        process = FakeProcess()
        source = PsutilUsageSource(LIMITS, process=process)
        source.sample(0.0, BrokerActivity())
        process.cpu = 1.0
        first = source.sample(1.0, BrokerActivity(bytes_in=1000))
        process.cpu = 5.0
        assert source.sample(1.0, BrokerActivity(bytes_in=9000)) is first

    def test_measures_this_process_for_real(self) -> None:
        source = PsutilUsageSource(LIMITS)
        source.sample(0.0, BrokerActivity())
        sum(i * i for i in range(1_000_000))  # burn some CPU (more than a clock tick)
        usage = source.sample(1.0, BrokerActivity())
        assert usage.cpu.usage > 0
        assert 1 < usage.memory.usage < 2048


class TestModelSource:
    def test_usage_follows_the_brokers_own_rates(self) -> None:
        source = ModelUsageSource(LIMITS, msg_rate_per_core=10_000)
        usage = source.sample(
            0.0,
            BrokerActivity(
                msg_rate_in=3000,
                msg_rate_out=2000,
                msg_throughput_in=1_250_000,
                msg_throughput_out=250_000,
                bytes_in=10**12,  # session bytes are not the model's input
            ),
        )
        assert usage.cpu == ResourceUsage(50.0, 400.0)  # half a core out of four
        assert usage.bandwidth_in == ResourceUsage(10_000.0, 1_000_000)
        assert usage.bandwidth_out == ResourceUsage(2_000.0, 1_000_000)
        assert usage.memory == ResourceUsage(0.0, 2048)

    def test_the_same_traffic_gives_the_same_usage(self) -> None:
        activity = BrokerActivity(msg_rate_in=123.0, msg_throughput_out=4567.0)
        first = ModelUsageSource(LIMITS, msg_rate_per_core=1000).sample(1.0, activity)
        again = ModelUsageSource(LIMITS, msg_rate_per_core=1000).sample(99.0, activity)
        assert first == again


SCRIPT = """
[[steps]]
at = 0
cpu = 10
bandwidthIn = 5

[[steps]]
at = 30
cpu = 90

[brokers."127.0.0.1:8081"]
steps = [{ at = 0, cpu = 50, directMemory = 20 }]
"""


class TestScriptedSource:
    def test_steps_hold_until_the_next_and_unnamed_values_carry_on(self, tmp_path: Path) -> None:
        path = tmp_path / "usage.toml"
        path.write_text(SCRIPT)
        source = ScriptedUsageSource(LIMITS, load_usage_script(path).steps_of("127.0.0.1:8080"))
        start = source.sample(1000.0, BrokerActivity())  # time 0 is the first sample
        assert start.cpu == ResourceUsage(40.0, 400.0)
        assert start.bandwidth_in == ResourceUsage(50_000.0, 1_000_000)
        assert source.sample(1029.9, BrokerActivity()).cpu.percent_usage() == pytest.approx(10)
        later = source.sample(1030.0, BrokerActivity())
        assert later.cpu.percent_usage() == pytest.approx(90)
        assert later.bandwidth_in.percent_usage() == pytest.approx(5)

    def test_a_broker_can_have_steps_of_its_own(self, tmp_path: Path) -> None:
        path = tmp_path / "usage.json"
        path.write_text(json.dumps({"brokers": {"b:1": {"steps": [{"at": 0, "memory": 25}]}}}))
        script = load_usage_script(path)
        assert script.steps_of("other") == []
        usage = ScriptedUsageSource(LIMITS, script.steps_of("b:1")).sample(0, BrokerActivity())
        assert usage.memory == ResourceUsage(512.0, 2048)
        assert usage.cpu == ResourceUsage(0.0, 400.0)

    @pytest.mark.parametrize(
        ("text", "match"),
        [
            ("[[steps]]\ncpu = 5\n", "at"),
            ("[[steps]]\nat = 0\ncpus = 5\n", "cpus"),
            ("[[steps]]\nat = -1\n", "at"),
            ("[[steps]]\nat = 0\ncpu = -5\n", "cpu"),
            ("steps = [", "usage.toml"),
        ],
    )
    def test_bad_scripts_are_refused_naming_what(
        self, tmp_path: Path, text: str, match: str
    ) -> None:
        path = tmp_path / "usage.toml"
        path.write_text(text)
        with pytest.raises(UsageScriptError, match=match):
            load_usage_script(path)


class TestFromConfig:
    def test_psutil_by_default_against_the_configured_limits(self) -> None:
        config = load_config(
            overrides={
                "emubrokerAvailableProcessors": 3,
                "emubrokerMaxMemoryMB": 512,
                "loadBalancerOverrideBrokerNicSpeedGbps": 0.5,
            }
        )
        assert resource_limits(config) == ResourceLimits(3, 512.0, 500_000.0)
        assert isinstance(usage_source(config, "b:1"), PsutilUsageSource)

    def test_unset_limits_come_from_the_host(self) -> None:
        limits = resource_limits(load_config())
        assert limits.processors >= 1
        assert limits.memory_mb > 0

    def test_the_model_assumes_one_gigabit_without_a_nic_speed(self) -> None:
        config = load_config(overrides={"emubrokerResourceUsageSource": "model"})
        assert resource_limits(config).nic_kbps == 1_000_000
        assert isinstance(usage_source(config, "b:1"), ModelUsageSource)

    def test_a_script_plays_this_brokers_steps(self, tmp_path: Path) -> None:
        path = tmp_path / "usage.toml"
        path.write_text(SCRIPT)
        config = load_config(
            overrides={
                "emubrokerResourceUsageSource": "model",
                "emubrokerResourceUsageScript": str(path),
                "emubrokerAvailableProcessors": 2,
            }
        )
        source = usage_source(config, "127.0.0.1:8081")
        assert isinstance(source, ScriptedUsageSource)
        assert source.sample(0.0, BrokerActivity()).cpu.percent_usage() == pytest.approx(50)

    def test_config_errors_name_the_key(self, tmp_path: Path) -> None:
        missing = str(tmp_path / "nope.toml")
        model = {"emubrokerResourceUsageSource": "model", "emubrokerResourceUsageScript": missing}
        with pytest.raises(ConfigError, match=r"emubrokerResourceUsageScript: .*nope\.toml"):
            usage_source(load_config(overrides=model), "b:1")
        with pytest.raises(ConfigError, match="emubrokerResourceUsageSource=model"):
            usage_source(load_config(overrides={"emubrokerResourceUsageScript": missing}), "b:1")
        with pytest.raises(ConfigError, match="emubrokerResourceUsageSource"):
            load_config(overrides={"emubrokerResourceUsageSource": "jmx"})


class TestUnmeasuredBandwidthNote:
    """A host whose NICs report no speed: one readable INFO note per process, not a warning."""

    @pytest.fixture(autouse=True)
    def _no_nic_speed(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
        monkeypatch.setattr(psutil_source, "host_nic_speed_kbps", lambda: 0.0)
        psutil_source._note_unmeasured_bandwidth.cache_clear()
        yield
        psutil_source._note_unmeasured_bandwidth.cache_clear()

    def test_said_once_at_info_however_many_brokers(self, caplog: pytest.LogCaptureFixture) -> None:
        caplog.set_level(logging.DEBUG, logger=psutil_source.__name__)
        for _ in range(3):  # three brokers of an in-process cluster
            assert resource_limits(load_config()).nic_kbps == 0
        notes = [r for r in caplog.records if "reports a speed" in r.getMessage()]
        assert [r.levelno for r in notes] == [logging.INFO]
        message = notes[0].getMessage()
        assert "%" not in message
        assert "loadBalancerOverrideBrokerNicSpeedGbps" in message

    def test_no_note_when_the_speed_is_configured(self, caplog: pytest.LogCaptureFixture) -> None:
        caplog.set_level(logging.DEBUG, logger=psutil_source.__name__)
        config = load_config(overrides={"loadBalancerOverrideBrokerNicSpeedGbps": 1.0})
        assert resource_limits(config).nic_kbps == 1_000_000
        assert not caplog.records
