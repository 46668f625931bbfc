"""``emubroker simulate --real-time`` serves the live dashboard of the simulated cluster."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from emubroker import simulate
from emubroker.simulate.scenario import SimulationError
from tests.emubroker.simulate.scenarios import shedding_scenario

BROKERS = ["127.0.0.1:8080", "127.0.0.1:8081", "127.0.0.1:8082"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _state(url: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            body: dict[str, Any] = json.load(response)
            return body
    except (OSError, urllib.error.URLError, ValueError):
        return None


@pytest.mark.timeout(120)
def test_a_real_time_simulation_serves_its_brokers_and_leader(tmp_path: Path) -> None:
    # Eight seconds of real time, shedding at 6 s: the page's JSON is polled as a viewer would.
    scenario = simulate.parse_simulation(
        shedding_scenario(seconds=8, shed_minutes=0.1, threshold=12, margin=8, broker_2_rate=200)
    )
    port = _free_port()
    results: list[simulate.SimulationResult] = []
    run = threading.Thread(
        target=lambda: results.append(
            simulate.run(scenario, tmp_path / "run", virtual=False, dashboard_port=port)
        )
    )
    run.start()
    seen: dict[str, Any] | None = None
    url = f"http://127.0.0.1:{port}/dashboard/api/state"
    deadline = time.monotonic() + 60
    while run.is_alive() and time.monotonic() < deadline:
        state = _state(url)
        if state is not None and state["leader"] and state["topics"]:
            seen = state
            if any(d["event"] == "placement" for d in state["decisions"]):
                break
        time.sleep(0.2)
    run.join(90)
    assert results, "the simulation did not finish"
    assert seen is not None, "the dashboard never answered with a leader and topics"
    assert [(b["id"], b["reachable"]) for b in seen["brokers"]] == [(b, True) for b in BROKERS]
    assert seen["leader"] == "127.0.0.1:8080"
    assert all(b["load"] is not None for b in seen["brokers"])
    owners = {b["owner"] for ns in seen["namespaces"] for b in ns["bundles"]}
    assert owners & set(BROKERS)
    assert {t["broker"] for t in seen["topics"]} <= set(BROKERS)
    assert any(d["event"] == "placement" for d in seen["decisions"])
    # Once the run is over, nothing listens there any more.
    assert _state(url) is None


def test_a_virtual_simulation_has_no_live_page(tmp_path: Path) -> None:
    scenario = simulate.parse_simulation(shedding_scenario(seconds=1, shed_minutes=1))
    with pytest.raises(SimulationError, match="needs --real-time"):
        simulate.run(scenario, tmp_path / "run", dashboard_port=0)
