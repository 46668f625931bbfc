"""The health check on the heartbeat topic, on both backends, without HTTP."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from emubroker.admin.health_check import HealthChecker, HealthCheckError, heartbeat_namespaces
from emubroker.app import open_broker
from emubroker.config import load_config
from emubroker.naming import NamespaceName, TopicName
from protocol.clock import FakeClock

pytestmark = pytest.mark.anyio


def test_heartbeat_namespaces_are_pulsars() -> None:
    v1, v2 = heartbeat_namespaces("c1", "10.0.0.1:8080")
    assert str(v1) == "pulsar/c1/10.0.0.1:8080"
    assert str(v2) == "pulsar/10.0.0.1:8080"
    assert v1 == NamespaceName.parse("pulsar/c1/10.0.0.1:8080")


async def test_the_check_round_trips_a_message_through_the_broker(fake_clock: FakeClock) -> None:
    config = load_config(overrides={"brokerServicePort": 6650, "webServicePort": 8080})
    async with open_broker(config, clock=fake_clock, listen=False, admin=False) as broker:
        checker = HealthChecker(
            cluster="standalone",
            broker_id="127.0.0.1:8080",
            connector=broker.connect_in_memory,
            clock=fake_clock,
        )
        await checker.check()
        await checker.check()
        topic = broker.topics.loaded_topic(TopicName.parse(checker.topics["V1"]))
        assert topic is not None
        assert topic.stats().msg_in == 2


async def test_a_check_that_hangs_times_out(fake_clock: FakeClock) -> None:
    async def hang(host: str, port: int) -> Any:
        await anyio.sleep_forever()

    # Shorter than the client's own 10 s connection timeout, so the check's deadline decides.
    checker = HealthChecker(
        cluster="c", broker_id="b:1", connector=hang, clock=fake_clock, timeout=5.0
    )
    failure: list[BaseException] = []

    async def run() -> None:
        try:
            await checker.check()
        except HealthCheckError as exc:
            failure.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await anyio.wait_all_tasks_blocked()
        await fake_clock.advance(4.9)
        assert not failure
        await fake_clock.advance(0.1)
    [error] = failure
    assert "timed out after 5.0 s" in str(error)


async def test_a_failure_names_its_cause(fake_clock: FakeClock) -> None:
    async def refuse(host: str, port: int) -> Any:
        raise OSError("refused")

    checker = HealthChecker(cluster="c", broker_id="b:1", connector=refuse, clock=fake_clock)
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            with pytest.raises(HealthCheckError, match=r"healthcheck failed: .*Error: .*refused"):
                await checker.check()

        tg.start_soon(run)
        await fake_clock.run_until_idle()
