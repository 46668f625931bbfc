"""A broker with ``emubrokerLoadBalancerTraceDir`` leaves a ``report`` row per report it wrote."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from emubroker.app import open_broker
from emubroker.config import load_config
from emubroker.loadbalance.trace.records import SCHEMA_VERSION
from protocol.clock import FakeClock

pytestmark = pytest.mark.anyio


async def test_each_report_written_leaves_a_row(tmp_path: Path, fake_clock: FakeClock) -> None:
    config = load_config(
        overrides={
            "brokerServicePort": 6650,
            "webServicePort": 8080,
            "emubrokerLoadBalancerTraceDir": str(tmp_path),
            "emubrokerResourceUsageSource": "model",
            "loadBalancerReportUpdateMaxIntervalMinutes": 0.1,  # a write every 6 s at least
        }
    )
    async with open_broker(config, clock=fake_clock, listen=False, admin=False):
        await fake_clock.advance(10.0)
    # The file is complete once the broker stopped (the one written when it stopped).
    rows = pq.read_table(tmp_path / "loadbalance-127.0.0.1_8080-00001.parquet").to_pylist()
    assert [(r["event"], r["reason"]) for r in rows] == [
        ("report", "first"),
        ("report", "max_interval"),
    ]
    first = rows[0]
    assert first["schema_version"] == SCHEMA_VERSION
    assert first["broker"] == first["source_broker"] == "127.0.0.1:8080"
    assert first["load_manager"] == "modular"
    assert first["wall_ns"] < rows[1]["wall_ns"]
    assert first["bundle"] == ""
