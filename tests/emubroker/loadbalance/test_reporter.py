"""A broker's registration and load reports over an in-memory metadata tree, on a FakeClock."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec
import pytest

from emubroker.config import BrokerConfig, load_config
from emubroker.loadbalance.model.data import LocalBrokerData
from emubroker.loadbalance.model.usage import ResourceUsage, SystemResourceUsage
from emubroker.loadbalance.reporting.bundle_sampler import TopicTraffic
from emubroker.loadbalance.reporting.reporter import BrokerRegistrationError, LoadReporter
from emubroker.loadbalance.reporting.usage_sources import (
    BrokerActivity,
    ModelUsageSource,
    ResourceLimits,
)
from emubroker.loadbalance.runtime.broker_registry import available_brokers, read_report
from emubroker.metadata import MemoryMetadataStore, MemoryMetadataTree
from protocol.clock import FakeClock

pytestmark = pytest.mark.anyio

BROKER = "127.0.0.1:8080"
PATH = f"/loadbalance/brokers/{BROKER}"
BUNDLE = "public/default/0x00000000_0x40000000"
LIMITS = ResourceLimits(processors=2, memory_mb=1024, nic_kbps=1_000_000)


class SteppedUsage:
    """A usage source whose CPU percentage (of all processors) the test sets."""

    def __init__(self) -> None:
        self.cpu_percent = 0.0
        self.samples: list[tuple[float, BrokerActivity]] = []

    def sample(self, now: float, activity: BrokerActivity) -> SystemResourceUsage:
        self.samples.append((now, activity))
        return SystemResourceUsage(
            cpu=ResourceUsage(self.cpu_percent * LIMITS.processors, LIMITS.cpu),
            memory=ResourceUsage(100, 1024),
            direct_memory=ResourceUsage(0, 1024),
            bandwidth_in=ResourceUsage(0, LIMITS.nic_kbps),
            bandwidth_out=ResourceUsage(0, LIMITS.nic_kbps),
        )


class Topics:
    """Loaded topics whose counters the test moves."""

    def __init__(self) -> None:
        self.counters: dict[str, TopicTraffic] = {}

    def publish(self, name: str, messages: int, size: int, *, bundle: str = BUNDLE) -> None:
        old = self.counters.get(name) or TopicTraffic(name, bundle, 0, 0, 0, 0, 1, 0)
        self.counters[name] = old._replace(
            msg_in=old.msg_in + messages, bytes_in=old.bytes_in + messages * size
        )

    def __call__(self) -> list[TopicTraffic]:
        return list(self.counters.values())


def conf(**overrides: Any) -> BrokerConfig:
    base: dict[str, Any] = {
        "loadBalancerReportUpdateMinIntervalMillis": 5000,
        "loadBalancerHostUsageCheckIntervalMinutes": 1 / 60,  # every second
        "statsUpdateFrequencyInSecs": 1,
    }
    return load_config(overrides=base | overrides)


def initial() -> LocalBrokerData:
    return LocalBrokerData(
        web_service_url=f"http://{BROKER}",
        pulsar_service_url="pulsar://127.0.0.1:6650",
        broker_version_string="0.1.0",
        load_manager_class_name="org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
    )


def reporter(
    store: Any,
    clock: FakeClock,
    *,
    config: BrokerConfig | None = None,
    usage: Any = None,
    topics: Any = None,
    traffic: Any = None,
    data: LocalBrokerData | None = None,
    written: list[tuple[str, float]] | None = None,
) -> LoadReporter:
    live = config or conf()
    log = written if written is not None else []
    return LoadReporter(
        store,
        clock,
        broker_id=BROKER,
        initial=data or initial(),
        config=lambda: live,
        usage=usage or SteppedUsage(),
        topics=topics or (lambda: []),
        traffic=traffic or (lambda: (0, 0, 0)),
        on_written=lambda report, why: log.append((why, report.cpu.usage)),
    )


@asynccontextmanager
async def running(service: LoadReporter) -> AsyncIterator[anyio.CancelScope]:
    async with anyio.create_task_group() as tg:
        scope = anyio.CancelScope()

        async def run(*, task_status: anyio.abc.TaskStatus[None]) -> None:
            with scope:
                await service.run(task_status=task_status)

        await tg.start(run)
        yield scope
        scope.cancel()


@pytest.fixture
def tree() -> MemoryMetadataTree:
    return MemoryMetadataTree()


@pytest.fixture
def observer(tree: MemoryMetadataTree) -> MemoryMetadataStore:
    return tree.open_session()


async def node_json(store: Any, path: str = PATH) -> dict[str, Any]:
    node = await store.get(path)
    assert node is not None, path
    data: dict[str, Any] = json.loads(node.value)
    return data


async def test_registration_writes_the_report_with_pulsars_field_names(
    tree: MemoryMetadataTree, observer: MemoryMetadataStore, fake_clock: FakeClock
) -> None:
    topics = Topics()
    topics.publish("persistent://public/default/t", 10, 100)
    async with tree.open_session() as store, running(reporter(store, fake_clock, topics=topics)):
        node = await store.get(PATH)
        assert node is not None
        assert node.ephemeral
        data = await node_json(observer)
        assert data["webServiceUrl"] == f"http://{BROKER}"
        assert data["pulsarServiceUrl"] == "pulsar://127.0.0.1:6650"
        assert data["loadReportType"] == "LocalBrokerData"
        assert data["brokerVersionString"] == "0.1.0"
        assert data["bundles"] == [BUNDLE]
        assert data["numTopics"] == 1
        assert data["numProducers"] == 1
        assert data["lastStats"][BUNDLE]["topics"] == 1
        # Stamped with the wall clock in ms, as Pulsar's System.currentTimeMillis().
        assert data["lastUpdate"] == data["startTimestamp"] == fake_clock.wall_ns() // 1_000_000
        assert data["cpu"] == {"usage": 0.0, "limit": 200.0}
        # Pulsar's start() also writes an empty time average for the broker.
        average = await node_json(observer, f"/loadbalance/broker-time-average/{BROKER}")
        assert average["shortTermMsgRateIn"] == 0.0
        assert await available_brokers(observer) == [BROKER]
    # Stopped: the node is gone at once (not only when the session ends).
    assert await observer.get(PATH) is None
    assert await available_brokers(observer) == []


async def test_a_report_is_written_only_when_usage_moves_past_the_threshold(
    tree: MemoryMetadataTree,
    observer: MemoryMetadataStore,
    fake_clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    usage = SteppedUsage()
    reasons: list[tuple[str, float]] = []
    caplog.set_level(logging.INFO, logger="emubroker.loadbalance.reporting.reporter")
    async with (
        tree.open_session() as store,
        running(reporter(store, fake_clock, usage=usage, written=reasons)),
    ):
        first = (await observer.get(PATH)).version  # type: ignore[union-attr]
        usage.cpu_percent = 9.0  # 9 points: below the 10 % threshold
        await fake_clock.advance(5.0)
        assert (await observer.get(PATH)).version == first  # type: ignore[union-attr]
        usage.cpu_percent = 25.0  # 25 points from the written 0
        await fake_clock.advance(5.0)
        written = await observer.get(PATH)
        assert written is not None
        assert written.version == first + 1
        data = json.loads(written.value)
        assert data["cpu"] == {"usage": 50.0, "limit": 200.0}
        assert data["lastUpdate"] == fake_clock.wall_ns() // 1_000_000
        [line] = [r.getMessage() for r in caplog.records if "load report written" in r.getMessage()]
        assert "resourceUsage changed by 25.00 points" in line
        assert "loadBalancerReportUpdateThresholdPercentage=10" in line
        # Checked every loadBalancerReportUpdateMinIntervalMillis, not more often.
        usage.cpu_percent = 60.0
        await fake_clock.advance(4.9)
        assert (await observer.get(PATH)).version == first + 1  # type: ignore[union-attr]
        await fake_clock.advance(0.1)
        assert (await observer.get(PATH)).version == first + 2  # type: ignore[union-attr]
    # Every write was handed on with its reason (the load-balancer trace's report rows).
    assert reasons == [("first", 0.0), ("change", 50.0), ("change", 120.0)]


async def test_traffic_moves_the_report_through_the_message_rate(
    tree: MemoryMetadataTree, observer: MemoryMetadataStore, fake_clock: FakeClock
) -> None:
    topics = Topics()
    topics.publish("persistent://public/default/t", 1, 100)
    async with (
        tree.open_session() as store,
        running(reporter(store, fake_clock, topics=topics)),
    ):
        await fake_clock.advance(5.0)
        before = await node_json(observer)
        assert before["msgRateIn"] == 0.0
        # 50 messages of 100 bytes every second: each stats window sees 50 msg/s.
        for _ in range(5):
            topics.publish("persistent://public/default/t", 50, 100)
            await fake_clock.advance(1.0)
        data = await node_json(observer)
        assert data["msgRateIn"] == pytest.approx(50.0)
        assert data["msgThroughputIn"] == pytest.approx(5000.0)
        assert data["lastStats"][BUNDLE]["msgRateIn"] == pytest.approx(50.0)
        assert data["lastUpdate"] == fake_clock.wall_ns() // 1_000_000


async def test_max_interval_forces_a_write_and_accepts_fractions(
    tree: MemoryMetadataTree,
    observer: MemoryMetadataStore,
    fake_clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="emubroker.loadbalance.reporting.reporter")
    config = conf(loadBalancerReportUpdateMaxIntervalMinutes=0.25)  # 15 s
    written: list[tuple[str, float]] = []
    async with (
        tree.open_session() as store,
        running(reporter(store, fake_clock, config=config, written=written)),
    ):
        first = (await observer.get(PATH)).version  # type: ignore[union-attr]
        await fake_clock.advance(15.0)  # exactly 15 s: not more than the interval yet
        assert (await observer.get(PATH)).version == first  # type: ignore[union-attr]
        await fake_clock.advance(5.0)
        assert (await observer.get(PATH)).version == first + 1  # type: ignore[union-attr]
        [line] = [r.getMessage() for r in caplog.records if "load report written" in r.getMessage()]
        assert "20.0 s since the last write" in line
        assert "loadBalancerReportUpdateMaxIntervalMinutes=0.25" in line
    assert [why for why, _ in written] == ["first", "max_interval"]


async def test_the_node_comes_back_when_the_session_expires(
    tree: MemoryMetadataTree, observer: MemoryMetadataStore, fake_clock: FakeClock
) -> None:
    written: list[tuple[str, float]] = []
    async with tree.open_session() as store, running(reporter(store, fake_clock, written=written)):
        await anyio.wait_all_tasks_blocked()  # the reporter watches its node
        await store.expire_session()
        await anyio.wait_all_tasks_blocked()
        node = await observer.get(PATH)
        assert node is not None
        assert node.ephemeral
        assert (await store.get(PATH)).created_by_self  # type: ignore[union-attr]
        assert [why for why, _ in written] == ["first", "first"]
    assert await observer.get(PATH) is None


async def test_the_node_vanishes_with_the_session(
    tree: MemoryMetadataTree, observer: MemoryMetadataStore, fake_clock: FakeClock
) -> None:
    store = tree.open_session()
    async with anyio.create_task_group() as tg:
        await tg.start(reporter(store, fake_clock).run)
        assert await available_brokers(observer) == [BROKER]
        await store.aclose()  # the broker's session ends: the report ends its service
    assert await available_brokers(observer) == []


async def test_a_node_left_by_an_earlier_session_of_this_broker_is_replaced(
    tree: MemoryMetadataTree, observer: MemoryMetadataStore, fake_clock: FakeClock
) -> None:
    async with tree.open_session() as old:
        await old.put(PATH, msgspec.json.encode(initial()), ephemeral=True)
        async with tree.open_session() as store, running(reporter(store, fake_clock)):
            node = await store.get(PATH)
            assert node is not None
            assert node.created_by_self
            assert "loadReportType" in json.loads(node.value)


async def test_a_node_that_does_not_parse_is_replaced(
    tree: MemoryMetadataTree, observer: MemoryMetadataStore, fake_clock: FakeClock
) -> None:
    async with tree.open_session() as other:
        await other.put(PATH, b"not json", ephemeral=True)
        async with tree.open_session() as store, running(reporter(store, fake_clock)):
            assert (await read_report(observer, BROKER)) is not None


async def test_another_broker_with_the_same_id_stops_the_start(
    tree: MemoryMetadataTree, fake_clock: FakeClock
) -> None:
    impostor = LocalBrokerData(
        web_service_url=f"http://{BROKER}", pulsar_service_url="pulsar://127.0.0.1:7777"
    )
    async with tree.open_session() as other, tree.open_session() as store:
        await other.put(PATH, msgspec.json.encode(impostor), ephemeral=True)
        with pytest.raises(BrokerRegistrationError, match="already registered"):
            await reporter(store, fake_clock).run()
        assert await store.get(PATH) is not None  # the other broker's node is left alone


async def test_a_failed_write_is_logged_and_the_next_round_runs(
    tree: MemoryMetadataTree,
    observer: MemoryMetadataStore,
    fake_clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    usage = SteppedUsage()
    calls = {"n": 0}

    def flaky_traffic() -> tuple[int, int, int]:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("counter unavailable")
        return (0, 0, 0)

    async with (
        tree.open_session() as store,
        running(reporter(store, fake_clock, usage=usage, traffic=flaky_traffic)),
    ):
        await fake_clock.advance(3.0)  # the second usage round fails
        assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [
            f"load report of {BROKER}: sampling the resource usage failed"
        ]
        usage.cpu_percent = 50.0
        await fake_clock.advance(2.0)
        assert (await node_json(observer))["cpu"]["usage"] == 100.0


async def test_model_source_reports_the_brokers_own_rates(
    tree: MemoryMetadataTree, observer: MemoryMetadataStore, fake_clock: FakeClock
) -> None:
    topics = Topics()
    topics.publish("persistent://public/default/t", 1, 1000)
    model = ModelUsageSource(LIMITS, msg_rate_per_core=1000.0)
    async with (
        tree.open_session() as store,
        running(reporter(store, fake_clock, usage=model, topics=topics)),
    ):
        for _ in range(5):
            topics.publish("persistent://public/default/t", 500, 1000)  # 500 msg/s
            await fake_clock.advance(1.0)
        data = await node_json(observer)
        # 500 msg/s over 1000 msg/s per core: 50 % of one core = 25 % of two.
        assert data["cpu"] == {"usage": 50.0, "limit": 200.0}
        # 500 kB/s = 4000 kbit/s.
        assert data["bandwidthIn"] == {"usage": 4000.0, "limit": 1_000_000.0}
        assert data["msgRateIn"] == 500.0


async def test_no_report_is_written_while_the_load_balancer_is_disabled(
    tree: MemoryMetadataTree, observer: MemoryMetadataStore, fake_clock: FakeClock
) -> None:
    usage = SteppedUsage()
    live = {"config": conf(loadBalancerEnabled=False)}
    service = LoadReporter(
        tree.open_session(),
        fake_clock,
        broker_id=BROKER,
        initial=initial(),
        config=lambda: live["config"],
        usage=usage,
        topics=lambda: [],
        traffic=lambda: (0, 0, 0),
    )
    async with running(service):
        first = (await observer.get(PATH)).version  # type: ignore[union-attr]
        usage.cpu_percent = 80.0
        await fake_clock.advance(10.0)
        assert (await observer.get(PATH)).version == first  # type: ignore[union-attr]
        live["config"] = conf(loadBalancerEnabled=True)  # dynamic
        await fake_clock.advance(5.0)
        assert (await node_json(observer))["cpu"]["usage"] == 160.0
