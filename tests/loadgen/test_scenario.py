from __future__ import annotations

import math

import pytest

from loadgen.events import (
    KillBroker,
    RestartBroker,
    SetDispatchRate,
    UnloadTopic,
    event_target,
)
from loadgen.scenario import Ramp, ScenarioError, load_scenario, parse_scenario, segments_for
from loadgen.schedule import Segment

BASE = """\
name = "demo"
seed = 3

[cluster]
start = { brokers = 1, storage = "durable" }

[[topics]]
name = "orders"
partitions = 2

[[producers]]
name = "in"
topic = "orders"
rate = 100
size = 100

[[consumers]]
name = "out"
topic = "orders"
subscription = "s"
type = "Failover"

[[phases]]
name = "warm"
duration = "10s"

[[phases]]
name = "ramp"
duration = 20
rates = { in = { from = 100, to = 500 } }

[[events]]
at = "5s"
action = "unload_topic"
topic = "orders"

[[events]]
at = "15s"
action = "kill_broker"
"""


def test_a_full_scenario_decodes_with_durations_ramps_and_events() -> None:
    scenario = parse_scenario(BASE)
    assert scenario.duration == 30.0
    assert scenario.events == [UnloadTopic(at=5.0, topic="orders"), KillBroker(at=15.0)]
    assert scenario.phases[1].rates == {"in": Ramp(from_=100.0, to=500.0)}
    assert segments_for(scenario, scenario.producers[0]) == [
        Segment(0.0, 10.0, 100.0, 100.0, "warm"),
        Segment(10.0, 20.0, 100.0, 500.0, "ramp"),
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("size = 100", "size = 20"),
            r"line 15: size must be at least 40 bytes .*producers\[0\]\.size",
        ),
        (("rate = 100", 'rate = "fast"'), r"line 14: Expected `float`, got `str`"),
        (('duration = "10s"', 'duration = "10 parsecs"'), r"line 25: expected a duration"),
        (
            ('at = "15s"', 'at = "31s"'),
            r"line 38: event at 31 s is past the end of the run \(30 s\)",
        ),
        (
            ('action = "kill_broker"', 'action = "kill_brokers"'),
            r"line 39: unknown action 'kill_brokers'; actions: unload_topic, unload_namespace, "
            r"unload_bundle, split_bundle, kill_broker, restart_broker, .*, pause_consumers, "
            r"resume_consumers \(at \$\.events\[1\]\.action\)",
        ),
        (("brokers = 1,", "brokerz = 1,"), r"line 5: unknown key `brokerz`"),
        (("seed = 3\n", "seed = 3\nbogus = 1\n"), r"^line 3: unknown key `bogus` \(at \$\.bogus\)"),
        (
            ("size = 100\n", "size = 100\nsizee = 1\n"),
            r"^line 16: unknown key `sizee` \(at \$\.producers\[0\]\.sizee\)",
        ),
        (('type = "Failover"', 'type = "Fanout"'), r"line 21: Invalid enum value 'Fanout'"),
        (("rates = { in =", "rates = { nope ="), r"line 30: no producer group named 'nope'"),
        (('name = "out"', 'name = "in"'), r"line 18: group name 'in' is used twice"),
        (('storage = "durable"', 'storage = "disk"'), r"line 5: Invalid enum value 'disk'"),
        (('name = "demo"\n', 'name = "demo\n'), r"not valid TOML"),
    ],
)
def test_bad_scenarios_name_the_line(change: tuple[str, str], message: str) -> None:
    old, new = change
    assert old in BASE
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(BASE.replace(old, new, 1))


def test_cluster_events_need_a_cluster_loadgen_starts() -> None:
    text = BASE.replace(
        'start = { brokers = 1, storage = "durable" }', 'service_url = "pulsar://127.0.0.1:6650"'
    )
    with pytest.raises(ScenarioError, match=r"line 37: broker kill/restart needs cluster.start"):
        parse_scenario(text)


def test_stub_events_need_the_stub_storage() -> None:
    text = BASE + '\n[[events]]\nat = "1s"\naction = "stub_stall"\nseconds = 2\n'
    with pytest.raises(ScenarioError, match=r'storage = "stub"'):
        parse_scenario(text)
    assert parse_scenario(text.replace('"durable"', '"stub"')).events[-1].at == 1.0


def test_a_dispatch_rate_event_and_an_endless_phase() -> None:
    text = BASE.split("[[events]]")[0] + (
        '[[events]]\nat = 1\naction = "set_dispatch_rate"\nscope = "namespace"\n'
        'target = "public/default"\nmsg_rate = 50\n'
    )
    event = parse_scenario(text).events[0]
    assert event == SetDispatchRate(at=1.0, scope="namespace", target="public/default", msg_rate=50)
    assert math.isinf(parse_scenario(BASE.replace("duration = 20", "duration = 1e400")).duration)


def test_a_scenario_needs_phases_and_a_cluster() -> None:
    with pytest.raises(ScenarioError, match="at least one"):
        parse_scenario('name = "x"\n[cluster]\nservice_url = "pulsar://127.0.0.1:1"\n')
    with pytest.raises(ScenarioError, match="service_url"):
        parse_scenario('name = "x"\n[[phases]]\nname = "p"\nduration = 1\n')


def test_load_scenario_names_the_file(tmp_path) -> None:
    with pytest.raises(ScenarioError, match=r"cannot read .*missing\.toml"):
        load_scenario(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text(BASE.replace("size = 100", "size = 1"))
    with pytest.raises(ScenarioError, match=r"bad.toml: line 15"):
        load_scenario(bad)


@pytest.mark.parametrize(
    "path", sorted(__import__("pathlib").Path("loadgen/scenarios").glob("*.toml"))
)
def test_shipped_examples_are_valid(path) -> None:
    assert load_scenario(path).phases


def test_kill_and_restart_events_may_target_the_stub() -> None:
    text = BASE + '\n[[events]]\nat = "20s"\naction = "restart_broker"\nbroker = "stub"\n'
    text = text.replace('action = "kill_broker"\n', 'action = "kill_broker"\nbroker = "stub"\n')
    scenario = parse_scenario(text)
    assert scenario.events[1:] == [
        KillBroker(at=15.0, broker="stub"),
        RestartBroker(at=20.0, broker="stub"),
    ]
    assert [event_target(e) for e in scenario.events[1:]] == ["stub", "stub"]


def test_a_kill_event_names_a_broker_or_the_stub() -> None:
    text = BASE.replace('action = "kill_broker"\n', 'action = "kill_broker"\nbroker = "stubb"\n')
    with pytest.raises(ScenarioError, match=r"line 40: Invalid enum value 'stubb'"):
        parse_scenario(text)
