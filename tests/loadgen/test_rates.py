"""The rates loadgen prints are messages over the time they flowed in, not over the drain.

Whole runs on the simulator's virtual clock (`emubroker simulate`), so the numbers are exact:
a run at R msg/s says R msg/s in its closing lines, its manifest's totals and OMB's result,
whatever seconds of draining followed the traffic.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from emubroker import simulate


def scenario(path: Path, *, producer: str, warmup: float) -> Path:
    path.write_text(
        f"""
name = "rates"
seed = 1
warmup = {warmup}
[cluster.start]
brokers = 1
[simulate]
epoch = 1_700_000_000
[[producers]]
name = "p"
topic = "t"
size = 100
{producer}
[[consumers]]
name = "c"
topic = "t"
subscription = "s"
[[phases]]
name = "run"
duration = "8s"
"""
    )
    return path


@pytest.mark.parametrize(
    ("producer", "warmup", "messages", "seconds", "rate"),
    [
        # 7 s after a 1 s warm-up, then a drain second that has ticks but hardly any messages
        ("rate = 200", 1.0, 1400, 7.0, 200.0),
        # 600 messages at 300 msg/s end the traffic at 2 s; the run's schedule lasts 8 s
        ("rate = 300\nmessages = 600", 0.0, 600, 2.0, 300.0),
    ],
)
def test_the_aggregate_rate_is_over_the_time_after_the_warm_up_the_traffic_lasted(
    tmp_path: Path, producer: str, warmup: float, messages: int, seconds: float, rate: float
) -> None:
    out = io.StringIO()
    result = simulate.run(
        scenario(tmp_path / "s.toml", producer=producer, warmup=warmup),
        tmp_path / "run",
        console=Console(file=out, width=400),
    )
    assert result.run.exit_code == 0
    lines = out.getvalue().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("Aggregated"))
    assert lines[header] == f"Aggregated over {seconds:.1f} s (after the warm-up):"
    for line, role in zip(lines[header + 1 : header + 3], ("produced", "received"), strict=True):
        match = re.match(rf"  Throughput {role}: ([\d,]+) msg --- ([\d,.]+) msg/s --- ", line)
        assert match, line
        assert int(match[1].replace(",", "")) == messages
        assert float(match[2].replace(",", "")) == pytest.approx(rate, rel=0.002)
    totals = json.loads((tmp_path / "run" / "manifest.json").read_text())["totals"]
    assert totals["produced"] == totals["consumed"] == messages
    assert totals["produce_seconds"] == pytest.approx(seconds, rel=0.002)
    assert totals["consume_seconds"] == pytest.approx(seconds, rel=0.002)
    omb = json.loads((tmp_path / "run" / "omb-result.json").read_text())
    # One OMB point (under 10 s, warm-up included), its rates over the traffic's time too.
    assert omb["publishRate"] == [pytest.approx(rate, rel=0.002)]
    assert omb["consumeRate"] == omb["publishRate"]
