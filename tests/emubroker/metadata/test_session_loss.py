"""A broker stops, cleanly and at once, when its metadata session is lost (``session_loss``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import pytest

from emubroker.app import open_broker
from emubroker.metadata import MetadataStoreError
from emubroker.metadata.remote import RemoteMetadataStore
from emubroker.metadata.session_loss import MetadataSessionLostError, stop_on_session_loss
from tests.storage_stub.conftest import client_of, running_stub

if TYPE_CHECKING:
    from protocol.clock import FakeClock

pytestmark = pytest.mark.anyio

SESSION_TIMEOUT = 2.0


async def test_a_broker_whose_stub_stays_away_a_session_timeout_stops_at_once(
    fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_stub(fake_clock) as board, client_of(board, fake_clock) as client:
        store = await RemoteMetadataStore.open(client, session_timeout=SESSION_TIMEOUT)
        still_running_at: list[float] = []

        async def run_broker() -> None:
            async with (
                stop_on_session_loss(store),
                open_broker(clock=fake_clock, metadata=store, listen=False, admin=False),
            ):
                board.refuse = True  # the stub is gone (kill -9) and stays away
                await board.cut()
                await fake_clock.advance(SESSION_TIMEOUT - 0.1)
                still_running_at.append(fake_clock.now())
                await fake_clock.advance(60.0)  # cancelled when the session is lost

        with pytest.raises(MetadataSessionLostError, match="answered no heartbeat"):
            await run_broker()
        assert still_running_at == [pytest.approx(SESSION_TIMEOUT - 0.1)]
        # Stopped a session timeout after the last answered heartbeat, waiting for nothing
        # on the way out (every wait for the stub would have been on this clock).
        assert fake_clock.now() == pytest.approx(SESSION_TIMEOUT)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert errors[0].startswith("metadata session lost: the stub answered no heartbeat")
    assert errors[0].endswith("shutting down the broker (zookeeperSessionExpiredPolicy=shutdown)")


async def test_a_store_failure_escaping_a_serving_broker_stops_it_the_same_way(
    fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_stub(fake_clock) as board, client_of(board, fake_clock) as client:
        store = await RemoteMetadataStore.open(client, session_timeout=SESSION_TIMEOUT)

        async def fail(*, serving: bool) -> None:
            async with stop_on_session_loss(store) as guard:
                if serving:
                    guard.serving()
                raise MetadataStoreError("gone")

        with pytest.raises(MetadataStoreError, match=r"^gone$"):  # a failure to start
            await fail(serving=False)
        assert caplog.records == []
        with pytest.raises(MetadataSessionLostError, match="metadata store failed: gone"):
            await fail(serving=True)
        await store.aclose()
    assert [r.levelno for r in caplog.records if r.name.endswith("session_loss")] == [logging.ERROR]


async def test_a_reachable_store_leaves_the_broker_running(fake_clock: FakeClock) -> None:
    async with running_stub(fake_clock) as board, client_of(board, fake_clock) as client:
        store = await RemoteMetadataStore.open(client, session_timeout=SESSION_TIMEOUT)
        async with stop_on_session_loss(store):
            await board.cut()  # a broken connection, reconnected at once, loses nothing
            await fake_clock.advance(10 * SESSION_TIMEOUT)
        await store.aclose()
