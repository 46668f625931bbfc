"""The dashboard's address after the ready line of ``emubroker standalone`` and ``cluster``."""

from __future__ import annotations

import time
import urllib.request
from types import SimpleNamespace

import pytest

from emubroker.cluster.cli import _Output
from tests.support.broker import standalone_process

pytestmark = pytest.mark.integration


def test_standalone_prints_the_dashboard_after_its_ready_line() -> None:
    with standalone_process() as broker:
        ready = next(i for i, line in enumerate(broker.output) if "ready" in line)
        deadline = time.monotonic() + 10
        while len(broker.output) <= ready + 1 and time.monotonic() < deadline:
            time.sleep(0.01)  # the drain thread reads the next line
        assert broker.output[ready + 1] == f"dashboard: {broker.admin_url}/dashboard/\n"
        with urllib.request.urlopen(f"{broker.admin_url}/dashboard/", timeout=10) as page:
            assert page.status == 200
            assert b"dashboard.js" in page.read()


def test_the_cluster_prints_the_dashboard_after_its_ready_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    brokers = [
        SimpleNamespace(index=i, service_url=f"pulsar://h:{6650 + i}", admin_url=f"http://h:{i}")
        for i in range(2)
    ]
    state = SimpleNamespace(
        brokers=brokers, stub=SimpleNamespace(url="stub://h:1"), run_dir="/r", service_url="s"
    )
    _Output(as_json=False).ready(state)  # type: ignore[arg-type]
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("emubroker cluster ready:")
    assert lines[1] == "dashboard: http://h:0/dashboard/"
