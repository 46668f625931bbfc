"""The live dashboard's routes on one in-process broker: the page, its files, its JSON."""

from __future__ import annotations

import re

import pytest

from emubroker.admin.access import Check, rule_for
from emubroker.app import Broker
from emubroker.dashboard.assets import ASSETS, asset
from emubroker.loadbalance.model.codec import encode
from emubroker.loadbalance.model.data import LocalBrokerData
from emubroker.metadata.paths import load_report_path
from emubroker.naming import TopicName, topic_hash
from protocol.clock import FakeClock
from tests.emubroker.admin.conftest import Admin, Wire

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOPIC = "persistent://public/default/dash"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


async def test_the_page_and_its_files_are_served(admin: Admin) -> None:
    response = await admin.client.get("/dashboard", allow_redirects=False)
    assert (response.status, response.headers["Location"]) == (302, "/dashboard/")
    response = await admin.client.get("/dashboard/")
    assert (response.status, response.content_type) == (200, "text/html")
    assert 'src="/dashboard/static/dashboard.js"' in await response.text()
    for name, content_type in ASSETS.items():
        response = await admin.client.get(f"/dashboard/static/{name}")
        assert (response.status, response.content_type) == (200, content_type), name
    response = await admin.client.get("/dashboard/static/..%2F__init__.py")
    assert response.status == 404


def test_the_page_loads_nothing_from_elsewhere() -> None:
    html = asset("index.html").decode()
    references = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert references, html
    assert all(ref.startswith(("/dashboard/static/", "data:")) for ref in references), references
    css = asset("dashboard.css").decode()
    assert "@import" not in css
    assert "url(" not in css
    assert "@font-face" not in css
    script = asset("dashboard.js").decode()
    # The SVG namespace is a name, not a download; the script fetches only its own API.
    assert set(re.findall(r"https?://[^\s\"'`]+", script)) == {"http://www.w3.org/2000/svg"}


def test_the_dashboard_routes_need_a_super_user() -> None:
    for path in ("/dashboard/", "/dashboard/static/{name}", "/dashboard/api/state"):
        assert rule_for("GET", path).check is Check.SUPER_USER, path


async def test_the_state_shows_the_broker_its_bundles_and_topics(
    admin: Admin, wire: Wire, broker: Broker, fake_clock: FakeClock
) -> None:
    await wire.produce(TOPIC, 3)
    await wire.consumer(TOPIC, "sub")
    await fake_clock.advance(61)  # a bundle-stats sample (statsUpdateFrequencyInSecs)
    assert broker.admin is not None
    me = broker.admin.broker_id
    # The stored report lags (rewritten on large changes only): the page shows the fresh one.
    await broker.admin.metadata.put(
        load_report_path(me), encode(LocalBrokerData(web_service_url=f"http://{me}"))
    )
    status, state = await admin.get("/dashboard/api/state")
    assert status == 200, state
    assert state["self"] == me
    assert state["leader"] == me
    assert [(b["id"], b["leader"], b["reachable"]) for b in state["brokers"]] == [(me, True, True)]
    load = state["brokers"][0]["load"]
    assert set(load) >= {"cpu", "memory", "msgRateIn", "bundles"}
    # The report brought up to date, not the one stored at registration (no bundle then).
    assert (load["bundles"], load["topics"], load["producers"]) == (1, 1, 1)
    (namespace,) = [ns for ns in state["namespaces"] if ns["name"] == "public/default"]
    bundles = namespace["bundles"]
    assert bundles[0]["lower"] == 0
    assert bundles[-1]["upper"] == 0xFFFFFFFF
    hashed = topic_hash(TopicName.parse(TOPIC))
    (mine,) = [b for b in bundles if b["lower"] <= hashed < b["upper"]]
    assert mine["owner"] == me
    assert all(b["owner"] is None for b in bundles if b is not mine)
    (topic,) = state["topics"]
    assert (topic["name"], topic["broker"], topic["producers"], topic["consumers"]) == (
        TOPIC,
        me,
        1,
        1,
    )
    assert [(s["name"], s["backlog"], s["limit"]) for s in topic["subscriptions"]] == [
        ("sub", 3, None)
    ]
    placements = [d for d in state["decisions"] if d["event"] == "placement"]
    assert [(d["bundle"], d["dest"]) for d in placements] == [(mine["bundle"], me)]


async def test_an_admin_unload_is_one_unload_decision(
    admin: Admin, wire: Wire, broker: Broker
) -> None:
    await wire.produce(TOPIC, 1)
    assert broker.admin is not None
    me = broker.admin.broker_id
    (bundle,) = broker.admin.ownership.owned_bundles()
    await admin.ok("PUT", f"/admin/v2/namespaces/public/default/{bundle.bundle_range}/unload")
    assert broker.admin.trace_ring is not None
    rows = [r for r in broker.admin.trace_ring.rows() if r.event == "unload"]
    assert [(r.broker, r.bundle, r.source_broker, r.dest_broker, r.reason) for r in rows] == [
        (me, str(bundle), me, "", "admin")
    ]
    status, state = await admin.get("/dashboard/api/state")
    assert status == 200, state
    unloads = [d for d in state["decisions"] if d["event"] == "unload"]
    assert [(d["broker"], d["bundle"], d["source"], d["reason"]) for d in unloads] == [
        (me, str(bundle), me, "admin")
    ]


async def test_a_throttled_subscription_shows_its_limit(
    admin: Admin, wire: Wire, fake_clock: FakeClock
) -> None:
    await admin.ok(
        "POST",
        "/admin/v2/namespaces/public/default/subscriptionDispatchRate",
        json={"dispatchThrottlingRateInMsg": 50, "ratePeriodInSecond": 2},
    )
    await wire.produce(TOPIC, 1)
    await wire.consumer(TOPIC, "slow")
    for _ in range(100):  # the namespace watch brings the policy to the throttling
        _, state = await admin.get("/dashboard/api/state")
        (sub,) = state["topics"][0]["subscriptions"]
        if sub["limit"] is not None:
            break
        await fake_clock.advance(0.1)
    assert sub["limit"] == {"msg": 25.0, "bytes": None, "relative": False}
