"""The differential harness's own logic: diffs, tolerances, the allow-list, the docs section."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.diff import MISSING, Allowance, Difference, diff, load_allowances
from conformance.probe import normalise, shape
from conformance.report import HEADING, judge, write_section
from conformance.scenarios.throttling import _bursts


def test_diff_names_each_differing_path_with_both_values() -> None:
    pulsar = {"a": {"b": [1, 2], "c": "x"}, "only_pulsar": 1}
    emubroker = {"a": {"b": [1, 3], "c": "x"}, "only_emubroker": True}
    assert diff(pulsar, emubroker) == [
        Difference("a.b[1]", 2, 3),
        Difference("only_emubroker", MISSING, True),
        Difference("only_pulsar", 1, MISSING),
    ]


def test_lists_of_other_lengths_and_other_types_differ_whole() -> None:
    assert diff({"l": [1]}, {"l": [1, 2]}) == [Difference("l", [1], [1, 2])]
    assert diff({"n": 0}, {"n": 0.0}) == [Difference("n", 0, 0.0)]


def test_tolerance_applies_to_its_top_level_key_only() -> None:
    tolerances = {"rates": 0.05}
    assert diff({"rates": [100, 100]}, {"rates": [96, 104]}, tolerances=tolerances) == []
    assert diff({"rates": [100]}, {"rates": [94]}, tolerances=tolerances) == [
        Difference("rates[0]", 100, 94)
    ]
    assert diff({"other": 100}, {"other": 99}, tolerances=tolerances) != []


def test_an_allowance_with_a_value_covers_only_that_side() -> None:
    lacks = Allowance("m", "names.*", "emubroker exposes fewer", emubroker=MISSING)
    assert lacks.covers("m", Difference("names.x", True, MISSING))
    assert not lacks.covers("m", Difference("names.y", MISSING, True))
    assert not lacks.covers("other", Difference("names.x", True, MISSING))
    result = judge("m", [Difference("names.x", True, MISSING)], [lacks])
    assert (result.verdict, len(result.allowed)) == ("allowed", 1)
    assert judge("m", [], [lacks]).verdict == "same"
    assert judge("m", [Difference("names.y", MISSING, True)], [lacks]).verdict == "differs"


def test_allow_list_entries_need_a_reason(tmp_path: Path) -> None:
    bad = tmp_path / "allowed.toml"
    bad.write_text('[[allowed]]\nscenario = "s"\npath = "p"\n')
    with pytest.raises(ValueError, match="lacks reason"):
        load_allowances(bad)


def test_the_shipped_allow_list_loads() -> None:
    assert all(a.reason for a in load_allowances())


def test_normalise_hides_times_and_addresses_but_not_counts() -> None:
    doc = {"publishTime": 1700000000000, "address": "/127.0.0.1:4567", "msgInCounter": 3}
    assert normalise(doc) == {"publishTime": "<time>", "address": "/<address>", "msgInCounter": 3}
    assert shape({"b": [{"x": 1}], "a": None}) == {"a": "null", "b": [{"x": "int"}]}


def test_write_section_replaces_only_its_own_section(tmp_path: Path) -> None:
    doc = tmp_path / "compatibility.md"
    doc.write_text(
        f"# Compatibility\n\n## Other\n\nkept\n\n{HEADING}\n\nold\n\n## After\n\nkept too\n"
    )
    write_section(doc, "new table")
    text = doc.read_text()
    assert "old" not in text
    assert text.count(HEADING) == 1
    assert "new table" in text
    assert "## Other\n\nkept" in text
    assert "## After\n\nkept too" in text


def test_only_picks_scenarios_by_name_or_area() -> None:
    from conformance.scenarios import REGISTRY, select

    throttling = select(["throttling"])
    assert throttling
    assert all(REGISTRY[n].area == "throttling" for n in throttling)
    assert select(["topic_stats", "wire"]) == [
        n for n, e in REGISTRY.items() if n == "topic_stats" or e.area == "wire"
    ]
    assert select(None) == list(REGISTRY)
    with pytest.raises(ValueError, match="nowhere"):
        select(["wire", "nowhere"])


def test_the_harness_covers_every_area_with_sixty_scenarios_or_more() -> None:
    from conformance.scenarios import PROFILES, REGISTRY

    assert len(REGISTRY) >= 60
    areas = {e.area for e in REGISTRY.values()}
    assert areas == {
        "wire",
        "admin",
        "topics",
        "cluster",
        "stats",
        "data",
        "throttling",
        "policies",
    }
    assert {e.profile for e in REGISTRY.values()} == set(PROFILES)


def test_summary_counts_verdicts() -> None:
    from conformance.report import Result, summary

    results = [
        Result("a", [], []),
        Result("b", [(Difference("x", 1, 2), "why")], []),
        Result("c", [], [Difference("y", 1, 2)]),
    ]
    assert summary(results, 2.0) == "3 scenarios: 1 same, 1 allowed, 1 differ (2.0 minutes)"


def test_an_allowance_may_name_several_scenarios_or_a_glob(tmp_path: Path) -> None:
    listed = tmp_path / "allowed.toml"
    listed.write_text(
        '[[allowed]]\nscenario = ["a_stats", "b_stats"]\npath = "keys.x"\nreason = "r"\n'
        '[[allowed]]\nscenario = "*throttl*"\npath = "first_second"\nreason = "r"\n'
    )
    several, glob = load_allowances(listed)
    assert several.covers("b_stats", Difference("keys.x", 1, MISSING))
    assert not several.covers("c_stats", Difference("keys.x", 1, MISSING))
    assert glob.covers("classic_throttle_batches", Difference("first_second", 1, 2))
    assert not glob.covers("topic_stats", Difference("first_second", 1, 2))


def test_sigterm_unwinds_so_pulsar_is_stopped() -> None:
    # The brokers are stopped in finally blocks; SIGTERM must reach them (no JVM left behind).
    code = (
        "import os, signal\n"
        "from conformance.__main__ import exit_on_sigterm\n"
        "exit_on_sigterm()\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    signal.pause()\n"
        "finally:\n"
        "    print('stopped')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False
    )
    assert (done.returncode, done.stdout) == (128 + signal.SIGTERM, "stopped\n")


def test_bursts_split_deliveries_at_pauses_and_drop_the_last() -> None:
    # A slow consumer's refills: runs of arrivals apart by less than PAUSE_S; the last run may
    # be cut by the end of the window, so it is not reported.
    arrivals = [0.0, 0.1, 0.2, 1.3, 1.45, 1.5, 3.0, 3.1]
    assert _bursts(arrivals) == [3, 3]
    assert _bursts([]) == []
    assert _bursts([0.0, 0.39]) == []
