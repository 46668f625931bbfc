"""Sizes and rates a run cannot carry out are refused up front, naming the key, line and bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadgen.limits import MAX_CHUNKED_SIZE, MAX_PRODUCER_RATE
from loadgen.scenario import ScenarioError, load_scenario, parse_scenario
from protocol.framing import DEFAULT_MAX_MESSAGE_SIZE

SCENARIO = """\
name = "limits"

[cluster]
start = {{ brokers = 1{config} }}

[[producers]]
name = "in"
topic = "t"
count = 2
{producer}

[[phases]]
name = "only"
duration = "1s"
{rates}
"""


def _scenario(producer: str = "", rates: str = "", config: str = "") -> str:
    return SCENARIO.format(producer=producer, rates=rates, config=config)


def _line_of(text: str, fragment: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if fragment in line)


@pytest.mark.parametrize(
    ("producer", "bound"),
    [
        ("size = 100000000000", str(DEFAULT_MAX_MESSAGE_SIZE)),
        (f"size = {DEFAULT_MAX_MESSAGE_SIZE + 1}", "maxMessageSize"),
        ("size = 100000000000\nchunking = true", str(MAX_CHUNKED_SIZE)),
    ],
)
def test_a_size_above_the_bound_names_key_line_and_bound(producer: str, bound: str) -> None:
    text = _scenario(producer)
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text)
    message = str(caught.value)
    assert message.startswith(f"line {_line_of(text, 'size =')}: size ")
    assert bound in message
    assert "$.producers[0].size" in message


def test_sizes_up_to_the_bounds_are_accepted() -> None:
    parse_scenario(_scenario(f"size = {DEFAULT_MAX_MESSAGE_SIZE}"))
    parse_scenario(_scenario(f"size = {MAX_CHUNKED_SIZE}\nchunking = true"))


def test_the_started_clusters_max_message_size_is_the_bound() -> None:
    config = ", config = { maxMessageSize = 10485760 }"
    parse_scenario(_scenario("size = 10485760", config=config))
    with pytest.raises(ScenarioError, match="above 10485760 bytes"):
        parse_scenario(_scenario("size = 10485761", config=config))


@pytest.mark.parametrize(
    ("producer", "rates", "fragment"),
    [
        ("rate = 1e12", "", "rate = 1e12"),
        ("rate = inf", "", "rate = inf"),
        ("rate = nan", "", "rate = nan"),
        ("", "rates = { in = { from = 1, to = 1e9 } }", "rates ="),
    ],
)
def test_a_rate_beyond_what_producers_can_send_is_refused(
    producer: str, rates: str, fragment: str
) -> None:
    text = _scenario(producer, rates)
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text)
    message = str(caught.value)
    assert message.startswith(f"line {_line_of(text, fragment)}: rate ")


def test_the_rate_bound_grows_with_the_producers() -> None:
    parse_scenario(_scenario(f"rate = {2 * MAX_PRODUCER_RATE:g}"))
    with pytest.raises(ScenarioError, match="for 2 producer"):
        parse_scenario(_scenario(f"rate = {2 * MAX_PRODUCER_RATE + 1:.0f}"))


def test_a_binary_file_is_refused_with_its_name(tmp_path: Path) -> None:
    path = tmp_path / "scenario.toml"
    path.write_bytes(b"\x00\xb8\xff" * 100)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert "UTF-8" in str(caught.value)
