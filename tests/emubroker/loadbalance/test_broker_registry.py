"""Reading the registered brokers and their reports, nodes that do not parse included."""

from __future__ import annotations

import logging

import pytest

from emubroker.loadbalance.model.codec import encode
from emubroker.loadbalance.model.data import LocalBrokerData
from emubroker.loadbalance.runtime.broker_registry import (
    available_brokers,
    read_report,
    read_reports,
)
from emubroker.metadata import MemoryMetadataStore
from emubroker.metadata.paths import load_report_path

pytestmark = pytest.mark.anyio


async def test_reports_that_do_not_parse_are_logged_and_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = LocalBrokerData(web_service_url="http://a:8080", msg_rate_in=5.0)
    async with MemoryMetadataStore() as store:
        await store.put(load_report_path("a:8080"), encode(good), ephemeral=True)
        await store.put(load_report_path("b:8080"), b"{not json", ephemeral=True)
        await store.put(load_report_path("c:8080"), b'{"cpu": "lots"}', ephemeral=True)
        # The list is the nodes, as Pulsar lists them; reading skips what does not parse.
        assert await available_brokers(store) == ["a:8080", "b:8080", "c:8080"]
        with caplog.at_level(logging.WARNING):
            reports = await read_reports(store)
        assert list(reports) == ["a:8080"]
        assert reports["a:8080"].msg_rate_in == 5.0
        assert await read_report(store, "b:8080") is None
        assert await read_report(store, "nobody:1") is None
    warned = [r.getMessage() for r in caplog.records]
    assert any("load report of b:8080" in m for m in warned)
    assert any("load report of c:8080" in m for m in warned)
