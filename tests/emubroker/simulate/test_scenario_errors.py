"""A scenario a virtual clock cannot run, or that does not parse, is refused naming its key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from emubroker.simulate import SimulationError, load_simulation, parse_simulation

ROOT = Path(__file__).resolve().parents[3]

BASE = """
name = "bad"

[cluster]
start = { brokers = 2 }

[[producers]]
name = "p"
topic = "t"
rate = 1

[[phases]]
name = "run"
duration = "5s"
"""


def _with(text: str, *, cluster: str | None = None) -> str:
    base = BASE if cluster is None else BASE.replace("start = { brokers = 2 }", cluster)
    return base + text


def test_a_valid_scenario_gives_each_broker_its_configuration() -> None:
    simulation = parse_simulation(
        _with(
            "[simulate]\nepoch = 1_600_000_000\n"
            "[simulate.brokers.1]\nconfig = { emubrokerModelMsgRatePerCore = 50 }\n",
            cluster="start = { brokers = 2, config = { emubrokerModelMsgRatePerCore = 500 } }",
        )
    )
    assert simulation.section.epoch == 1_600_000_000
    first, second = (simulation.broker_config(index) for index in (0, 1))
    assert (first.emubrokerModelMsgRatePerCore, second.emubrokerModelMsgRatePerCore) == (500, 50)
    # The host does not leak into a simulation: model usage on fixed limits.
    assert first.emubrokerResourceUsageSource == "model"
    assert first.emubrokerAvailableProcessors == 4
    assert first.emubrokerMaxMemoryMB == 4096


@pytest.mark.parametrize(
    ("text", "cluster", "expected"),
    [
        ("", 'service_url = "pulsar://10.0.0.1:6650"', "line 5: cluster.service_url names an"),
        ("", 'admin_url = "http://localhost:8080"\nstart = {}', "cluster.admin_url names an"),
        ("", "", "give cluster.service_url (and admin_url) or cluster.start"),
        ("", 'start = { storage = "durable" }', 'storage = "durable" writes journals'),
        (
            "[[events]]\naction = 'kill_broker'\nat = 1\nbroker = 'stub'\n",
            'start = { brokers = 2, storage = "stub" }',
            "line 18: event 'kill_broker' with broker = \"stub\": a simulation cannot kill",
        ),
        (
            "[[events]]\naction = 'restart_broker'\nat = 1\nbroker = 'stub'\n",
            None,
            "line 18: event 'restart_broker' with broker = \"stub\"",
        ),
        (
            # As loadgen run says: the same file runs on both.
            "[[events]]\naction = 'stub_fail_next'\nat = 1\ncount = 1\n",
            None,
            'stub fault events need cluster.start with storage = "stub"',
        ),
        ("[[events]]\naction = 'kill_broker'\nat = 1\nbroker = 2\n", None, "no broker 2"),
        ("[simulate]\nspeed = 2\n", None, "line 16: unknown key `speed`"),
        ("[simulate]\nepoch = 'now'\n", None, "(at $.simulate.epoch)"),
        ("[simulate.brokers.2]\nconfig = {}\n", None, "simulate.brokers.2: no broker 2"),
        ("[simulate.brokers.x]\nconfig = {}\n", None, "simulate.brokers.x: no broker x"),
        ("[simulate.brokers.0]\nports = 1\n", None, "unknown key `ports`"),
        (
            "",
            "start = { config = { webServicePort = 9000 } }",
            "webServicePort is set by the simulator",
        ),
        (
            "[simulate.brokers.1]\nconfig = { emubrokerLoadBalancerTraceDir = '/tmp' }\n",
            None,
            "emubrokerLoadBalancerTraceDir is set by the simulator",
        ),
        (
            "",
            "start = { config = { emubrokerResourceUsageSource = 'psutil' } }",
            'emubrokerResourceUsageSource = "psutil" measures this host',
        ),
        ("", "start = { config = { noSuchKey = 1 } }", "noSuchKey"),
        (
            "[simulate.brokers.1]\nconfig = { loadBalancerSheddingIntervalMinutes = -1 }\n",
            None,
            "broker 1: invalid configuration",
        ),
    ],
)
def test_what_a_virtual_clock_cannot_run_is_refused_naming_the_key(
    text: str, cluster: str | None, expected: str
) -> None:
    with pytest.raises(SimulationError) as error:
        parse_simulation(_with(text, cluster=cluster))
    assert expected in str(error.value)


@pytest.mark.parametrize(
    "event",
    [
        "action = 'kill_broker'\nbroker = 1",
        "action = 'kill_broker'\nbroker = 0\nsignal = 'TERM'",
        "action = 'restart_broker'\nbroker = 1",
        "action = 'unload_topic'\ntopic = 't'",
        "action = 'unload_namespace'\nnamespace = 'public/default'",
        "action = 'unload_bundle'\nnamespace = 'public/default'\nbundle = '0x00000000_0x40000000'",
        "action = 'split_bundle'\nnamespace = 'public/default'\nbundle = '0x00000000_0x40000000'",
        "action = 'set_dispatch_rate'\nscope = 'topic'\ntarget = 't'\nmsg_rate = 5",
        "action = 'set_dynamic_config'\nkey = 'loadBalancerSheddingEnabled'\nvalue = 'false'",
        "action = 'stub_faults'\nconfig = {}",
        "action = 'stub_fail_next'\ncount = 2",
        "action = 'stub_stall'\nseconds = 1",
        "action = 'stub_clear'",
    ],
)
def test_every_other_event_is_simulated(event: str) -> None:
    simulation = parse_simulation(
        _with(f"[[events]]\nat = 1\n{event}\n", cluster='start = { brokers = 2, storage = "stub" }')
    )
    assert len(simulation.scenario.events) == 1


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SimulationError, match=r"cannot read .*nothing\.toml"):
        load_simulation(tmp_path / "nothing.toml")


def test_a_binary_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "scenario.toml"
    path.write_bytes(b"\x00\xb8\xff" * 100)
    with pytest.raises(SimulationError, match=r"scenario\.toml: not a scenario: not UTF-8 text"):
        load_simulation(path)


def test_the_command_line_exits_2_naming_the_key(tmp_path: Path) -> None:
    scenario = tmp_path / "bad.toml"
    scenario.write_text(_with("", cluster='service_url = "pulsar://10.0.0.1:6650"'))
    done = subprocess.run(
        [sys.executable, "-m", "emubroker", "simulate", str(scenario)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 2
    assert "bad.toml: line 5: cluster.service_url names an external cluster" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_the_command_line_refuses_a_stub_kill_naming_its_line(tmp_path: Path) -> None:
    scenario = tmp_path / "stub.toml"
    scenario.write_text(
        _with(
            "[[events]]\naction = 'kill_broker'\nat = 1\nbroker = 'stub'\n",
            cluster='start = { brokers = 2, storage = "stub" }',
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "emubroker", "simulate", str(scenario), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(
        f"emubroker simulate: {scenario}: line 18: event 'kill_broker' with broker = \"stub\""
    )
    assert not (tmp_path / "manifest.json").exists()


def test_without_trio_the_command_says_which_extra_to_install(tmp_path: Path) -> None:
    scenario = tmp_path / "any.toml"
    scenario.write_text(_with(""))
    script = (
        "import sys\n"
        "sys.modules['trio'] = None  # as if the trio extra were not installed\n"
        "from emubroker.__main__ import main\n"
        f"sys.exit(main(['simulate', {str(scenario)!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 2, done.stderr
    assert "emubroker simulate needs trio: pip install 'emubroker[trio]'" in done.stderr
